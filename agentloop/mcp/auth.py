"""Authorization of HTTP MCP servers: a server's `auth` entry, run by the `mcp` SDK's OAuth.

A server's `auth` (in its config, or `MCPToolset(auth={name: MCPAuth(...)})`) names one
flow; the toolset turns it into one `Auth` of the SDK's HTTP library per server, shared
by all of that server's sessions, so a token is obtained once and refreshed by the SDK:

- `bearer`: a static token sent as `Authorization: Bearer ...` (as a `headers` entry does);
- `client_credentials`: a client id and secret (`ClientCredentialsOAuthProvider`);
- `private_key_jwt`: client credentials proved by a JWT signed with the client's private
  key, or by a JWT given whole (`assertion`: workload identity federation)
  (`PrivateKeyJWTOAuthProvider`);
- `identity_assertion` (mcp 2.x): enterprise-managed authorization (SEP-990): an identity
  assertion grant (ID-JAG) from the enterprise's identity provider, exchanged with the
  RFC 7523 jwt-bearer grant at the configured `issuer` (`IdentityAssertionOAuthProvider`);
- `authorization_code` (the default): the SDK's `OAuthClientProvider`, with PKCE, dynamic
  registration (or a pre-registered `client_id`, or a `client_metadata_url`), scope
  selection and step-up; the app supplies the `redirect_handler` (sends the person, or a
  headless client, to the authorization URL) and the `callback_handler` (returns the code,
  state and, where the redirect has one, `iss` the redirect carried). On mcp 2.x the SDK
  also checks that `iss` (RFC 9207), registers again with an authorization server the
  resource moved to, asks for the union of the scopes on a step-up, asks for
  `offline_access` where the server offers it, and names the client's `application_type`.

Tokens are kept by the app's `storage` (the SDK's `TokenStorage` protocol), or in memory
for the toolset's life. Every token the flow obtains, and the configured secrets, are
redacted from the toolset's logs, events and results; an `MCPAuth` never shows them in
its `repr`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast, get_args
from urllib.parse import urlsplit

from pydantic import AnyUrl

from agentloop.errors import ConfigurationError
from agentloop.mcp import sdk
from agentloop.mcp.sdk import (
    ClientCredentialsOAuthProvider,
    OAuthClientInformationFull,
    OAuthClientProvider,
    OAuthContext,
    OAuthToken,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
    TokenStorage,
    http,
)
from agentloop.observability.redaction import Redactor

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

AuthFlow = Literal[
    "authorization_code", "client_credentials", "private_key_jwt", "identity_assertion", "bearer"
]
"""The flows an `auth` entry may name (`identity_assertion` needs mcp 2.x)."""

TokenEndpointAuthMethod = Literal["client_secret_basic", "client_secret_post", "none"]
"""How a client proves itself to the token endpoint (RFC 7591)."""

RedirectHandler = Callable[[str], Awaitable[None]]
"""Sends the person (or a headless client) to the authorization URL it is given."""

CallbackHandler = Callable[[], Awaitable[Any]]
"""Returns what the redirect back carried: `(code, state)`, or `(code, state, iss)` (or a
mapping with those keys) where the redirect has an `iss` parameter (RFC 9207: mcp 2.x
checks it against the authorization server)."""

AssertionProvider = Callable[[str, str], Awaitable[str]]
"""`identity_assertion`: given the authorization server's issuer (the ID-JAG's audience)
and the MCP server's resource, returns an ID-JAG from the enterprise's identity provider."""

DEFAULT_REDIRECT_URI = "http://localhost:3000/callback"
"""The redirect URI registered when an `authorization_code` entry names none."""
DEFAULT_FLOW_TIMEOUT_S = 300.0
"""How long the authorization code flow waits for the redirect back, by default."""

_SECRET_FIELDS = ("client_secret", "private_key", "token", "assertion")


@dataclass(frozen=True)
class MCPAuth:
    """How to authorize with one HTTP MCP server (the `auth` entry of its config).

    Every field is optional; `MCPToolset(auth=...)` gives an `MCPAuth` whose set fields
    win over the config's entry for the same server (so the config holds the client id
    and scopes, the code the handlers and storage).
    """

    flow: AuthFlow | None = None
    """`authorization_code` (the default), `client_credentials`, `private_key_jwt`,
    `identity_assertion` (mcp 2.x) or `bearer`."""
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
    other (recommended for the client credentials flows; required by
    `identity_assertion`)."""
    assertion: str | None = field(default=None, repr=False)
    """A JWT given whole: `private_key_jwt`'s client assertion instead of a `private_key`
    (workload identity federation), or `identity_assertion`'s ID-JAG."""
    assertion_provider: AssertionProvider | None = field(default=None, repr=False)
    """`identity_assertion`: obtains a fresh ID-JAG for each token request (instead of a
    fixed `assertion`)."""
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
    """How long the authorization code flow waits for the redirect back (default 300 s)."""

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
        "client_metadata_url", "token", "timeout_s", "assertion",
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
    if flow == "identity_assertion" and sdk.identity_assertion_provider() is None:
        msg = f"{where}: auth flow 'identity_assertion' needs mcp 2.x (installed: mcp 1.x)"
        raise ConfigurationError(msg)
    needs: tuple[str, ...] = {
        "bearer": ("token",),
        "client_credentials": ("client_id", "client_secret"),
        "private_key_jwt": ("client_id",),
        "identity_assertion": ("client_id", "client_secret", "issuer"),
        "authorization_code": () if handlers_later else ("redirect_handler", "callback_handler"),
    }[flow]
    missing = [name for name in needs if getattr(auth, name) is None]
    if flow == "private_key_jwt" and auth.private_key is None and auth.assertion is None:
        missing.append("private_key (or assertion)")
    given = auth.assertion is not None or auth.assertion_provider is not None
    if flow == "identity_assertion" and not handlers_later and not given:
        missing.append("assertion_provider (or assertion)")
    if missing:
        hint = (
            f" (give them in code: MCPToolset(..., auth={{server: MCPAuth({missing[0]}=...)}}))"
            if flow in ("authorization_code", "identity_assertion")
            and missing[0].endswith(("handler", "provider (or assertion)"))
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

    async def _perform_authorization(self) -> http.Request:
        if self.context.client_metadata.scope is None:
            self.context.client_metadata.scope = self.configured_scope
        return cast(http.Request, await super()._perform_authorization())  # type: ignore[misc]


class _AuthorizationCode(_ConfiguredScope, OAuthClientProvider):
    pass


class _ClientCredentials(_ConfiguredScope, ClientCredentialsOAuthProvider):
    pass


class _PrivateKeyJWT(_ConfiguredScope, PrivateKeyJWTOAuthProvider):
    pass


class _Bearer(http.Auth):
    """A static bearer token."""

    def __init__(self, token: str) -> None:
        self._token = token

    def __repr__(self) -> str:
        return "_Bearer(token=[REDACTED])"

    def auth_flow(self, request: http.Request) -> Any:
        request.headers["Authorization"] = f"Bearer {self._token}"
        yield request


def build_auth(
    auth: MCPAuth, server_url: str, *, where: str, learn: Callable[..., None]
) -> http.Auth:
    """The `Auth` (of the SDK's HTTP library) that runs `auth`'s flow for the server.

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
    try:
        if flow == "identity_assertion":
            return _identity_assertion(auth, server_url, storage, scope)
        provider = _provider(auth, server_url, storage, scope, redirect, where=where)
    except ValueError as error:  # the SDK's checks (an issuer or metadata URL)
        problem = Redactor(auth.secrets)(" ".join(str(error).split()))
        msg = f"{where}: invalid auth: {problem}"
        raise ConfigurationError(msg) from None
    provider.configured_scope = scope
    return cast(http.Auth, provider)


def _provider(
    auth: MCPAuth,
    server_url: str,
    storage: _Storage,
    scope: str | None,
    redirect: AnyUrl,
    *,
    where: str,
) -> _ConfiguredScope:
    """The SDK's provider of an OAuth flow (all but `bearer` and `identity_assertion`)."""
    flow = auth.resolved_flow
    if flow == "client_credentials":
        method = auth.token_endpoint_auth_method or "client_secret_basic"
        if method == "none":
            msg = f"{where}: client_credentials needs client_secret_basic or client_secret_post"
            raise ConfigurationError(msg)
        return _ClientCredentials(
            server_url,
            storage,
            cast(str, auth.client_id),
            cast(str, auth.client_secret),
            token_endpoint_auth_method=method,
            issuer=auth.issuer,
            **sdk.scope_option(scope),
        )
    if flow == "private_key_jwt":
        client_id = cast(str, auth.client_id)
        if auth.assertion is not None:
            assertion = sdk.static_assertion_provider(auth.assertion)
        else:
            signed = SignedJWTParameters(
                issuer=client_id,
                subject=client_id,
                signing_key=cast(str, auth.private_key),
                signing_algorithm=auth.signing_algorithm or "RS256",
            )
            assertion = signed.create_assertion_provider()
        return _PrivateKeyJWT(
            server_url,
            storage,
            client_id,
            assertion,
            issuer=auth.issuer,
            **sdk.scope_option(scope),
        )
    host = urlsplit(str(redirect)).hostname or ""
    metadata = sdk.client_metadata(
        client_name=auth.client_name or "agentloop",
        redirect_uris=[redirect],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        scope=scope,
        application_type="native" if host in _THIS_MACHINE else "web",
    )
    return _AuthorizationCode(
        server_url,
        metadata,
        storage,
        redirect_handler=auth.redirect_handler,
        callback_handler=_answered(auth),
        client_metadata_url=auth.client_metadata_url,
        **sdk.code_flow_options(auth.timeout_s or DEFAULT_FLOW_TIMEOUT_S),
    )


_THIS_MACHINE = {"localhost", "127.0.0.1", "::1", "[::1]"}


def _answered(auth: MCPAuth) -> Callable[[], Awaitable[Any]] | None:
    """The app's callback handler, its answer as the SDK takes it, within the flow's time."""
    handler = auth.callback_handler
    if handler is None:
        return None
    limit = auth.timeout_s or DEFAULT_FLOW_TIMEOUT_S

    async def callback() -> Any:
        try:
            answer = await asyncio.wait_for(handler(), limit)
        except TimeoutError:
            msg = f"no answer from the authorization redirect within {limit:g}s"
            raise TimeoutError(msg) from None
        return sdk.code_result(answer)

    return callback


def _identity_assertion(
    auth: MCPAuth, server_url: str, storage: _Storage, scope: str | None
) -> http.Auth:
    """The SEP-990 provider of mcp 2.x: the ID-JAG exchanged with the jwt-bearer grant."""
    fixed = auth.assertion
    given = auth.assertion_provider

    async def assertion(audience: str, resource: str) -> str:
        if given is not None:
            return await given(audience, resource)
        return cast(str, fixed)

    provider_type = sdk.identity_assertion_provider()
    method = auth.token_endpoint_auth_method or "client_secret_post"
    return cast(
        http.Auth,
        provider_type(
            server_url,
            storage,
            cast(str, auth.client_id),
            cast(str, auth.client_secret),
            cast(str, auth.issuer),
            assertion,
            scope=scope,
            token_endpoint_auth_method=method,
        ),
    )
