"""One server's session, held open by a background task (the transport side of the pool).

Sessions are opened on the mcp SDK's transports (through `agentloop.mcp.sdk`, on either
major). A stdio server's stderr goes to its own logger (`agentloop.mcp.server.<name>`),
not the terminal. Streamable HTTP sessions use the SDK's transport with a few changes: a response
stream the server closes before the answer (and that cannot be resumed with
`Last-Event-ID`) fails its request at once, instead of leaving it to its timeout, and
a request whose connection cannot be opened (refused) or breaks is answered with an
error saying which. A request that provably never reached the server (the
server answered 404 for the session id: it restarted or expired the session; or it
could not be connected to) is sent again on a new session (`NotSentError`); one whose
connection broke after it left is not: the server may have run it
(`MCPTransportError.sent`). A request the server sends on a call's response stream
(a question) names that call in its `_meta` (`RELATED_REQUEST_META`). Both kinds of
session answer the server's questions apart from their receive loop
(`sdk.AnsweringSession` on mcp 1.x; 2.x does so itself).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar, cast

import anyio
from pydantic import ValidationError

from agentloop.errors import MCPToolError, MCPTransportError
from agentloop.mcp import sdk
from agentloop.mcp.cancel import CANCEL_GRACE_S, CANCEL_REASON, next_request_id, send_cancelled
from agentloop.mcp.client import ClientHandlers
from agentloop.mcp.config import MCPServerSpec
from agentloop.mcp.output import ServerLog, quote_output
from agentloop.mcp.sdk import (
    RELATED_REQUEST_META,
    ClientSession,
    McpError,
    StdioServerParameters,
    StreamableHTTPTransport,
    http,
    jsonrpc_message,
    message_root,
)
from agentloop.mcp.sdk import types as mcp_types

__all__ = ["Connection", "NotSentError", "describe", "open_session", "sse", "streamable_http"]

logger = logging.getLogger(__name__)

_SDK_PARSE_FAILURE = "Failed to parse JSONRPC message from server"
_SDK_CONNECTION_CLOSED = "Connection closed"
"""The mcp SDK's error for the requests in flight when a session's stream ends."""


class _QuietParseFailures(logging.Filter):
    """Drop the SDK's traceback for a stray stdout line: the session reports it, once."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg != _SDK_PARSE_FAILURE


logging.getLogger("mcp.client.stdio").addFilter(_QuietParseFailures())

BadOutputHook = Callable[[Exception], None]

T = TypeVar("T")

CLOSE_TIMEOUT_S = 10.0
"""How long closing a session waits for it to shut down before cancelling it."""
BAD_OUTPUT_GRACE_S = 1.5
"""How long a starting server that wrote something else than a message on stdout may
still take to answer `initialize` (a banner line) before it counts as broken."""
HEALTH_CHECK_TIMEOUT_S = 5.0
"""How long a ping may take before the session counts as dead."""


def describe(error: BaseException) -> str:
    """One line naming an error (the first leaf of an exception group)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    text = str(error)
    if isinstance(error, McpError):
        text = _error_text(error.error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _error_text(error: mcp_types.ErrorData) -> str:
    """An error answer's message, with its `data` when that is text (what went wrong)."""
    data = error.data
    return error.message + (f" ({data})" if isinstance(data, str) and data else "")


@contextlib.asynccontextmanager
async def open_session(
    spec: MCPServerSpec, handlers: ClientHandlers, on_bad_output: BadOutputHook | None = None
) -> AsyncIterator[ClientSession]:
    """Open a session with the server's client callbacks.

    The connection's keys mean what they mean to langchain-mcp-adapters (`transport`:
    `stdio`, `streamable_http` or `sse`; `command`, `args`, `env`, `cwd`; `url`,
    `headers`, `timeout`, `sse_read_timeout`, `auth`); a stdio server's stderr goes to
    its logger, not the terminal.

    Args:
        spec: The server.
        handlers: Its client callbacks.
        on_bad_output: Called with the parse error of a stdout line that is not a message.
    """
    connection = dict(spec.connection)
    session_kwargs = {**(connection.get("session_kwargs") or {}), **handlers.session_kwargs()}
    if on_bad_output is not None and connection.get("transport") == "stdio":
        inner = session_kwargs["message_handler"]

        async def message_handler(message: Any) -> None:
            if isinstance(message, Exception):
                on_bad_output(message)
            await inner(message)

        session_kwargs["message_handler"] = message_handler
    level = spec.log_level
    if connection.get("transport") in _STREAMABLE_HTTP:
        async with (
            streamable_http(connection) as (read, write),
            sdk.new_session(read, write, log_level=level, **session_kwargs) as session,
        ):
            yield session
        return
    if connection.get("transport") != "stdio":
        async with (
            sse(connection) as (read, write),
            sdk.new_session(read, write, log_level=level, **session_kwargs) as session,
        ):
            yield session
        return
    parameters = StdioServerParameters(
        command=connection["command"],
        args=list(connection.get("args") or []),
        env=connection.get("env"),
        cwd=connection.get("cwd"),
        encoding=connection.get("encoding", "utf-8"),
        encoding_error_handler=connection.get("encoding_error_handler", "strict"),
    )
    log = ServerLog(handlers.output)
    try:
        async with (
            sdk.stdio_client(parameters, errlog=log.file) as (read, write),
            sdk.new_session(read, write, log_level=level, **session_kwargs) as session,
        ):
            yield session
    finally:
        log.close()
        with contextlib.suppress(Exception):  # the server has exited: read its last lines
            await asyncio.to_thread(log.drain)


class NotSentError(Exception):
    """The server never processed the request, so sending it again is safe.

    It never left this process, or the server refused it as sent on a session it
    does not know (HTTP 404: it restarted or expired the session).
    """


_STREAMABLE_HTTP = {"streamable_http", "streamable-http", "http"}
SESSION_TERMINATED = "Session terminated"
"""The mcp SDK's error for a request the server answered 404 (an unknown session id)."""
STREAM_CLOSED = "the server closed the response stream before the answer"
NOT_CONNECTED = "the server could not be connected to"
"""The error of a request whose HTTP connection could not be opened: it never left."""
CONNECTION_BROKE = "the connection broke before the answer"
"""The error of a request whose HTTP connection broke after it was opened."""
_LINK_ERRORS = {_SDK_CONNECTION_CLOSED, STREAM_CLOSED, NOT_CONNECTED, CONNECTION_BROKE}
"""The errors (code `CONNECTION_CLOSED`) of a link that failed, not of the server."""
_NEVER_SENT = (http.ConnectError, http.ConnectTimeout, http.PoolTimeout)
"""The HTTP library's errors raised before a request's first byte is written."""
_SDK_STREAM_FAILED = "SSE stream"
"""How mcp 2.x's transport starts the error of a request whose stream ended unanswered."""


class _FailFastTransport(StreamableHTTPTransport):
    """The SDK's streamable HTTP transport; a request whose stream ends unanswered fails.

    A request whose POST cannot connect, or whose connection breaks, is answered with an
    error saying which (`NOT_CONNECTED`: it never left), where the SDK would end the
    whole session and leave the caller unable to tell whether the server got it. Once the
    server answered 404 to the session's id (it does not know the session), each error
    says `SESSION_TERMINATED`, whatever the server's body said (mcp 2.x passes the body on).
    """

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.session_gone = False
        """The server answered 404 to a request with the session's id."""

    async def note_response(self, response: Any) -> None:
        """An HTTP response arrived (the client's event hook): note a 404 to the session."""
        request = response.request
        post = request.method == "POST" and request.headers.get("mcp-session-id")
        if response.status_code == 404 and post:
            self.session_gone = True

    async def _handle_post_request(self, ctx: Any) -> None:
        root = message_root(ctx.session_message)
        watch = _Answered(ctx.read_stream_writer, None, self)
        try:
            await super()._handle_post_request(dataclasses.replace(ctx, read_stream_writer=watch))
        except http.TransportError as error:
            if not isinstance(root, mcp_types.JSONRPCRequest):
                raise
            message = NOT_CONNECTED if isinstance(error, _NEVER_SENT) else CONNECTION_BROKE
            await _fail(ctx.read_stream_writer, root.id, message, describe(error))

    async def _handle_sse_response(self, response: Any, ctx: Any, *args: Any) -> None:
        root = message_root(ctx.session_message)
        related = root.id if isinstance(root, mcp_types.JSONRPCRequest) else None
        watch = _Answered(ctx.read_stream_writer, related, self)
        await super()._handle_sse_response(
            response, dataclasses.replace(ctx, read_stream_writer=cast(Any, watch)), *args
        )
        if isinstance(root, mcp_types.JSONRPCRequest) and not watch.answered:  # resumption failed
            await _fail(ctx.read_stream_writer, root.id, STREAM_CLOSED)


async def _fail(stream: Any, request_id: Any, message: str, data: str | None = None) -> None:
    """Answer a request whose link failed with an error (code `CONNECTION_CLOSED`)."""
    failed = mcp_types.ErrorData(code=mcp_types.CONNECTION_CLOSED, message=message, data=data)
    reply = mcp_types.JSONRPCError(jsonrpc="2.0", id=request_id, error=failed)
    with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
        await stream.send(jsonrpc_message(reply))


class _Answered:
    """The stream writer of one request's response stream.

    It notes whether a response or an error passed through it, and names that request
    in each request the server sends on the stream (an elicitation, a sampling request:
    `RELATED_REQUEST_META` in its `_meta`), so the client answers it for the call it
    belongs to. The error mcp 2.x's transport gives a request whose stream ended
    unanswered says so as `STREAM_CLOSED`; an error after the server forgot the session,
    as `SESSION_TERMINATED`.
    """

    def __init__(self, inner: Any, related: Any, transport: _FailFastTransport) -> None:
        self.inner = inner
        self.related = related
        self.transport = transport
        self.answered = False

    async def send(self, item: Any) -> None:
        root = message_root(item)
        if isinstance(root, mcp_types.JSONRPCError) and self.transport.session_gone:
            error = mcp_types.ErrorData(code=root.error.code, message=SESSION_TERMINATED)
            root = mcp_types.JSONRPCError(jsonrpc="2.0", id=root.id, error=error)
            item = jsonrpc_message(root)
        if isinstance(root, mcp_types.JSONRPCError) and (
            root.error.code == mcp_types.CONNECTION_CLOSED
            and root.error.message.startswith(_SDK_STREAM_FAILED)
        ):
            return  # `_FailFastTransport` answers it, as this module words it
        if isinstance(root, mcp_types.JSONRPCResponse | mcp_types.JSONRPCError):
            self.answered = True
        elif isinstance(root, mcp_types.JSONRPCRequest) and self.related is not None:
            params = dict(root.params or {})
            params["_meta"] = {**(params.get("_meta") or {}), RELATED_REQUEST_META: self.related}
            request = root.model_copy(update={"params": params})
            item = jsonrpc_message(request, getattr(item, "metadata", None))
        await self.inner.send(item)


def _http_client(connection: dict[str, Any], transport: _FailFastTransport) -> Any:
    """The HTTP client of a connection (`headers`, `timeout`, `sse_read_timeout`, `auth`)."""
    timeout = _seconds(connection.get("timeout"), 30.0)
    read_timeout = _seconds(connection.get("sse_read_timeout"), 300.0)
    factory = connection.get("httpx_client_factory") or sdk.create_mcp_http_client
    client = factory(
        headers=connection.get("headers"),
        timeout=http.Timeout(timeout, read=read_timeout),
        auth=connection.get("auth"),
    )
    hooks = client.event_hooks
    hooks["response"] = [*hooks.get("response", []), transport.note_response]
    client.event_hooks = hooks
    return client


@contextlib.asynccontextmanager
async def streamable_http(
    connection: dict[str, Any],
) -> AsyncIterator[tuple[Any, Any]]:
    """The streams of a streamable HTTP connection (`url`, `headers`, `timeout`, `auth`, ...).

    The SDK's streamable HTTP client, on `_FailFastTransport`.
    """
    transport = _FailFastTransport(connection["url"])
    async with sdk.open_streamable_http(
        transport,
        _http_client(connection, transport),
        terminate_on_close=connection.get("terminate_on_close", True),
    ) as streams:
        yield streams


@contextlib.asynccontextmanager
async def sse(connection: dict[str, Any]) -> AsyncIterator[tuple[Any, Any]]:
    """The streams of an SSE connection (`url`, `headers`, `timeout`, `auth`, ...)."""
    async with sdk.sse_client(
        connection["url"],
        headers=connection.get("headers"),
        timeout=_seconds(connection.get("timeout"), 5.0),
        sse_read_timeout=_seconds(connection.get("sse_read_timeout"), 300.0),
        auth=connection.get("auth"),
        **(
            {"httpx_client_factory": connection["httpx_client_factory"]}
            if connection.get("httpx_client_factory")
            else {}
        ),
    ) as streams:
        yield streams[0], streams[1]


def _seconds(value: Any, default: float) -> float:
    if value is None:
        return default
    return float(value.total_seconds() if isinstance(value, timedelta) else value)


class Connection:
    """One server's session, entered and exited by its own background task.

    anyio requires a stdio session to be closed by the task that opened it, so
    the task holds the session open until `close`; requests are sent from the
    callers' tasks, which `ClientSession` allows.
    """

    def __init__(self, spec: MCPServerSpec, handlers: ClientHandlers) -> None:
        self.spec = spec
        self.handlers = handlers
        self.capabilities: mcp_types.ServerCapabilities | None = None
        self._stop = asyncio.Event()
        self.ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
        self.ready.add_done_callback(lambda f: f.cancelled() or f.exception())
        self.failure: BaseException | None = None
        self.bad_output: str | None = None
        """The first line the server wrote to stdout that is not a message (quoted)."""
        self._draining: dict[str, set[asyncio.Task[None]]] = {}
        self.last_used = time.monotonic()
        self.task = asyncio.create_task(self._serve(), name=f"mcp-session:{spec.name}")

    def _bad_output(self, error: Exception) -> None:
        """A line on stdout that is not a message: fatal while starting, else noted."""
        quoted = quote_output(error)
        if self.bad_output is not None:
            return
        self.bad_output = quoted
        self.handlers.output.add(f"(stdout) {quoted}")
        if not self.ready.done():  # a banner before the answer is tolerated, briefly
            asyncio.get_running_loop().call_later(BAD_OUTPUT_GRACE_S, self._give_up)
            return
        self._warn_bad_output()

    def _give_up(self) -> None:
        if not self.ready.done():
            self.task.cancel()

    def _warn_bad_output(self) -> None:
        logger.warning(
            "MCP server %r wrote to stdout what is not an MCP message: %s",
            self.spec.name,
            self.bad_output,
        )

    def _cancel_on_server(
        self, session: ClientSession, request_id: int, call: asyncio.Future[Any], lane: str
    ) -> None:
        """Cancel a request on the server; it drains in the background until it ended there.

        The next request of the same lane waits for the drain (see `run`).
        """

        async def drain() -> None:
            try:
                if await send_cancelled(session, request_id, CANCEL_REASON):
                    await asyncio.wait(
                        {call, self.task},
                        timeout=CANCEL_GRACE_S,
                        return_when=asyncio.FIRST_COMPLETED,
                    )
            finally:
                await _settle(call)

        task = asyncio.get_running_loop().create_task(drain())
        self._draining.setdefault(lane, set()).add(task)

        def drained(done: asyncio.Task[None]) -> None:
            draining = self._draining.get(lane, set())
            draining.discard(done)
            if not draining:
                self._draining.pop(lane, None)

        task.add_done_callback(drained)

    def explain(self, reason: str) -> str:
        """`reason` with what the server wrote outside the protocol (stderr's last lines)."""
        return self.handlers.output.explain(reason)

    async def _died(self, reason: str, *, sent: bool) -> MCPTransportError:
        """The error of a request the server's end cut short, once its last lines are read.

        A dying server writes why to stderr, then ends the connection: the line it died
        with may still be in the pipe when the request fails.
        """
        await asyncio.to_thread(self.handlers.output.settle)
        return MCPTransportError(self.explain(reason), sent=sent)

    async def _serve(self) -> None:
        self.handlers.output.clear()
        try:
            async with open_session(self.spec, self.handlers, self._bad_output) as session:
                self.capabilities = await sdk.connect(session)
                await self._set_log_level(session)
                self.ready.set_result(session)
                if self.bad_output is not None:
                    self._warn_bad_output()
                await self._stop.wait()
        except (Exception, asyncio.CancelledError) as exc:
            self.failure = exc
            logger.debug("MCP session %r ended: %s", self.spec.name, describe(exc))
        finally:
            if not self.ready.done():
                if self.bad_output is not None:
                    reason = f"it wrote to stdout what is not an MCP message: {self.bad_output}"
                elif self.failure is not None:
                    reason = describe(self.failure)
                else:
                    reason = "stopped while starting"
                self.ready.set_exception(MCPTransportError(self.explain(reason)))

    async def _set_log_level(self, session: ClientSession) -> None:
        """Ask the server for the configured log level (`logging/setLevel`), if it logs.

        A 2026-07-28 session asks for it with every request instead.
        """
        level = self.spec.log_level
        if level is None or self.capabilities is None or self.capabilities.logging is None:
            return
        try:
            await sdk.set_log_level(session, level)
        except McpError as error:
            logger.warning(
                "MCP server %r refused log level %r: %s", self.spec.name, level, describe(error)
            )

    @property
    def alive(self) -> bool:
        """Whether the session is open and its task still holds it."""
        return (
            self.ready.done()
            and not self.ready.cancelled()
            and self.ready.exception() is None
            and not self.task.done()
            and not self._stop.is_set()
        )

    async def healthy(self) -> bool:
        """Whether the server still answers a ping."""
        try:
            await asyncio.wait_for(self.ready.result().send_ping(), HEALTH_CHECK_TIMEOUT_S)
        except Exception:
            return False
        return True

    async def close(self) -> None:
        """Exit the session (the process gets EOF, then SIGTERM) and wait for the task."""
        self._stop.set()
        if not self.ready.done():
            self.task.cancel()
        _, pending = await asyncio.wait({self.task}, timeout=CLOSE_TIMEOUT_S)
        if pending:
            self.task.cancel()
            await asyncio.wait({self.task})
        drains = {task for tasks in self._draining.values() for task in tasks}
        if drains:  # they end with the session; none is left pending
            await asyncio.wait(drains)

    async def run(
        self, send: Callable[[ClientSession], Awaitable[T]], *, what: str, lane: str = ""
    ) -> T:
        """Send a request on this session and await it, failing fast if the session dies.

        Cancelled while the server runs it, the request is cancelled there too
        (`notifications/cancelled`) and drains in the background until the server
        answered it or `CANCEL_GRACE_S` passed; the next request of the same `lane`
        (a retry: the same tool and arguments) is sent only then, so the two never
        overlap on the server. `send` should send one request (a second one of it is
        not cancelled there).

        Raises:
            NotSentError: The request never reached the server (send it again).
            MCPTransportError: The connection broke or the session ended; `sent` when
                the request had left (the server may have run it).
            MCPToolError: The server answered with an error.
        """
        if earlier := self._draining.get(lane):
            await asyncio.wait(set(earlier))  # each ends within CANCEL_GRACE_S
        session = self.ready.result()
        sent: list[int] = []

        async def request() -> T:
            sent.append(next_request_id(session))
            return await send(session)

        call = asyncio.ensure_future(request())
        self.last_used = time.monotonic()
        try:
            await asyncio.wait({call, self.task}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            if sent and not call.done() and self.alive:
                self._cancel_on_server(session, sent[0], call, lane)
            else:
                await _settle(call)
            raise
        except BaseException:
            await _settle(call)
            raise
        self.last_used = time.monotonic()
        await _settle(call)
        name = self.spec.name
        if call.cancelled():  # the session ended while the request was (maybe) out
            reason = describe(self.failure) if self.failure else "the session ended"
            msg = f"MCP server {name!r} stopped during {what}: {reason}"
            raise await self._died(msg, sent=bool(sent))
        try:
            return call.result()
        except (anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            raise NotSentError(describe(exc)) from exc
        except McpError as exc:
            error = exc.error
            if error.message == SESSION_TERMINATED:  # a 404: it does not know the session
                raise NotSentError(f"the server ended the session ({error.message})") from exc
            if error.code != mcp_types.CONNECTION_CLOSED or error.message not in _LINK_ERRORS:
                raise MCPToolError(error.message, server=name) from exc  # the server's
            if error.message == NOT_CONNECTED:
                raise NotSentError(describe(exc)) from exc
            how = "" if error.message == _SDK_CONNECTION_CLOSED else f": {_error_text(error)}"
            msg = f"MCP server {name!r} closed the connection during {what}{how}"
            raise await self._died(msg, sent=True) from exc
        except (OSError, anyio.EndOfStream) as exc:
            msg = f"MCP server {name!r} failed during {what}: {describe(exc)}"
            raise await self._died(msg, sent=True) from exc
        except ValidationError as exc:  # the server answered, with what the protocol forbids
            problems = exc.errors()
            first = problems[0] if problems else {"loc": (), "msg": str(exc)}
            where = ".".join(str(part) for part in first["loc"]) or "the result"
            msg = (
                f"MCP server {name!r} answered {what} with a result the protocol does not "
                f"allow ({len(problems)} problems; {where}: {first['msg']})"
            )
            raise MCPToolError(msg, server=name) from exc


async def _settle(call: asyncio.Future[Any]) -> None:
    """End a request task: cancelled if still running; its error retrieved either way."""
    if not call.done():
        call.cancel()
        await asyncio.wait({call})
    elif not call.cancelled():
        call.exception()
