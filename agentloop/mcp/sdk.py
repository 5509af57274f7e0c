"""The one module that knows which major of the `mcp` SDK is installed (1.x or 2.x).

agentloop runs on mcp 1.x (protocol up to 2025-11-25, beside langchain-mcp-adapters) and on
mcp 2.x (also protocol 2026-07-28). Every other module of `agentloop.mcp` takes the SDK's
names from here and reads what a server sent as *wire data*: `wire(model)` is the
model as the spec spells it (`isError`, `structuredContent`, `inputSchema`, ...), the same
on both majors, where the SDK's own attribute names differ (mcp 2.x has `is_error`, ...).

What differs, and is settled here:

- the HTTP library (`httpx` on 1.x, `httpx2` on 2.x: an `auth` is an `http.Auth`);
- how a session starts: `initialize` on 1.x; on 2.x a `server/discover` probe that falls
  back to `initialize` (a 2026-07-28 server then gets the protocol headers and `_meta`
  on every request, which the 2.x session adds itself);
- a tool call: on 2.x a server may answer "input required" (multi-round requests): the
  questions it embeds go through the same client callbacks as a question it sends
  during the call, and the call is sent again with the answers (`call_tool`);
- the session class: on 1.x the SDK answers each request of the server inside its
  receive loop, so `AnsweringSession` answers questions apart from it (2.x does so itself);
- the capabilities declared: only what the loop serves (roots are fixed: no
  `listChanged`);
- the OAuth providers' arguments, and the callback handler's answer (on 2.x an
  `AuthorizationCodeResult` with the redirect's `iss`, checked by the SDK: RFC 9207);
- the private request counter `next_request_id` reads (pinned by a contract test).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, cast

import anyio
from anyio.abc import TaskStatus
from mcp import ClientSession, types
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
    static_assertion_provider,
)
from mcp.client.auth.oauth2 import OAuthContext
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import StreamableHTTPTransport
from mcp.shared import exceptions as _exceptions
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from mcp.shared.message import SessionMessage
from pydantic import BaseModel

if TYPE_CHECKING:
    import httpx as http
    from mcp.shared.exceptions import McpError
    from mcp.shared.session import RequestResponder
else:
    McpError = getattr(_exceptions, "MCPError", None) or _exceptions.McpError

__all__ = [
    # the SDK's major, its sessions and types
    "MCP_MAJOR",
    "RELATED_REQUEST_META",
    "AnsweringSession",
    "ClientSession",
    "McpError",
    "SessionMessage",
    "StdioServerParameters",
    "StreamableHTTPTransport",
    "http",
    "types",
    # sessions and requests
    "call_tool",
    "cancelled_notification",
    "connect",
    "error",
    "is_modern",
    "jsonrpc_message",
    "list_page",
    "message_root",
    "new_session",
    "next_request_id",
    "open_streamable_http",
    "read_resource",
    "request_meta",
    "set_log_level",
    "sse_client",
    "stdio_client",
    "create_mcp_http_client",
    "wire",
    # OAuth
    "ClientCredentialsOAuthProvider",
    "OAuthClientInformationFull",
    "OAuthClientMetadata",
    "OAuthClientProvider",
    "OAuthContext",
    "OAuthToken",
    "PrivateKeyJWTOAuthProvider",
    "SignedJWTParameters",
    "TokenStorage",
    "client_metadata",
    "code_flow_options",
    "code_result",
    "identity_assertion_provider",
    "scope_option",
    "static_assertion_provider",
]

logger = logging.getLogger(__name__)

MCP_MAJOR = 2 if hasattr(_exceptions, "MCPError") else 1
"""The installed SDK's major version."""

if not TYPE_CHECKING:
    http = importlib.import_module("httpx2" if MCP_MAJOR >= 2 else "httpx")

RELATED_REQUEST_META = "agentloop/relatedRequestId"
"""The `_meta` key that names, in a request the server sent, the client's request it
belongs to (added by the streamable HTTP transport from the stream it came on, and to
the questions of a multi-round call)."""

MAX_INPUT_ROUNDS = 10
"""How many times a call answered "input required" is sent again before it fails."""
_STATE_ONLY_WAIT_S = (0.05, 0.25)
"""The first and the longest wait before a call answered "input required" with no
question (only its state) is sent again."""


def _version() -> str:
    try:
        return importlib.metadata.version("agentloop")
    except importlib.metadata.PackageNotFoundError:  # a source checkout not installed
        return "0"


_CLIENT_INFO: dict[str, Any] = {"name": "agentloop", "version": _version()}
"""What the client calls itself in `initialize` (and in each 2026-07-28 request's `_meta`)."""


def wire(model: BaseModel) -> dict[str, Any]:
    """A protocol model as the spec spells it (JSON types, `None` fields left out)."""
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


def error(code: int, message: str) -> McpError:
    """An error answer of the server (as the SDK raises it)."""
    if MCP_MAJOR >= 2:
        return McpError(code, message)  # type: ignore[arg-type, call-arg]
    return McpError(types.ErrorData(code=code, message=message))


def message_root(item: Any) -> Any:
    """The JSON-RPC message (request, notification, response or error) a stream item holds."""
    message = getattr(item, "message", None)
    return getattr(message, "root", message)


def jsonrpc_message(root: Any, metadata: Any = None) -> SessionMessage:
    """A stream item holding a JSON-RPC request, notification, response or error."""
    if MCP_MAJOR >= 2:
        return SessionMessage(root, metadata=metadata)
    return SessionMessage(types.JSONRPCMessage(root), metadata=metadata)


def request_meta(context: Any) -> dict[str, Any]:
    """The `_meta` of a request the server sent, as a plain mapping (empty when it has none)."""
    meta = getattr(context, "meta", None)
    if meta is None:
        return {}
    if isinstance(meta, Mapping):  # mcp 2.x: a dict, its progress token as `progress_token`
        found = dict(meta)
        if "progress_token" in found:
            found["progressToken"] = found.pop("progress_token")
        return found
    found = dict(meta.model_extra or {})
    token = getattr(meta, "progressToken", None)
    if token is not None:
        found["progressToken"] = token
    return found


def next_request_id(session: ClientSession) -> int:
    """The id the session's next request will take.

    Read it in the same step as the request is sent (no `await` in between), so that no
    other request takes it first. It reads the SDK's private counter.
    """
    if MCP_MAJOR >= 2:
        return int(session._dispatcher._next_id) + 1  # type: ignore[attr-defined]
    return int(session._request_id)


def is_modern(session: ClientSession) -> bool:
    """Whether the session speaks protocol 2026-07-28 or later (mcp 2.x, after discovery)."""
    return MCP_MAJOR >= 2 and getattr(session, "discover_result", None) is not None


def cancelled_notification(request_id: int, reason: str) -> Any:
    """The `notifications/cancelled` of a request."""
    notification = types.CancelledNotification(
        params=types.CancelledNotificationParams(requestId=request_id, reason=reason)
    )
    return notification if MCP_MAJOR >= 2 else types.ClientNotification(notification)


def _request(request: Any) -> Any:
    return request if MCP_MAJOR >= 2 else types.ClientRequest(request)


# -- sessions ------------------------------------------------------------------------------


class _ServedCapabilities:
    """Declares the roots as fixed: the loop never sends `roots/list_changed`."""

    def _build_capabilities(self, version: str) -> Any:  # mcp 2.x
        capabilities = super()._build_capabilities(version)  # type: ignore[misc]
        if capabilities.roots is not None:
            capabilities.roots = types.RootsCapability()
        return capabilities

    async def send_request(self, request: Any, *args: Any, **kwargs: Any) -> Any:  # mcp 1.x
        root = getattr(request, "root", request)
        if isinstance(root, types.InitializeRequest) and root.params.capabilities.roots:
            root.params.capabilities.roots = types.RootsCapability()
        return await super().send_request(request, *args, **kwargs)  # type: ignore[misc]


_ANSWERED_APART = (types.ElicitRequest, types.CreateMessageRequest)


class AnsweringSession(_ServedCapabilities, ClientSession):
    """The SDK's `ClientSession`, answering the server's questions apart from its receive loop.

    On mcp 1.x the SDK awaits the answer to each request of the server in the loop that
    reads the session: a question that waits for a person held up every other message of
    the session, another call's question and every call's result among them. Elicitation
    and sampling requests are answered in tasks of their own (in the session's task
    group, so they end with it); each has entered its request's cancel scope before the
    loop reads on, so a `notifications/cancelled` for it still finds it. (mcp 2.x
    answers every request of the server in a task of its own.)
    """

    async def _received_request(self, responder: RequestResponder[Any, Any]) -> None:
        if MCP_MAJOR >= 2 or not isinstance(responder.request.root, _ANSWERED_APART):
            await super()._received_request(responder)
            return
        await self._task_group.start(self._answer_apart, responder)

    async def _answer_apart(
        self,
        responder: RequestResponder[Any, Any],
        *,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        task_status.started()  # the SDK enters the responder before its first await
        try:
            await super()._received_request(responder)
        except Exception as error:  # never the session's end: its loop would have logged it
            logger.warning("answering a request of an MCP server failed: %s", error)


def new_session(
    read: Any, write: Any, *, log_level: str | None = None, **callbacks: Any
) -> ClientSession:
    """A client session on a transport's streams, with the server's callbacks.

    Args:
        read: The transport's read stream.
        write: Its write stream.
        log_level: The least severe log message asked for (on 2.x, also sent with every
            request of a 2026-07-28 session, where logs are asked for per request).
        callbacks: `ClientSession` callbacks (`sampling_callback`, `elicitation_callback`,
            `list_roots_callback`, `logging_callback`, `message_handler`).
    """
    info = types.Implementation.model_validate(_CLIENT_INFO)
    if MCP_MAJOR >= 2:
        callbacks.update(dispatcher=_complete_by_default()(read, write), log_level=log_level)
        return AnsweringSession(client_info=info, **callbacks)
    return AnsweringSession(read, write, client_info=info, **callbacks)


def _complete_by_default() -> Any:
    """The dispatcher of mcp 2.x, reading a result without `resultType` as `complete`.

    Protocol 2026-07-28 says a client must assume `"resultType": "complete"` where a
    result names none (SEP-2322); the SDK refuses such a result instead. (A session of
    an earlier revision drops the field.)
    """
    base = importlib.import_module("mcp.shared.jsonrpc_dispatcher").JSONRPCDispatcher

    class CompleteByDefault(base):  # type: ignore[misc, valid-type]
        async def send_raw_request(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
            raw: dict[str, Any] = await super().send_raw_request(*args, **kwargs)
            if isinstance(raw, dict) and "resultType" not in raw:
                raw["resultType"] = "complete"
            return raw

    return CompleteByDefault


async def connect(session: ClientSession) -> types.ServerCapabilities:
    """Start the session: the server's capabilities.

    mcp 1.x sends `initialize`; mcp 2.x probes `server/discover` first and falls back to
    `initialize` for a server of an earlier revision.
    """
    if MCP_MAJOR < 2:
        return (await session.initialize()).capabilities
    negotiate = importlib.import_module("mcp.client._probe").negotiate_auto
    await negotiate(session)
    capabilities = session.server_capabilities  # type: ignore[attr-defined]
    return cast(types.ServerCapabilities, capabilities or types.ServerCapabilities())


async def set_log_level(session: ClientSession, level: str) -> bool:
    """Ask the server for a log level (`logging/setLevel`); False where the revision has none.

    A 2026-07-28 session asks for it with every request instead (see `new_session`).
    """
    if is_modern(session):
        return False
    request = types.SetLevelRequest(params=types.SetLevelRequestParams(level=cast(Any, level)))
    await session.send_request(_request(request), types.EmptyResult)
    return True


def list_page(session: ClientSession, kind: str) -> Callable[[str | None], Awaitable[Any]]:
    """A function that fetches one page of a server's `kind` list (`tools`, `prompts`, ...).

    It returns the page and its `nextCursor` (None on the last page).
    """
    method = getattr(session, f"list_{kind}")

    async def page(cursor: str | None) -> Any:
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        listed = await method(params=params)
        return listed, getattr(listed, "next_cursor" if MCP_MAJOR >= 2 else "nextCursor")

    return page


async def read_resource(session: ClientSession, uri: str) -> types.ReadResourceResult:
    """Read a resource (`resources/read`)."""
    if MCP_MAJOR >= 2:
        return await session.read_resource(uri)  # type: ignore[arg-type]
    from pydantic import AnyUrl

    return await session.read_resource(AnyUrl(uri))


def _call_result_type() -> Any:
    if MCP_MAJOR < 2:
        return types.CallToolResult
    from pydantic import TypeAdapter

    return TypeAdapter(types.CallToolResult | types.InputRequiredResult)  # type: ignore[attr-defined]


_CALL_RESULT = _call_result_type()


async def call_tool(
    session: ClientSession,
    name: str,
    arguments: dict[str, Any],
    *,
    meta: dict[str, Any] | None = None,
    on_progress: Callable[[float, float | None, str | None], Awaitable[None]] | None = None,
    on_send: Callable[[int], None] = lambda request_id: None,
) -> types.CallToolResult:
    """Call a tool with a bare `tools/call` request (no second request after it).

    On mcp 2.x, a server that answers "input required" has its embedded questions
    (elicitation, sampling, roots) answered by the session's callbacks, as a question the
    server sends during the call is (each names the call in `RELATED_REQUEST_META`), and
    the call is sent again with the answers and the server's `requestState`, up to
    `MAX_INPUT_ROUNDS` times.

    Args:
        session: The session.
        name: The tool's name.
        arguments: Its arguments.
        meta: The request's `_meta`.
        on_progress: Hears the call's progress notifications.
        on_send: Called with each request's id just before it is sent.

    Raises:
        McpError: The server answered with an error (or a question was refused).
    """
    answers: dict[str, Any] | None = None
    state: str | None = None
    wait_s = _STATE_ONLY_WAIT_S[0]
    for _ in range(MAX_INPUT_ROUNDS + 1):
        fields: dict[str, Any] = {"name": name, "arguments": arguments}
        if meta:
            fields["_meta"] = meta
        if answers is not None:
            fields["inputResponses"] = answers
        if state is not None:
            fields["requestState"] = state
        params = types.CallToolRequestParams.model_validate(fields)
        request_id = next_request_id(session)
        on_send(request_id)
        result = await session.send_request(
            _request(types.CallToolRequest(params=params)),
            _CALL_RESULT,
            progress_callback=cast(Any, on_progress),
        )
        if isinstance(result, types.CallToolResult):
            return result
        state = result.request_state
        if result.input_requests:
            answers = await _answer_inputs(session, request_id, result.input_requests)
            wait_s = _STATE_ONLY_WAIT_S[0]
        else:
            answers = None
            await anyio.sleep(wait_s)
            wait_s = min(wait_s * 2, _STATE_ONLY_WAIT_S[1])
    message = f"the server asked for input more than {MAX_INPUT_ROUNDS} times"
    raise error(types.INTERNAL_ERROR, message)


async def _answer_inputs(
    session: ClientSession, request_id: int, requests: Mapping[str, Any]
) -> dict[str, Any]:
    """Answer a multi-round call's questions (all at once) through the session's callbacks."""
    context_type = importlib.import_module("mcp.client.session").ClientRequestContext
    context = context_type(
        session=session, request_id=request_id, meta={RELATED_REQUEST_META: request_id}
    )
    answers: dict[str, Any] = {}
    refused: list[types.ErrorData] = []

    async def answer(key: str, request: Any) -> None:
        reply = await session.dispatch_input_request(context, request)  # type: ignore[attr-defined]
        if isinstance(reply, types.ErrorData):
            refused.append(reply)
            tasks.cancel_scope.cancel()
        else:
            answers[key] = reply

    async with anyio.create_task_group() as tasks:
        for key, request in requests.items():
            tasks.start_soon(answer, key, request)
    if refused:
        raise error(refused[0].code, refused[0].message)
    return answers


# -- streamable HTTP -----------------------------------------------------------------------


@asynccontextmanager
async def open_streamable_http(
    transport: StreamableHTTPTransport, client: Any, *, terminate_on_close: bool = True
) -> AsyncIterator[tuple[Any, Any]]:
    """The streams of a streamable HTTP session on `transport` (the SDK's client, as it is).

    Args:
        transport: The transport (the SDK's, or a subclass of it).
        client: The HTTP client (`http.AsyncClient`), closed on exit.
        terminate_on_close: End the server's session (`DELETE`) on exit.
    """
    if MCP_MAJOR >= 2:
        streams = importlib.import_module("mcp.shared._context_streams")
        read_writer, read_stream = streams.create_context_streams[Any](0)
        write_stream, write_reader = streams.create_context_streams[Any](0)
    else:
        read_writer, read_stream = anyio.create_memory_object_stream[Any](0)
        write_stream, write_reader = anyio.create_memory_object_stream[Any](0)
    async with client, anyio.create_task_group() as tasks:
        try:

            def start_get_stream() -> None:
                tasks.start_soon(transport.handle_get_stream, client, read_writer)

            tasks.start_soon(
                transport.post_writer,
                client,
                write_reader,
                read_writer,
                write_stream,
                start_get_stream,
                tasks,
            )
            try:
                yield read_stream, write_stream
            finally:
                if transport.session_id and terminate_on_close:
                    await transport.terminate_session(client)
                tasks.cancel_scope.cancel()
        finally:
            await read_writer.aclose()
            await write_stream.aclose()


# -- OAuth ---------------------------------------------------------------------------------


def code_result(answer: Any) -> Any:
    """A callback handler's answer as the SDK takes it.

    The app's handler returns `(code, state)` or `(code, state, iss)` (the redirect's
    `iss` parameter, RFC 9207), or a mapping with those keys. mcp 2.x takes an
    `AuthorizationCodeResult` (and checks `iss` against the authorization server);
    mcp 1.x a `(code, state)` pair.
    """
    if isinstance(answer, Mapping):
        code, state, iss = answer.get("code"), answer.get("state"), answer.get("iss")
    elif isinstance(answer, tuple | list) and len(answer) in (2, 3):
        code, state, iss = (*answer, None)[:3]
    else:
        code = getattr(answer, "code", None)
        state, iss = getattr(answer, "state", None), getattr(answer, "iss", None)
    if not isinstance(code, str):
        msg = (
            "the callback handler must return (code, state), (code, state, iss) or "
            f"{{'code': ..., 'state': ..., 'iss': ...}}, got {type(answer).__name__}"
        )
        raise ValueError(msg)
    if MCP_MAJOR >= 2:
        result = importlib.import_module("mcp.shared.auth").AuthorizationCodeResult
        return result(code=code, state=state, iss=iss)
    return code, state


def scope_option(scope: str | None) -> dict[str, Any]:
    """The client credentials providers' scope argument (`scopes` on 1.x, `scope` on 2.x)."""
    return {"scope": scope} if MCP_MAJOR >= 2 else {"scopes": scope}


def code_flow_options(timeout_s: float) -> dict[str, Any]:
    """The authorization code provider's options beyond the shared ones.

    mcp 1.x bounds the whole flow (`timeout`); 2.x leaves the time a person takes out of
    every timeout, so the app's callback handler is bounded instead (`auth.py`).
    """
    return {} if MCP_MAJOR >= 2 else {"timeout": timeout_s}


def client_metadata(**fields: Any) -> OAuthClientMetadata:
    """The client metadata of dynamic registration.

    On mcp 2.x it names the `application_type` (OIDC: `native` for a redirect to this
    machine, `web` for another host); mcp 1.x sends none.
    """
    if MCP_MAJOR < 2:
        fields.pop("application_type", None)
    return OAuthClientMetadata(**fields)


def identity_assertion_provider() -> Any:
    """The `IdentityAssertionOAuthProvider` of mcp 2.x (SEP-990), or None on mcp 1.x."""
    if MCP_MAJOR < 2:
        return None
    module = importlib.import_module("mcp.client.auth.extensions.identity_assertion")
    return module.IdentityAssertionOAuthProvider
