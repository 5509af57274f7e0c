"""OAuth through the documented configuration, against a real server behind OAuth.

The server (`servers/oauth.py`) has its own authorization server and hands out opaque
tokens; its tools echo the caller's token in a result, an error and a log message. The
token must reach the server, and never the records, events, logs or errors of the loop.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from langgraph.checkpoint.memory import InMemorySaver
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from processes import free_port, serving

from agentloop import MCPToolset, ModelOptions, create_tool_loop, install_log_redaction
from agentloop.errors import ConfigurationError, MCPTransportError
from agentloop.mcp import MCPAuth
from agentloop.testing import ScriptedChatModel, plan_reply

pytestmark = pytest.mark.integration

SERVER = Path(__file__).with_name("servers") / "oauth.py"
CLIENT_ID, CLIENT_SECRET = "agentloop-test", "client-secret-for-tests"


@pytest.fixture(scope="module")
def oauth_server() -> Iterator[str]:
    port = free_port()
    with serving([sys.executable, str(SERVER), str(port)], port, "OAuth MCP server"):
        yield f"http://127.0.0.1:{port}/mcp"


class AppStorage:
    """Token storage an app provides (the `mcp` SDK's `TokenStorage` protocol)."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class HeadlessBrowser:
    """The app's redirect and callback handlers, with no person: follow, take the code."""

    def __init__(self) -> None:
        self.visited: list[str] = []
        self._answer: tuple[str, str | None] = ("", None)

    async def redirect(self, url: str) -> None:
        self.visited.append(url)
        async with httpx.AsyncClient() as client:
            response = await client.get(url, follow_redirects=False)
        query = parse_qs(urlsplit(response.headers["location"]).query)
        self._answer = (query["code"][0], query["state"][0])

    async def callback(self) -> tuple[str, str | None]:
        return self._answer


def _loop(toolset: MCPToolset) -> Any:
    planner = ScriptedChatModel(
        [
            plan_reply(
                "execute",
                [
                    {"tool_name": "whoami", "tool_kwargs": {}},
                    {"tool_name": "fail", "tool_kwargs": {}},
                ],
            ),
            plan_reply("response"),
        ]
    )
    return create_tool_loop(
        planner,
        [toolset],
        models=ModelOptions(answer_model=ScriptedChatModel(["done"])),
        checkpointer=InMemorySaver(),
    )


async def _run(graph: Any, entry: str) -> tuple[dict[str, Any], list[Any]]:
    config = {"configurable": {"thread_id": f"auth-{entry}"}}
    events: list[Any] = []
    out: dict[str, Any] = {}
    payload = {"user_input": "who am I?"}
    if entry == "invoke":
        for mode, chunk in graph.stream(payload, config, stream_mode=["custom", "values"]):
            (events.append(chunk) if mode == "custom" else out.update(chunk))
    else:
        async for mode, chunk in graph.astream(payload, config, stream_mode=["custom", "values"]):
            (events.append(chunk) if mode == "custom" else out.update(chunk))
    return out, events


def _assert_token_kept_out(
    token: str, out: dict[str, Any], events: list[Any], logs: str, graph: Any, entry: str
) -> None:
    whoami, fail = out["tool_logs"]
    assert whoami["success"], whoami
    assert "you hold [REDACTED]" in str(whoami["result"])  # the server saw the token
    assert not fail["success"]
    assert "refused token [REDACTED]" in str(fail["error"])
    assert token not in json.dumps(out, default=str)
    assert token not in json.dumps(events, default=str)
    assert any(e.get("type") == "mcp_log" for e in events)  # the log message came
    assert token not in logs
    state = graph.get_state({"configurable": {"thread_id": f"auth-{entry}"}})
    assert token not in json.dumps(state.values, default=str)


@pytest.mark.parametrize("entry", ["invoke", "ainvoke"])
async def test_client_credentials_from_the_config_keep_the_token_out(
    oauth_server: str, entry: str, caplog: pytest.LogCaptureFixture
) -> None:
    storage = AppStorage()
    config = {
        "mcpServers": {
            "secure": {
                "url": oauth_server,
                "auth": {
                    "flow": "client_credentials",
                    "client_id": CLIENT_ID,
                    "client_secret": CLIENT_SECRET,
                    "scopes": ["mcp"],
                    "issuer": oauth_server.removesuffix("/mcp"),
                },
            }
        }
    }
    caplog.set_level(logging.DEBUG)
    toolset = MCPToolset(config, auth={"secure": MCPAuth(storage=storage)})
    install_log_redaction(toolset.redact)  # the app's logs: its secrets and tokens
    with toolset:
        assert {t.name for t in toolset.tools} == {"whoami", "fail"}
        graph = _loop(toolset)
        out, events = await _run(graph, entry)
    assert storage.tokens is not None  # the app's storage holds the token
    token = storage.tokens.access_token
    assert token.startswith("opaque-")
    _assert_token_kept_out(token, out, events, caplog.text, graph, entry)
    assert CLIENT_SECRET not in caplog.text


async def test_authorization_code_with_the_apps_handlers(
    oauth_server: str, caplog: pytest.LogCaptureFixture
) -> None:
    storage, browser = AppStorage(), HeadlessBrowser()
    config = {"mcpServers": {"secure": {"url": oauth_server, "auth": {"scopes": ["mcp"]}}}}
    auth = MCPAuth(
        redirect_handler=browser.redirect, callback_handler=browser.callback, storage=storage
    )
    caplog.set_level(logging.DEBUG)
    toolset = MCPToolset(config, auth={"secure": auth})
    install_log_redaction(toolset.redact)  # the app's logs: its secrets and tokens
    with toolset:
        graph = _loop(toolset)
        out, events = await _run(graph, "ainvoke")
    (visited,) = browser.visited  # one authorization for every call of the toolset
    assert "code_challenge=" in visited and "scope=mcp" in visited
    assert storage.client is not None and storage.client.client_id.startswith("registered-")
    assert storage.tokens is not None
    _assert_token_kept_out(storage.tokens.access_token, out, events, caplog.text, graph, "ainvoke")


def test_a_wrong_client_secret_fails_without_showing_it(oauth_server: str) -> None:
    wrong = "wrong-secret-that-must-not-show"
    config = {
        "mcpServers": {
            "secure": {
                "url": oauth_server,
                "required": True,
                "auth": {
                    "flow": "client_credentials",
                    "client_id": CLIENT_ID,
                    "client_secret": wrong,
                    "issuer": oauth_server.removesuffix("/mcp"),
                },
            }
        }
    }
    with (
        MCPToolset(config, startup_timeout_s=20) as toolset,
        pytest.raises(MCPTransportError) as raised,
    ):
        _ = toolset.tools
    assert wrong not in str(raised.value)
    assert "secure" in str(raised.value)


def test_authorization_code_without_the_handlers_is_a_configuration_error(
    oauth_server: str,
) -> None:
    config = {
        "mcpServers": {"secure": {"url": oauth_server, "auth": {"flow": "authorization_code"}}}
    }
    with pytest.raises(ConfigurationError, match="redirect_handler"):
        MCPToolset(config)
