"""OAuth through the documented configuration, against a real server behind OAuth.

The server (`servers/oauth.py`) has its own authorization server and hands out opaque
tokens; its tools echo the caller's token in a result, an error, a log message and a
question to the user. The token must reach the server, and never the records, events,
logs, errors, questions (an interrupt's value, a handler's argument) or checkpoints of
the loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from processes import free_port, serving
from third_party import SERVER_PYTHON

from agentloop import (
    GovernanceOptions,
    MCPToolset,
    ModelOptions,
    create_tool_loop,
    install_log_redaction,
)
from agentloop.errors import ConfigurationError, MCPTransportError
from agentloop.mcp import MCPAuth
from agentloop.testing import ScriptedChatModel, plan_reply

pytestmark = pytest.mark.integration

SERVER = Path(__file__).with_name("servers") / "oauth.py"
CLIENT_ID, CLIENT_SECRET = "agentloop-test", "client-secret-for-tests"


@pytest.fixture(scope="module")
def oauth_server() -> Iterator[str]:
    port = free_port()
    with serving([SERVER_PYTHON, str(SERVER), str(port)], port, "OAuth MCP server"):
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
        assert {t.name for t in toolset.tools} == {"whoami", "fail", "confirm"}
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


# -- a question that quotes the token --------------------------------------------------------


def client_credentials(url: str) -> dict[str, Any]:
    auth = {
        "flow": "client_credentials",
        "client_id": CLIENT_ID,
        "client_secret": CLIENT_SECRET,
        "issuer": url.removesuffix("/mcp"),
    }
    return {"mcpServers": {"secure": {"url": url, "auth": auth}}}


def confirming_loop(toolset: MCPToolset, saver: InMemorySaver) -> Any:
    planner = ScriptedChatModel(
        [
            plan_reply("execute", [{"tool_name": "confirm", "tool_kwargs": {}}]),
            plan_reply("response"),
        ]
    )
    return create_tool_loop(
        planner,
        [toolset],
        models=ModelOptions(answer_model=ScriptedChatModel(["done"])),
        checkpointer=saver,
    )


async def run_seen(graph: Any, payload: Any, config: Any, entry: str) -> list[Any]:
    """Run; return all it streamed (`astream_events`, or every stream mode under `invoke`)."""
    if entry == "invoke":
        modes = ["values", "updates", "custom", "messages", "tasks", "checkpoints"]
        return await asyncio.to_thread(
            lambda: list(graph.stream(payload, config, stream_mode=modes))
        )
    return [event async for event in graph.astream_events(payload, config, version="v2")]


def stored(saver: InMemorySaver) -> str:
    """Every checkpoint and write the saver holds, as their bytes show."""
    return repr(saver.storage) + repr(saver.writes) + repr(saver.blobs)


ANSWER = {"action": "accept", "content": {"note": "go"}}


@pytest.mark.parametrize("entry", ["invoke", "ainvoke"])
async def test_a_question_quoting_the_token_is_asked_without_it(
    oauth_server: str, entry: str
) -> None:
    storage, saver = AppStorage(), InMemorySaver()
    thread = {"configurable": {"thread_id": f"confirm-{entry}"}}
    toolset = MCPToolset(
        client_credentials(oauth_server), auth={"secure": MCPAuth(storage=storage)}
    )
    with toolset:
        graph = confirming_loop(toolset, saver)
        seen = await run_seen(graph, {"user_input": "go on?"}, thread, entry)
        (paused,) = graph.get_state(thread).interrupts
        seen += await run_seen(graph, Command(resume=ANSWER), thread, entry)
        out = graph.get_state(thread).values
    assert storage.tokens is not None
    token = storage.tokens.access_token
    assert paused.value["message"] == "Go on with the token [REDACTED]?"  # what a person sees
    (record,) = out["tool_logs"]
    assert record["result"] == "answered accept: {'note': 'go'}", record
    for where, text in {
        "interrupt": json.dumps(paused.value),
        "events": json.dumps(seen, default=str),
        "state": json.dumps(out, default=str),
        "checkpoint": stored(saver),
    }.items():
        assert token not in text, where


async def test_a_question_quoting_the_token_reaches_the_handler_without_it(
    oauth_server: str,
) -> None:
    asked: list[dict[str, Any]] = []

    def answer(question: dict[str, Any]) -> dict[str, Any]:
        asked.append(question)
        return ANSWER

    storage, saver = AppStorage(), InMemorySaver()
    thread = {"configurable": {"thread_id": "confirm-handler"}}
    toolset = MCPToolset(
        client_credentials(oauth_server),
        auth={"secure": MCPAuth(storage=storage)},
        elicitation_handler=answer,
    )
    with toolset:
        graph = confirming_loop(toolset, saver)
        seen = await run_seen(graph, {"user_input": "go on?"}, thread, "ainvoke")
        out = graph.get_state(thread).values
    assert storage.tokens is not None
    token = storage.tokens.access_token
    (question,) = asked
    assert question["message"] == "Go on with the token [REDACTED]?"
    assert out["tool_logs"][0]["result"] == "answered accept: {'note': 'go'}"
    for where, text in {
        "handler": json.dumps(asked),
        "events": json.dumps(seen, default=str),
        "checkpoint": stored(saver),
    }.items():
        assert token not in text, where


@pytest.mark.parametrize("entry", ["invoke", "ainvoke"])
async def test_a_configured_token_stays_out_whatever_the_apps_redact_hook(
    oauth_server: str, entry: str
) -> None:
    issued = httpx.post(
        oauth_server.removesuffix("/mcp") + "/token",
        data={"grant_type": "client_credentials"},
        auth=(CLIENT_ID, CLIENT_SECRET),
    )
    token = issued.json()["access_token"]
    config = {"secure": {"url": oauth_server, "headers": {"Authorization": f"Bearer {token}"}}}
    saver = InMemorySaver()
    thread = {"configurable": {"thread_id": f"header-{entry}"}}
    with MCPToolset(config) as toolset:
        planner = ScriptedChatModel(
            [
                plan_reply(
                    "execute",
                    [
                        {"tool_name": "whoami", "tool_kwargs": {}},
                        {"tool_name": "confirm", "tool_kwargs": {}},
                    ],
                ),
                plan_reply("response"),
            ]
        )
        graph = create_tool_loop(
            planner,
            [toolset],
            models=ModelOptions(answer_model=ScriptedChatModel(["done"])),
            governance=GovernanceOptions(redact=lambda text: text),  # knows no server
            checkpointer=saver,
        )
        seen = await run_seen(graph, {"user_input": "who am I?"}, thread, entry)
        (paused,) = graph.get_state(thread).interrupts
        seen += await run_seen(graph, Command(resume=ANSWER), thread, entry)
        out = graph.get_state(thread).values
    whoami, confirm = out["tool_logs"]
    assert whoami["result"] == "you hold [REDACTED]"  # the server got the token
    assert paused.value["message"] == "Go on with the token [REDACTED]?"
    assert confirm["result"] == "answered accept: {'note': 'go'}"
    for where, text in {
        "interrupt": json.dumps(paused.value),
        "events": json.dumps(seen, default=str),
        "state": json.dumps(out, default=str),
        "checkpoint": stored(saver),
    }.items():
        assert token not in text, where
