"""Authorization of HTTP MCP servers: a server's `auth` entry, run by the `mcp` SDK's OAuth.

A server's `auth` (in its config, or `MCPToolset(auth={name: MCPAuth(...)})`) names one
flow; the toolset turns it into one `httpx.Auth` per server, shared by all of that
server's sessions, so a token is obtained once and refreshed by the SDK:

- `bearer`: a static token sent as `Authorization: Bearer ...` (as a `headers` entry does);
- `client_credentials`: a client id and secret (`ClientCredentialsOAuthProvider`);
- `private_key_jwt`: client credentials proved by a JWT signed with the client's private
  key (`PrivateKeyJWTOAuthProvider`);
- `authorization_code` (the default): the SDK's `OAuthClientProvider`, with PKCE, dynamic
  registration (or a pre-registered `client_id`, or a `client_metadata_url`), scope
  selection and step-up; the app supplies the `redirect_handler` (sends the person, or a
  headless client, to the authorization URL) and the `callback_handler` (returns the code
  and state the redirect carried).

Tokens are kept by the app's `storage` (the SDK's `TokenStorage` protocol), or in memory
for the toolset's life. Every token the flow obtains, and the configured secrets, are
redacted from the toolset's logs, events and results; an `MCPAuth` never shows them in
its `repr`.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast, get_args

import httpx
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from mcp.client.auth.oauth2 import OAuthContext
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from pydantic import AnyUrl

from agentloop.errors import ConfigurationError
from agentloop.redaction import Redactor

__all__ = [
    "AuthFlow",
    "CallbackHandler",
    "MCPAuth",
    "RedirectHandler",
    "TokenRedactor",
    "TokenStorage",
    "auth_from_config",
    "build_auth",
]

AuthFlow = Literal["authorization_code", "client_credentials", "private_key_jwt", "bearer"]
"""The flows an `auth` entry may name."""

TokenEndpointAuthMethod = Literal["client_secret_basic", "client_secret_post", "none"]
"""How a client proves itself to the token endpoint (RFC 7591)."""

RedirectHandler = Callable[[str], Awaitable[None]]
"""Sends the person (or a headless client) to the authorization URL it is given."""

CallbackHandler = Callable[[], Awaitable[tuple[str, str | None]]]
"""Returns the authorization code and state the redirect back carried."""

DEFAULT_REDIRECT_URI = "http://localhost:3000/callback"
"""The redirect URI registered when an `authorization_code` entry names none."""

_SECRET_FIELDS = ("client_secret", "private_key", "token")


@dataclass(frozen=True)
class MCPAuth:
    """How to authorize with one HTTP MCP server (the `auth` entry of its config).

    Every field is optional; `MCPToolset(auth=...)` gives an `MCPAuth` whose set fields
    win over the config's entry for the same server (so the config holds the client id
    and scopes, the code the handlers and storage).
    """

    flow: AuthFlow | None = None
    """`authorization_code` (the default), `client_credentials`, `private_key_jwt` or
    `bearer`."""
    scopes: tuple[str, ...] | None = None
    """The scopes to ask for where the server names none; scopes it names (in a 401's
    `WWW-Authenticate`, or its `scopes_supported`) win, as the spec's scope selection says."""
    client_id: str | None = None
    """A pre-registered client (skips dynamic registration); required for the client
    credentials flows."""
    client_secret: str | None = field(default=None, repr=False)
    """The pre-registered client's secret."""
    token_endpoint_auth_method: TokenEndpointAuthMethod | None = None
    """How the client authenticates at the token endpoint (default: `client_secret_basic`
    with a secret, else `none`)."""
    private_key: str | None = field(default=None, repr=False)
    """The PEM private key that signs `private_key_jwt` assertions."""
    signing_algorithm: str | None = None
    """The JWT algorithm of `private_key_jwt` (default `RS256`)."""
    issuer: str | None = None
    """The authorization server the client credentials belong to: they are sent to no
    other (recommended for the client credentials flows)."""
    redirect_uri: str | None = None
    """The redirect URI of `authorization_code` (default `http://localhost:3000/callback`)."""
    client_name: str | None = None
    """The client name sent with dynamic registration (default `agentloop`)."""
    client_metadata_url: str | None = None
    """An HTTPS URL of the client's metadata document, used as its client id where the
    server supports it (instead of dynamic registration)."""
    token: str | None = field(default=None, repr=False)
    """The static token of `bearer`."""
    redirect_handler: RedirectHandler | None = field(default=None, repr=False)
    """`authorization_code`: sends the person (or a headless client) to the URL."""
    callback_handler: CallbackHandler | None = field(default=None, repr=False)
    """`authorization_code`: returns `(code, state)` from the redirect back."""
    storage: TokenStorage | None = field(default=None, repr=False)
    """Where tokens and the registered client are kept (default: in memory, per toolset)."""
    timeout_s: float | None = None
    """How long the authorization code flow may take (default 300 s)."""

    @property
    def secrets(self) -> frozenset[str]:
        """The configured secret values (the loop redacts them)."""
        return frozenset(value for name in _SECRET_FIELDS if (value := getattr(self, name)))

    @property
    def resolved_flow(self) -> AuthFlow:
        """The flow, with the default filled in."""
        return self.flow or "authorization_code"

    def over(self, base: MCPAuth | None) -> MCPAuth:
        """This entry's set fields over `base`'s."""
        if base is None:
            return self
        changes = {
            item.name: getattr(self, item.name)
            for item in dataclasses.fields(self)
            if getattr(self, item.name) is not None
        }
        return dataclasses.replace(base, **changes)


def auth_from_config(entry: Any, *, where: str) -> MCPAuth:
    """Read a server's `auth` entry (JSON / YAML).

    Raises:
        ConfigurationError: The entry is malformed.
    """
    if not isinstance(entry, Mapping):
        msg = f"{where}: 'auth' must be a mapping such as {{'flow': 'client_credentials', ...}}"
        raise ConfigurationError(msg)
    known = {
        "flow", "scopes", "client_id", "client_secret", "token_endpoint_auth_method",
        "private_key", "signing_algorithm", "issuer", "redirect_uri", "client_name",
        "client_metadata_url", "token", "timeout_s",
    }  # fmt: skip
    unknown = sorted(set(entry) - known)
    if unknown:
        msg = f"{where}: unknown 'auth' keys {unknown}; known: {', '.join(sorted(known))}"
        raise ConfigurationError(msg)
    values: dict[str, Any] = {}
    for key, value in entry.items():
        if key == "scopes":
            if isinstance(value, str):
                value = value.split()
            if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
                msg = f"{where}: 'auth.scopes' must be a list of scopes"
                raise ConfigurationError(msg)
            values[key] = tuple(value)
        elif key == "timeout_s":
            if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
                msg = f"{where}: 'auth.timeout_s' must be a positive number"
                raise ConfigurationError(msg)
            values[key] = float(value)
        elif value is not None:
            if not isinstance(value, str) or not value:
                msg = f"{where}: 'auth.{key}' must be a non-empty string"
                raise ConfigurationError(msg)
            values[key] = value
    auth = MCPAuth(**values)
    check_auth(auth, where=where, handlers_later=True)
    return auth


def check_auth(auth: MCPAuth, *, where: str, handlers_later: bool = False) -> None:
    """Fail when `auth` misses what its flow needs.

    Args:
        auth: The entry.
        where: Names the server in the message.
        handlers_later: The code may still give the handlers (a config file's entry).

    Raises:
        ConfigurationError: A field the flow needs is missing, or a value is unknown.
    """
    flow = auth.resolved_flow
    if flow not in get_args(AuthFlow):
        msg = f"{where}: unknown auth flow {flow!r}; use one of {', '.join(get_args(AuthFlow))}"
        raise ConfigurationError(msg)
    method = auth.token_endpoint_auth_method
    if method is not None and method not in get_args(TokenEndpointAuthMethod):
        msg = (
            f"{where}: 'token_endpoint_auth_method' must be one of "
            f"{', '.join(get_args(TokenEndpointAuthMethod))}"
        )
        raise ConfigurationError(msg)
    needs: tuple[str, ...] = {
        "bearer": ("token",),
        "client_credentials": ("client_id", "client_secret"),
        "private_key_jwt": ("client_id", "private_key"),
        "authorization_code": () if handlers_later else ("redirect_handler", "callback_handler"),
    }[flow]
    missing = [name for name in needs if getattr(auth, name) is None]
    if missing:
        hint = (
            f" (give them in code: MCPToolset(..., auth={{server: MCPAuth({missing[0]}=...)}}))"
            if flow == "authorization_code"
            else ""
        )
        msg = f"{where}: auth flow {flow!r} needs {', '.join(missing)}{hint}"
        raise ConfigurationError(msg)


class TokenRedactor:
    """A redaction hook that also redacts every token an OAuth flow obtained since."""

    def __init__(self, secrets: frozenset[str]) -> None:
        self._base = Redactor(secrets)
        self._current = self._base
        self._learned: set[str] = set()
        self._lock = threading.Lock()

    @property
    def learned(self) -> frozenset[str]:
        """The tokens obtained so far."""
        return frozenset(self._learned)

    def learn(self, *values: str | None) -> None:
        """Redact `values` from now on."""
        new = {value for value in values if value and value not in self._learned}
        if not new:
            return
        with self._lock:
            self._learned |= new
            self._current = self._base.with_secrets(self._learned)

    def __call__(self, text: str) -> str:
        """Return `text` with secrets and learned tokens replaced by `[REDACTED]`."""
        return self._current(text)


class _InMemoryStorage:
    """Tokens and client information for one toolset's life."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class _Storage:
    """The app's storage, with a pre-registered client and every token learned for redaction."""

    def __init__(
        self,
        inner: TokenStorage,
        preregistered: OAuthClientInformationFull | None,
        learn: Callable[..., None],
    ) -> None:
        self._inner = inner
        self._preregistered = preregistered
        self._learn = learn

    async def get_tokens(self) -> OAuthToken | None:
        tokens = await self._inner.get_tokens()
        if tokens is not None:
            self._learn(tokens.access_token, tokens.refresh_token)
        return tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self._learn(tokens.access_token, tokens.refresh_token)
        await self._inner.set_tokens(tokens)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        stored = await self._inner.get_client_info()
        if stored is not None:
            self._learn(stored.client_secret)
            return stored
        return self._preregistered

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self._learn(client_info.client_secret)
        await self._inner.set_client_info(client_info)


class _ConfiguredScope:
    """The configured scopes, asked for when the server names none.

    The SDK selects scopes as the spec says (the 401's `WWW-Authenticate`, else the
    resource's `scopes_supported`) just before it authorizes, and omits them when the
    server names none; the configured ones then take the omitted place.
    """

    context: OAuthContext
    configured_scope: str | None = None

    async def _perform_authorization(self) -> httpx.Request:
        if self.context.client_metadata.scope is None:
            self.context.client_metadata.scope = self.configured_scope
        return cast(httpx.Request, await super()._perform_authorization())  # type: ignore[misc]


class _AuthorizationCode(_ConfiguredScope, OAuthClientProvider):
    pass


class _ClientCredentials(_ConfiguredScope, ClientCredentialsOAuthProvider):
    pass


class _PrivateKeyJWT(_ConfiguredScope, PrivateKeyJWTOAuthProvider):
    pass


class _Bearer(httpx.Auth):
    """A static bearer token."""

    def __init__(self, token: str) -> None:
        self._token = token

    def __repr__(self) -> str:
        return "_Bearer(token=[REDACTED])"

    def auth_flow(self, request: httpx.Request) -> Any:
        request.headers["Authorization"] = f"Bearer {self._token}"
        yield request


def build_auth(
    auth: MCPAuth, server_url: str, *, where: str, learn: Callable[..., None]
) -> httpx.Auth:
    """The `httpx.Auth` that runs `auth`'s flow for the server at `server_url`.

    Args:
        auth: The server's entry (config and code merged).
        server_url: The server's MCP endpoint.
        where: Names the server in error messages.
        learn: Called with every token and secret the flow obtains (for redaction).

    Raises:
        ConfigurationError: The entry misses what its flow needs.
    """
    check_auth(auth, where=where)
    flow = auth.resolved_flow
    if flow == "bearer":
        return _Bearer(cast(str, auth.token))
    scope = " ".join(auth.scopes) if auth.scopes else None
    preregistered: OAuthClientInformationFull | None = None
    redirect = AnyUrl(auth.redirect_uri or DEFAULT_REDIRECT_URI)
    if flow == "authorization_code" and auth.client_id is not None:
        preregistered = OAuthClientInformationFull(
            client_id=auth.client_id,
            client_secret=auth.client_secret,
            redirect_uris=[redirect],
            token_endpoint_auth_method=auth.token_endpoint_auth_method
            or ("client_secret_basic" if auth.client_secret else "none"),
            grant_types=["authorization_code", "refresh_token"],
            scope=scope,
        )
    storage = _Storage(auth.storage or _InMemoryStorage(), preregistered, learn)
    provider: _ConfiguredScope
    try:
        if flow == "client_credentials":
            method = auth.token_endpoint_auth_method or "client_secret_basic"
            if method == "none":
                msg = f"{where}: client_credentials needs client_secret_basic or client_secret_post"
                raise ConfigurationError(msg)
            provider = _ClientCredentials(
                server_url,
                storage,
                cast(str, auth.client_id),
                cast(str, auth.client_secret),
                token_endpoint_auth_method=method,
                scopes=scope,
                issuer=auth.issuer,
            )
        elif flow == "private_key_jwt":
            client_id = cast(str, auth.client_id)
            signed = SignedJWTParameters(
                issuer=client_id,
                subject=client_id,
                signing_key=cast(str, auth.private_key),
                signing_algorithm=auth.signing_algorithm or "RS256",
            )
            provider = _PrivateKeyJWT(
                server_url,
                storage,
                client_id,
                signed.create_assertion_provider(),
                scopes=scope,
                issuer=auth.issuer,
            )
        else:
            metadata = OAuthClientMetadata(
                client_name=auth.client_name or "agentloop",
                redirect_uris=[redirect],
                grant_types=["authorization_code", "refresh_token"],
                response_types=["code"],
                scope=scope,
            )
            provider = _AuthorizationCode(
                server_url,
                metadata,
                storage,
                redirect_handler=auth.redirect_handler,
                callback_handler=auth.callback_handler,
                timeout=auth.timeout_s or 300.0,
                client_metadata_url=auth.client_metadata_url,
            )
    except ValueError as error:  # the SDK's checks (an issuer or metadata URL)
        problem = Redactor(auth.secrets)(" ".join(str(error).split()))
        msg = f"{where}: invalid auth: {problem}"
        raise ConfigurationError(msg) from None
    provider.configured_scope = scope
    return cast(httpx.Auth, provider)
