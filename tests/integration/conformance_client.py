"""A client driver for the MCP conformance suite's client scenarios.

`python conformance_client.py {agentloop|adapters} URL`: the suite starts a scenario's
server, runs this with its URL appended, and names the scenario in
`MCP_CONFORMANCE_SCENARIO` (and gives client credentials in `MCP_CONFORMANCE_CONTEXT`).

The test keeps it warm (`warm_python.py`, with `PRELOADED` imported once): each scenario's
run is a process forked from there, started by `warm_launch.py`.

`agentloop` connects only through agentloop's documented MCP configuration: an
`mcpServers` dict with the server's `url` and `auth` entry, `MCPToolset(config,
auth=...)` for what code must give (the authorization code flow's handlers), and a loop
that calls the scenario's tool; an elicitation is answered through the documented
interrupt, with the requested schema's defaults. `adapters` does the same with
`langchain-mcp-adapters` (`MultiServerMCPClient` with the `mcp` SDK's OAuth providers):
the baseline the test compares with.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

SERVER = "conformance"
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"
"""The client id document URL the suite's `basic-cimd` scenario accepts."""
REDIRECT_URI = "http://localhost:3000/callback"

TOOL_OF_SCENARIO = {
    "initialize": None,
    "tools_call": ("add_numbers", {"a": 5, "b": 3}),
    "sse-retry": ("test_reconnection", {}),
    "elicitation-sep1034-client-defaults": ("test_client_elicitation_defaults", {}),
}
"""The tool each non-auth scenario expects called (auth scenarios: the first one listed)."""


def context() -> dict[str, Any]:
    """The scenario's context (client credentials), if any."""
    raw = os.environ.get("MCP_CONFORMANCE_CONTEXT")
    return json.loads(raw) if raw else {}


class HeadlessBrowser:
    """The app's side of an authorization code flow, without a person: follow the URL,
    take the code and state from the redirect back."""

    def __init__(self) -> None:
        self._answer: tuple[str, str | None] | None = None

    async def redirect(self, authorization_url: str) -> None:
        async with httpx.AsyncClient() as client:
            response = await client.get(authorization_url, follow_redirects=False)
        location = response.headers.get("location")
        if response.status_code not in (301, 302, 303, 307, 308) or not location:
            msg = f"expected a redirect from the authorization endpoint, got {response.status_code}"
            raise RuntimeError(msg)
        query = parse_qs(urlsplit(location).query)
        if "code" not in query:
            msg = "no authorization code in the redirect"
            raise RuntimeError(msg)
        self._answer = (query["code"][0], (query.get("state") or [None])[0])

    async def callback(self) -> tuple[str, str | None]:
        if self._answer is None:
            msg = "no authorization redirect was followed"
            raise RuntimeError(msg)
        answer, self._answer = self._answer, None
        return answer


def defaults_of(schema: dict[str, Any]) -> dict[str, Any]:
    """An elicitation's answer: each requested field's default (SEP-1034)."""
    properties = schema.get("properties") or {}
    return {name: field["default"] for name, field in properties.items() if "default" in field}


# -- agentloop, through its documented configuration --------------------------------------------


def agentloop_auth_entry(scenario: str) -> dict[str, Any] | None:
    """The `auth` entry of the server's config for a scenario."""
    if not scenario.startswith("auth/"):
        return None
    given = context()
    if scenario == "auth/client-credentials-basic":
        return {
            "flow": "client_credentials",
            "client_id": given["client_id"],
            "client_secret": given["client_secret"],
        }
    if scenario == "auth/client-credentials-jwt":
        return {
            "flow": "private_key_jwt",
            "client_id": given["client_id"],
            "private_key": given["private_key_pem"],
            "signing_algorithm": given.get("signing_algorithm", "ES256"),
        }
    entry: dict[str, Any] = {
        "flow": "authorization_code",
        "redirect_uri": REDIRECT_URI,
        "client_metadata_url": CLIENT_METADATA_URL,
    }
    if given.get("client_id"):  # a pre-registered client
        entry["client_id"] = given["client_id"]
        if given.get("client_secret"):
            entry["client_secret"] = given["client_secret"]
    return entry


def run_agentloop(url: str, scenario: str) -> None:
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    from agentloop import MCPToolset, create_tool_loop
    from agentloop.mcp import ELICITATION_INTERRUPT, MCPAuth
    from agentloop.testing import ScriptedChatModel, plan_reply

    server: dict[str, Any] = {"url": url}
    entry = agentloop_auth_entry(scenario)
    if entry is not None:
        server["auth"] = entry
    code_auth = {}
    if entry is not None and entry["flow"] == "authorization_code":
        browser = HeadlessBrowser()
        code_auth[SERVER] = MCPAuth(
            redirect_handler=browser.redirect, callback_handler=browser.callback
        )
    with MCPToolset({"mcpServers": {SERVER: server}}, auth=code_auth) as toolset:
        names = [tool.name for tool in toolset.tools if tool.name != "read_resource"]
        call = TOOL_OF_SCENARIO.get(scenario) if not scenario.startswith("auth/") else None
        if scenario.startswith("auth/") and names:
            call = (names[0], {})
        script: list[Any] = []
        if call is not None:
            script.append(plan_reply("execute", [{"tool_name": call[0], "tool_kwargs": call[1]}]))
        script += [plan_reply("response"), "done"]
        loop = create_tool_loop(ScriptedChatModel(script), [toolset], checkpointer=InMemorySaver())
        thread = {"configurable": {"thread_id": "conformance"}}
        out = loop.invoke({"user_input": f"run {scenario}"}, thread)
        for _ in range(3):
            questions = [q for q in out.get("__interrupt__", ()) if isinstance(q.value, dict)]
            if not questions or questions[0].value.get("type") != ELICITATION_INTERRUPT:
                break
            schema = questions[0].value.get("requested_schema") or {}
            answer = {"action": "accept", "content": defaults_of(schema)}
            out = loop.invoke(Command(resume=answer), thread)
        for record in out.get("tool_logs", []):
            print(f"{record['tool_name']}: success={record['success']} {record['result']!r:.200}")


# -- langchain-mcp-adapters, the baseline ----------------------------------------------------


def adapters_auth(url: str, scenario: str) -> httpx.Auth | None:
    from mcp.client.auth import OAuthClientProvider
    from mcp.client.auth.extensions.client_credentials import (
        ClientCredentialsOAuthProvider,
        PrivateKeyJWTOAuthProvider,
        SignedJWTParameters,
    )
    from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
    from pydantic import AnyUrl

    if not scenario.startswith("auth/"):
        return None

    class Storage:
        def __init__(self, client: OAuthClientInformationFull | None = None) -> None:
            self.tokens: OAuthToken | None = None
            self.client = client

        async def get_tokens(self) -> OAuthToken | None:
            return self.tokens

        async def set_tokens(self, tokens: OAuthToken) -> None:
            self.tokens = tokens

        async def get_client_info(self) -> OAuthClientInformationFull | None:
            return self.client

        async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
            self.client = client_info

    given = context()
    if scenario == "auth/client-credentials-basic":
        return ClientCredentialsOAuthProvider(
            url, Storage(), given["client_id"], given["client_secret"]
        )
    if scenario == "auth/client-credentials-jwt":
        signed = SignedJWTParameters(
            issuer=given["client_id"],
            subject=given["client_id"],
            signing_key=given["private_key_pem"],
            signing_algorithm=given.get("signing_algorithm", "ES256"),
        )
        return PrivateKeyJWTOAuthProvider(
            url, Storage(), given["client_id"], signed.create_assertion_provider()
        )
    preregistered = None
    if given.get("client_id"):
        secret = given.get("client_secret")
        preregistered = OAuthClientInformationFull(
            client_id=given["client_id"],
            client_secret=secret,
            redirect_uris=[AnyUrl(REDIRECT_URI)],
            token_endpoint_auth_method="client_secret_basic" if secret else "none",
        )
    browser = HeadlessBrowser()
    return OAuthClientProvider(
        url,
        OAuthClientMetadata(
            client_name="conformance-client",
            redirect_uris=[AnyUrl(REDIRECT_URI)],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
        ),
        Storage(preregistered),
        redirect_handler=browser.redirect,
        callback_handler=browser.callback,
        client_metadata_url=CLIENT_METADATA_URL,
    )


async def run_adapters(url: str, scenario: str) -> None:
    from langchain_mcp_adapters.callbacks import CallbackContext, Callbacks
    from langchain_mcp_adapters.client import MultiServerMCPClient
    from mcp import types

    async def on_elicitation(
        _context: Any, params: types.ElicitRequestParams, _callback: CallbackContext
    ) -> types.ElicitResult:
        schema = getattr(params, "requestedSchema", None) or {}
        return types.ElicitResult(action="accept", content=defaults_of(schema))

    connection: dict[str, Any] = {"transport": "streamable_http", "url": url}
    auth = adapters_auth(url, scenario)
    if auth is not None:
        connection["auth"] = auth
    client = MultiServerMCPClient(
        {SERVER: connection},  # type: ignore[dict-item]
        callbacks=Callbacks(on_elicitation=on_elicitation),
    )
    tools = await client.get_tools()
    call = TOOL_OF_SCENARIO.get(scenario) if not scenario.startswith("auth/") else None
    if scenario.startswith("auth/") and tools:
        call = (tools[0].name, {})
    if call is not None:
        (tool,) = [t for t in tools if t.name == call[0]]
        try:
            print(await tool.ainvoke(call[1]))
        except Exception as error:  # the scenario judges what reached the server
            print(f"{call[0]} failed: {error}")


# -- kept warm (`warm_python.py`) ------------------------------------------------------------


ON_FIRST_CONNECTION = (
    "httpcore",
    "h11",
    "anyio._core._sockets",
    "anyio.streams.stapled",
    "anyio.streams.tls",
    "langchain_core.tracers.context",
)
"""What either client's run imports once it connects (httpx's transport, anyio's sockets)."""

PRELOADED = {
    "agentloop": (
        "langgraph.checkpoint.memory:InMemorySaver",
        "langgraph.types:Command",
        "agentloop:MCPToolset",
        "agentloop:create_tool_loop",
        "agentloop.mcp:ELICITATION_INTERRUPT",
        "agentloop.mcp:MCPAuth",
        "agentloop.testing:ScriptedChatModel",
        "agentloop.testing:plan_reply",
        *ON_FIRST_CONNECTION,
    ),
    "adapters": (
        "langchain_mcp_adapters.callbacks:CallbackContext",
        "langchain_mcp_adapters.client:MultiServerMCPClient",
        "mcp.client.auth:OAuthClientProvider",
        "mcp.client.auth.extensions.client_credentials:PrivateKeyJWTOAuthProvider",
        "mcp.shared.auth:OAuthToken",
        "pydantic:AnyUrl",
        "cryptography.hazmat.backends.openssl",
        "langchain_core.tracers.langchain",
        "langsmith.run_helpers",
        "tenacity",
        *ON_FIRST_CONNECTION,
    ),
}
"""What each client's run imports (`run_agentloop`, `run_adapters`, `adapters_auth`), as
`module` or `module:name` (agentloop's names are imported when first used): the warm
process imports them once."""


def main() -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    client, url = sys.argv[1], sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    if client == "agentloop":
        run_agentloop(url, scenario)
    elif client == "adapters":
        asyncio.run(run_adapters(url, scenario))
    else:
        msg = f"unknown client {client!r}: use agentloop or adapters"
        raise SystemExit(msg)


if __name__ == "__main__":
    main()
