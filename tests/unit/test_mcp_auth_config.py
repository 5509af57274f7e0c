"""The `auth` entry of an HTTP server's config, and `MCPToolset(auth=...)`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from mcp.client.auth import OAuthClientProvider

from agentloop.errors import ConfigurationError
from agentloop.mcp import MCPAuth, MCPToolset, load_mcp_config
from agentloop.mcp.sdk import MCP_MAJOR, http

URL = "https://crm.example.invalid/mcp"
SECRET = "s3cret-client-value"


def server(**auth: Any) -> dict[str, Any]:
    return {"mcpServers": {"crm": {"url": URL, "auth": auth}}}


@pytest.fixture
def toolsets() -> Iterator[list[MCPToolset]]:
    made: list[MCPToolset] = []
    yield made
    for toolset in made:
        toolset.close()


def test_an_auth_entry_is_read_and_its_secrets_redacted() -> None:
    (spec,) = load_mcp_config(
        server(
            flow="client_credentials",
            client_id="agentloop",
            client_secret=SECRET,
            scopes="read write",
            issuer="https://auth.example.invalid",
        )
    )
    assert spec.auth is not None
    assert spec.auth.flow == "client_credentials"
    assert spec.auth.scopes == ("read", "write")
    assert SECRET in spec.secrets
    assert SECRET not in repr(spec.auth)  # a logged spec shows no secret


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ({"flow": "password"}, "unknown auth flow"),
        ({"flow": "client_credentials", "client_id": "a"}, "needs client_secret"),
        ({"flow": "private_key_jwt", "client_id": "a"}, r"needs private_key \(or assertion\)"),
        ({"flow": "bearer"}, "needs token"),
        ({"scopes": 3}, "list of scopes"),
        ({"client_secrett": "x"}, "unknown 'auth' keys"),
        ({"token_endpoint_auth_method": "magic"}, "token_endpoint_auth_method"),
    ],
)
def test_a_malformed_auth_entry_names_the_server(entry: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigurationError, match=problem) as raised:
        load_mcp_config(server(**entry))
    assert "'crm'" in str(raised.value)


def test_auth_is_for_http_servers() -> None:
    config = {"local": {"command": "python", "auth": {"flow": "bearer", "token": "abcdefgh1"}}}
    with pytest.raises(ConfigurationError, match="HTTP servers"):
        load_mcp_config(config)


def test_the_toolset_runs_the_sdks_oauth_provider(toolsets: list[MCPToolset]) -> None:
    async def redirect(url: str) -> None: ...

    async def callback() -> tuple[str, str | None]:
        return "code", None

    config = server(scopes=["crm.read"], client_id="registered", client_secret=SECRET)
    code = MCPAuth(redirect_handler=redirect, callback_handler=callback)
    toolset = MCPToolset(config, auth={"crm": code})
    toolsets.append(toolset)
    (spec,) = toolset.specs
    assert isinstance(spec.connection["auth"], OAuthClientProvider)
    assert spec.auth is not None and spec.auth.redirect_handler is redirect
    assert spec.auth.client_id == "registered"  # the config's fields stay where code gives none
    assert SECRET in toolset.secrets


def test_a_workload_assertion_stands_in_for_the_private_key(toolsets: list[MCPToolset]) -> None:
    assertion = "eyJhbGciOiJFUzI1NiJ9.workload-identity-assertion.signature"
    config = server(
        flow="private_key_jwt",
        client_id="workload",
        assertion=assertion,
        issuer="https://auth.example.invalid",
    )
    (spec,) = load_mcp_config(config)
    assert assertion in spec.secrets and assertion not in repr(spec)
    toolset = MCPToolset(config)
    toolsets.append(toolset)
    assert isinstance(toolset.specs[0].connection["auth"], OAuthClientProvider)


IDENTITY_ASSERTION = {
    "flow": "identity_assertion",
    "client_id": "agentloop",
    "client_secret": SECRET,
    "issuer": "https://auth.example.invalid",
}


@pytest.mark.skipif(MCP_MAJOR < 2, reason="the SDK offers it from mcp 2.x on")
def test_an_identity_assertion_runs_the_sdks_provider(toolsets: list[MCPToolset]) -> None:
    from mcp.client.auth.extensions.identity_assertion import IdentityAssertionOAuthProvider

    async def id_jag(audience: str, resource: str) -> str:
        return "an-id-jag"

    with pytest.raises(ConfigurationError, match="needs assertion_provider"):
        MCPToolset(server(**IDENTITY_ASSERTION))
    given = MCPAuth(assertion_provider=id_jag)
    toolset = MCPToolset(server(**IDENTITY_ASSERTION), auth={"crm": given})
    toolsets.append(toolset)
    assert isinstance(toolset.specs[0].connection["auth"], IdentityAssertionOAuthProvider)
    assert SECRET in toolset.secrets


@pytest.mark.skipif(MCP_MAJOR >= 2, reason="mcp 2.x offers it")
def test_an_identity_assertion_says_it_needs_mcp_2() -> None:
    with pytest.raises(ConfigurationError, match=r"'identity_assertion' needs mcp 2\.x"):
        load_mcp_config(server(**IDENTITY_ASSERTION))


def test_an_authorization_code_flow_needs_the_apps_handlers() -> None:
    with pytest.raises(ConfigurationError, match="redirect_handler, callback_handler"):
        MCPToolset(server(scopes=["crm.read"]))


def test_auth_given_in_code_only_or_as_any_httpx_auth(toolsets: list[MCPToolset]) -> None:
    basic = http.BasicAuth("user", "password-of-test")  # httpx, or httpx2 for mcp 2.x
    config = {"a": {"url": URL}, "b": {"url": URL}}
    toolset = MCPToolset(config, auth={"a": basic, "b": MCPAuth(flow="bearer", token=SECRET)})
    toolsets.append(toolset)
    a, b = toolset.specs
    assert a.connection["auth"] is basic
    assert isinstance(b.connection["auth"], http.Auth)
    assert SECRET in toolset.secrets and SECRET not in repr(b.connection["auth"])


def test_auth_of_another_kind_is_refused_with_what_it_takes() -> None:
    with pytest.raises(ConfigurationError, match=r"'a'.* must be an MCPAuth or an httpx2?\.Auth"):
        MCPToolset({"a": {"url": URL}}, auth={"a": f"Bearer {SECRET}"})  # type: ignore[dict-item]


def test_auth_for_an_unknown_server_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="not in the config: crmm"):
        MCPToolset({"crm": {"url": URL}}, auth={"crmm": MCPAuth(flow="bearer", token=SECRET)})


def test_no_repr_or_str_of_a_spec_shows_a_configured_secret(toolsets: list[MCPToolset]) -> None:
    given = {
        "client secret": "client-secret-of-the-crm",
        "bearer token": "bearer-token-of-the-wiki",
        "Authorization header": "Bearer header-token-of-the-docs",
        "API key header": "api-key-header-of-the-docs",
        "env token": "env-token-of-the-git-server",
        "URL token": "url-token-of-the-search",
    }
    config = {
        "crm": {
            "url": URL,
            "auth": {
                "flow": "client_credentials",
                "client_id": "agentloop",
                "client_secret": given["client secret"],
                "issuer": "https://auth.example.invalid",
            },
        },
        "wiki": {"url": URL, "auth": {"flow": "bearer", "token": given["bearer token"]}},
        "docs": {
            "url": URL,
            "headers": {
                "Authorization": given["Authorization header"],
                "X-Api-Key": given["API key header"],
            },
        },
        "git": {"command": "mcp-server-git", "env": {"GIT_TOKEN": given["env token"]}},
        "search": {"url": f"https://search.example.invalid/mcp?key={given['URL token']}"},
    }
    toolset = MCPToolset(config)  # nothing starts before the tools are listed
    toolsets.append(toolset)
    shown = [repr(toolset.specs), str(toolset.specs)]
    for spec in toolset.specs:
        shown += [repr(spec), str(spec), f"{spec}", repr(spec.auth), str(spec.auth)]
    for text in shown:
        for what, secret in given.items():
            assert secret not in text, what
    assert "[REDACTED]" in repr(toolset.specs)
    assert "mcp-server-git" in repr(toolset.specs)  # the rest stays readable
    git = toolset.specs[3]  # the transport still gets every value, as given
    assert git.connection["env"]["GIT_TOKEN"] == given["env token"]
    assert set(given.values()) <= toolset.secrets  # each redacted from the toolset's outputs
