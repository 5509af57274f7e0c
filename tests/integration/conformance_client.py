"""A client driver for the MCP conformance suite's client scenarios.

`python conformance_client.py {agentloop|adapters|sdk} URL`: the suite starts a scenario's
server, runs this with its URL appended, and names the scenario in
`MCP_CONFORMANCE_SCENARIO` (and gives client credentials and the calls to make in
`MCP_CONFORMANCE_CONTEXT`).

The test keeps it warm (`warm_python.py`, with `PRELOADED` imported once): each scenario's
run is a process forked from there, started by `warm_launch.py`.

Every client makes the same calls (`scenario_calls`): the tool a scenario expects called
(the first tool listed, for an authorization scenario), the calls its context lists, the
schema it asks to have echoed, and for `http-standard-headers` a prompt and a resource too.

`agentloop` connects only through agentloop's documented MCP configuration: an
`mcpServers` dict with the server's `url` and `auth` entry, `MCPToolset(config,
auth=...)` for what code must give (the authorization code flow's handlers, an identity
assertion's provider), and a loop that makes the scenario's calls; an elicitation is
answered through the documented interrupt, with the requested schema's defaults. The
baselines do the same with the same SDK: `adapters` with `langchain-mcp-adapters`
(`MultiServerMCPClient`, mcp 1.x), `sdk` with the mcp 2.x SDK's own `Client`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from typing import Any
from urllib.parse import parse_qs, urlsplit

SERVER = "conformance"
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"
"""The client id document URL the suite's `basic-cimd` scenario accepts."""
REDIRECT_URI = "http://localhost:3000/callback"

TOOL_OF_SCENARIO = {
    "tools_call": ("add_numbers", {"a": 5, "b": 3}),
    "sse-retry": ("test_reconnection", {}),
    "elicitation-sep1034-client-defaults": ("test_client_elicitation_defaults", {}),
}
"""The tool each of these scenarios expects called."""
MULTI_ROUND_TOOLS = (
    "test_mrtr_echo_state",
    "test_mrtr_no_state",
    "test_mrtr_unrelated",
    "test_mrtr_no_result_type",
)
"""`sep-2322-client-request-state`: each tool, the unrelated one between the others."""
SCHEMA_TOOL, ECHO_TOOL = "json_schema_2020_12_tool", "json_schema_echo"
"""`json-schema-2020-12-preservation`: the first tool's schema goes back through the echo."""
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"


def context() -> dict[str, Any]:
    """The scenario's context (client credentials, calls to make), if any."""
    raw = os.environ.get("MCP_CONFORMANCE_CONTEXT")
    return json.loads(raw) if raw else {}


def example_arguments(schema: Any) -> dict[str, Any]:
    """Arguments a tool's input schema accepts: a plain value for each required property."""
    if not isinstance(schema, dict):
        return {}
    plain = {"string": "example", "integer": 1, "number": 1, "boolean": True, "array": []}
    properties = schema.get("properties") or {}
    return {
        name: plain.get((properties.get(name) or {}).get("type"), "example")
        for name in schema.get("required") or []
    }


def scenario_calls(scenario: str, tools: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """The tool calls a scenario expects, given the tools the client listed (name, inputSchema)."""
    names = [tool["name"] for tool in tools]
    first = [(tools[0]["name"], example_arguments(tools[0]["inputSchema"]))] if tools else []
    if scenario in TOOL_OF_SCENARIO:
        return [TOOL_OF_SCENARIO[scenario]]
    if scenario == "sep-2322-client-request-state":
        return [(name, {}) for name in MULTI_ROUND_TOOLS if name in names]
    if scenario == "http-custom-headers":
        return [(call["name"], call["arguments"]) for call in context().get("toolCalls", [])]
    if scenario == "json-schema-2020-12-preservation":
        schemas = [tool["inputSchema"] for tool in tools if tool["name"] == SCHEMA_TOOL]
        return [(ECHO_TOOL, {"schema": schemas[0]})] if schemas else []
    if scenario == "http-invalid-tool-headers":  # the client left out the invalid ones
        return [(tool["name"], example_arguments(tool["inputSchema"])) for tool in tools]
    if scenario.startswith("auth/") or scenario == "http-standard-headers":
        return first
    return []


class HeadlessBrowser:
    """The app's side of an authorization code flow, without a person: follow the URL,
    take the code, state and issuer (`iss`, RFC 9207) from the redirect back."""

    def __init__(self) -> None:
        self._answer: tuple[str, str | None, str | None] | None = None

    async def redirect(self, authorization_url: str) -> None:
        import httpx

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
        state, iss = (query.get("state") or [None])[0], (query.get("iss") or [None])[0]
        self._answer = (query["code"][0], state, iss)

    async def callback(self) -> tuple[str, str | None, str | None]:
        if self._answer is None:
            msg = "no authorization redirect was followed"
            raise RuntimeError(msg)
        answer, self._answer = self._answer, None
        return answer


def defaults_of(schema: dict[str, Any]) -> dict[str, Any]:
    """An elicitation's answer: each requested field's default (SEP-1034)."""
    properties = schema.get("properties") or {}
    return {name: field["default"] for name, field in properties.items() if "default" in field}


def authorization_server(url: str) -> str:
    """The authorization server the MCP server names in its protected resource metadata."""
    import httpx

    parts = urlsplit(url)
    well_known = f"{parts.scheme}://{parts.netloc}/.well-known/oauth-protected-resource{parts.path}"
    metadata = httpx.get(well_known).json()
    return str(metadata["authorization_servers"][0])


async def identity_assertion(audience: str, resource: str) -> str:
    """An ID-JAG from the scenario's identity provider (RFC 8693 token exchange, SEP-990)."""
    import httpx

    given = context()
    async with httpx.AsyncClient() as client:
        response = await client.post(
            given["idp_token_endpoint"],
            data={
                "grant_type": TOKEN_EXCHANGE,
                "requested_token_type": "urn:ietf:params:oauth:token-type:id-jag",
                "subject_token": given["idp_id_token"],
                "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
                "audience": audience,
                "resource": resource,
                "client_id": given["idp_client_id"],
            },
        )
    response.raise_for_status()
    return str(response.json()["access_token"])


# -- agentloop, through its documented configuration --------------------------------------------


def agentloop_auth_entry(scenario: str, url: str) -> dict[str, Any] | None:
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
    if scenario == "auth/enterprise-managed-authorization":
        return {
            "flow": "identity_assertion",
            "client_id": given["client_id"],
            "client_secret": given["client_secret"],
            "issuer": authorization_server(url),
            "token_endpoint_auth_method": "client_secret_basic",
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
    entry = agentloop_auth_entry(scenario, url)
    if entry is not None:
        server["auth"] = entry
    code_auth = {}
    if entry is not None and entry["flow"] == "authorization_code":
        browser = HeadlessBrowser()
        code_auth[SERVER] = MCPAuth(
            redirect_handler=browser.redirect, callback_handler=browser.callback
        )
    elif entry is not None and entry["flow"] == "identity_assertion":
        code_auth[SERVER] = MCPAuth(assertion_provider=identity_assertion)
    with MCPToolset({"mcpServers": {SERVER: server}}, auth=code_auth) as toolset:
        tools = [
            {"name": tool.name, "inputSchema": tool.args_schema}
            for tool in toolset.tools
            if tool.name != "read_resource"
        ]
        calls = scenario_calls(scenario, tools)
        commands = [{"tool_name": name, "tool_kwargs": kwargs} for name, kwargs in calls]
        script: list[Any] = [plan_reply("execute", commands)] if commands else []
        script += [plan_reply("response"), "done"]
        loop = create_tool_loop(ScriptedChatModel(script), [toolset], checkpointer=InMemorySaver())
        thread = {"configurable": {"thread_id": "conformance"}}
        out = loop.invoke({"user_input": f"run {scenario}"}, thread)
        for _ in range(10):
            questions = [q for q in out.get("__interrupt__", ()) if isinstance(q.value, dict)]
            if not questions or questions[0].value.get("type") != ELICITATION_INTERRUPT:
                break
            schema = questions[0].value.get("requested_schema") or {}
            answer = {"action": "accept", "content": defaults_of(schema)}
            out = loop.invoke(Command(resume=answer), thread)
        for record in out.get("tool_logs", []):
            print(f"{record['tool_name']}: success={record['success']} {record['result']!r:.200}")
        if scenario == "http-standard-headers":
            asyncio.run(agentloop_prompt_and_resource(toolset))


async def agentloop_prompt_and_resource(toolset: Any) -> None:
    """Get the server's first prompt and read its first resource (`toolset` methods)."""
    prompts = (await toolset.list_prompts()).get(SERVER, [])
    if prompts:
        print(await toolset.get_prompt(SERVER, prompts[0].name))
    listed = toolset.tools
    for tool in listed:
        if tool.name == "read_resource":
            for line in str(tool.description).splitlines():
                if line.startswith("- ") and "://" in line:
                    print(await toolset.read_resource(line[2:].split()[0], server=SERVER))
                    return


# -- langchain-mcp-adapters, the baseline on mcp 1.x -------------------------------------------


class Storage:
    """Tokens and client information in memory (the SDK's `TokenStorage`)."""

    def __init__(self, client: Any = None) -> None:
        self.tokens: Any = None
        self.client = client

    async def get_tokens(self) -> Any:
        return self.tokens

    async def set_tokens(self, tokens: Any) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> Any:
        return self.client

    async def set_client_info(self, client_info: Any) -> None:
        self.client = client_info


def sdk_auth(url: str, scenario: str) -> Any:
    """The SDK's own OAuth provider for a scenario (either major), or None."""
    from mcp.client.auth import OAuthClientProvider
    from mcp.client.auth.extensions.client_credentials import (
        ClientCredentialsOAuthProvider,
        PrivateKeyJWTOAuthProvider,
        SignedJWTParameters,
    )
    from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata
    from pydantic import AnyUrl

    if not scenario.startswith("auth/"):
        return None
    from mcp.shared import exceptions

    major_2 = hasattr(exceptions, "MCPError")
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
    if scenario == "auth/enterprise-managed-authorization" and major_2:
        from mcp.client.auth.extensions.identity_assertion import (
            IdentityAssertionOAuthProvider,
        )

        return IdentityAssertionOAuthProvider(
            url,
            Storage(),
            given["client_id"],
            given["client_secret"],
            authorization_server(url),
            identity_assertion,
            token_endpoint_auth_method="client_secret_basic",
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

    async def callback() -> Any:
        code, state, iss = await browser.callback()
        if not major_2:
            return code, state
        from mcp.shared.auth import AuthorizationCodeResult

        return AuthorizationCodeResult(code=code, state=state, iss=iss)

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
        callback_handler=callback,
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
    auth = sdk_auth(url, scenario)
    if auth is not None:
        connection["auth"] = auth
    client = MultiServerMCPClient(
        {SERVER: connection},  # type: ignore[dict-item]
        callbacks=Callbacks(on_elicitation=on_elicitation),
    )
    tools = await client.get_tools()
    listed = [{"name": tool.name, "inputSchema": tool.args_schema} for tool in tools]
    for name, arguments in scenario_calls(scenario, listed):
        (tool,) = [t for t in tools if t.name == name]
        try:
            print(await tool.ainvoke(arguments))
        except Exception as error:  # the scenario judges what reached the server
            print(f"{name} failed: {error}")


# -- the mcp 2.x SDK's own client, the baseline on mcp 2.x -------------------------------------


async def run_sdk(url: str, scenario: str) -> None:
    from mcp import Client, types
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async def on_elicitation(_context: Any, params: Any) -> types.ElicitResult:
        schema = getattr(params, "requested_schema", None) or {}
        return types.ElicitResult(action="accept", content=defaults_of(schema))

    http_client = create_mcp_http_client(auth=sdk_auth(url, scenario))
    transport = streamable_http_client(url, http_client=http_client)
    async with http_client, Client(transport, elicitation_callback=on_elicitation) as client:
        tools = (await client.list_tools()).tools
        listed = [{"name": tool.name, "inputSchema": tool.input_schema} for tool in tools]
        for name, arguments in scenario_calls(scenario, listed):
            try:
                print(await client.call_tool(name, arguments))
            except Exception as error:  # the scenario judges what reached the server
                print(f"{name} failed: {error}")
        if scenario == "http-standard-headers":
            prompts = (await client.list_prompts()).prompts
            if prompts:
                print(await client.get_prompt(prompts[0].name))
            resources = (await client.list_resources()).resources
            if resources:
                print(await client.read_resource(resources[0].uri))


# -- kept warm (`warm_python.py`) ------------------------------------------------------------


ON_FIRST_CONNECTION = (
    "httpcore",
    "h11",
    "anyio._core._sockets",
    "anyio.streams.stapled",
    "anyio.streams.tls",
    "langchain_core.tracers.context",
)
"""What any client's run imports once it connects (httpx's transport, anyio's sockets)."""

SDK_AUTH = (
    "mcp.client.auth:OAuthClientProvider",
    "mcp.client.auth.extensions.client_credentials:PrivateKeyJWTOAuthProvider",
    "mcp.shared.auth:OAuthToken",
    "pydantic:AnyUrl",
    "cryptography.hazmat.backends.openssl",
)

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
        *SDK_AUTH,
        "langchain_core.tracers.langchain",
        "langsmith.run_helpers",
        "tenacity",
        *ON_FIRST_CONNECTION,
    ),
    "sdk": (
        "mcp:Client",
        "mcp.client.streamable_http:streamable_http_client",
        *SDK_AUTH,
        *ON_FIRST_CONNECTION,
    ),
}
"""What each client's run imports, as `module` or `module:name` (agentloop's names are
imported when first used): the warm process imports them once."""


def main() -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    client, url = sys.argv[1], sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    if client == "agentloop":
        run_agentloop(url, scenario)
    elif client == "adapters":
        asyncio.run(run_adapters(url, scenario))
    elif client == "sdk":
        asyncio.run(run_sdk(url, scenario))
    else:
        msg = f"unknown client {client!r}: use agentloop, adapters or sdk"
        raise SystemExit(msg)


if __name__ == "__main__":
    main()
