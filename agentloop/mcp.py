"""MCP servers as agentloop tools: a pool of persistent sessions.

`load_mcp_config` (in `agentloop.mcp_config`, re-exported here) reads the common
`mcpServers` JSON / YAML shape into `MCPServerSpec`s. `MCPSessionPool` keeps one
session per server (one process for a stdio server), opened on first use and
reopened after a failure, and turns the servers' tools into LangChain tools whose
calls go through the pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, TextIO, TypeVar, cast

import anyio
from langchain_core.tools import BaseTool, StructuredTool
from langchain_mcp_adapters.sessions import Connection, create_session
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import McpError
from mcp.types import (
    CONNECTION_CLOSED,
    CallToolRequest,
    CallToolRequestParams,
    CallToolResult,
    ClientRequest,
    TextContent,
    Tool,
)

from agentloop.errors import ConfigurationError, MCPToolError, MCPTransportError
from agentloop.mcp_config import INHERITED_ENV, MCPServerSpec, load_mcp_config
from agentloop.redaction import install_log_redaction

__all__ = [
    "INHERITED_ENV",
    "MCP_HINTS",
    "MCPServerSpec",
    "MCPSessionPool",
    "MCPToolError",
    "MCPTransportError",
    "load_mcp_config",
    "mcp_tool_annotations",
]

logger = install_log_redaction(logging.getLogger(__name__))

T = TypeVar("T")

MCP_HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
"""The MCP tool annotations copied into each LangChain tool's `metadata`."""

CLOSE_TIMEOUT_S = 10.0
"""How long `aclose` waits for a session to shut down before cancelling it."""
STARTUP_ATTEMPTS = 2
"""A server process that exits while starting is started once more before giving up."""


# --- results ---------------------------------------------------------------------------------


def _error_text(result: CallToolResult) -> str:
    text = "\n".join(b.text for b in result.content if isinstance(b, TextContent))
    return text or "the tool reported an error without a message"


def _result_value(result: CallToolResult, *, server: str, tool: str) -> Any:
    """Turn a tool result into plain data, raising `MCPToolError` for `isError`."""
    if result.isError:
        raise MCPToolError(_error_text(result), server=server, tool=tool)
    structured = result.structuredContent
    if structured is not None:
        return structured["result"] if set(structured) == {"result"} else structured
    blocks = result.content
    if blocks and all(isinstance(b, TextContent) for b in blocks):
        text = "\n".join(cast(TextContent, b).text for b in blocks)
        try:
            return json.loads(text)
        except ValueError:
            return text
    return [b.model_dump(mode="json", by_alias=True, exclude_none=True) for b in blocks]


def mcp_tool_annotations(tool: BaseTool) -> dict[str, bool]:
    """Return the MCP hints (`readOnlyHint`, `destructiveHint`, ...) a tool carries.

    Args:
        tool: A tool from `MCPSessionPool.list_tools`, or any tool.

    Returns:
        The hints present in `tool.metadata`; empty for a tool without them.
    """
    metadata = tool.metadata or {}
    return {key: metadata[key] for key in MCP_HINTS if isinstance(metadata.get(key), bool)}


def _describe(error: BaseException) -> str:
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    text = str(error)
    if isinstance(error, McpError):
        text = error.error.message
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _server_errlog() -> TextIO:
    """A stream with a real file descriptor for the servers' stderr.

    Jupyter (on some platforms) and pytest replace `sys.stderr` with objects that have
    no descriptor, which a subprocess cannot inherit.
    """
    for stream in (sys.stderr, sys.__stderr__):
        try:
            if stream is not None:
                stream.fileno()
                return stream
        except (AttributeError, OSError, ValueError):
            continue
    global _DEVNULL
    if _DEVNULL is None:
        _DEVNULL = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - kept open
    return _DEVNULL


_DEVNULL: TextIO | None = None


@contextlib.asynccontextmanager
async def _open_session(connection: Mapping[str, Any]) -> AsyncIterator[ClientSession]:
    """Open a session; stdio servers get a stderr that works in any host process."""
    if connection.get("transport") != "stdio":
        async with create_session(cast(Connection, connection)) as session:
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
    async with (
        stdio_client(parameters, errlog=_server_errlog()) as (read, write),
        ClientSession(read, write, **(connection.get("session_kwargs") or {})) as session,
    ):
        yield session


class _NotSentError(Exception):
    """The request never left this process, so sending it again is safe."""


# --- sessions --------------------------------------------------------------------------------


class _Connection:
    """One server's session, entered and exited by its own background task.

    anyio requires a stdio session to be closed by the task that opened it, so
    the task holds the session open until `close`; requests are sent from the
    callers' tasks, which `ClientSession` allows.
    """

    def __init__(self, spec: MCPServerSpec) -> None:
        self.spec = spec
        self._stop = asyncio.Event()
        self.ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
        self.ready.add_done_callback(lambda f: f.cancelled() or f.exception())
        self.failure: BaseException | None = None
        self.task = asyncio.create_task(self._serve(), name=f"mcp-session:{spec.name}")

    async def _serve(self) -> None:
        try:
            connection = cast(Connection, self.spec.connection)
            async with _open_session(connection) as session:
                await session.initialize()
                self.ready.set_result(session)
                await self._stop.wait()
        except (Exception, asyncio.CancelledError) as exc:
            self.failure = exc
            logger.debug("MCP session %r ended: %s", self.spec.name, _describe(exc))
        finally:
            if not self.ready.done():
                reason = _describe(self.failure) if self.failure else "stopped while starting"
                self.ready.set_exception(MCPTransportError(reason))

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

    async def close(self) -> None:
        """Exit the session (the process gets EOF, then SIGTERM) and wait for the task."""
        self._stop.set()
        if not self.ready.done():
            self.task.cancel()
        _, pending = await asyncio.wait({self.task}, timeout=CLOSE_TIMEOUT_S)
        if pending:
            self.task.cancel()
            await asyncio.wait({self.task})

    async def run(self, request: Awaitable[T], *, what: str) -> T:
        """Await a request on this session, failing fast if the session dies meanwhile."""
        call = asyncio.ensure_future(request)
        try:
            await asyncio.wait({call, self.task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not call.done():
                call.cancel()
                await asyncio.wait({call})
        name = self.spec.name
        if call.cancelled():
            reason = _describe(self.failure) if self.failure else "the session ended"
            msg = f"MCP server {name!r} stopped during {what}: {reason}"
            raise MCPTransportError(msg)
        try:
            return call.result()
        except (anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            raise _NotSentError(_describe(exc)) from exc
        except McpError as exc:
            if exc.error.code == CONNECTION_CLOSED:
                msg = f"MCP server {name!r} closed the connection during {what}"
                raise MCPTransportError(msg) from exc
            raise MCPToolError(exc.error.message, server=name) from exc
        except (OSError, anyio.EndOfStream) as exc:
            msg = f"MCP server {name!r} failed during {what}: {_describe(exc)}"
            raise MCPTransportError(msg) from exc


class MCPSessionPool:
    """One persistent session (one process for stdio) per server, opened lazily.

    Sessions open on first use, so an unused server never starts. When a
    server dies or its connection breaks, the call that notices raises
    `MCPTransportError` (or, if the request had not been sent yet, is sent
    again on a new session) and the next call starts a new session.

    A pool belongs to the event loop it is first used on; it is cheap, so
    create one per loop. Use it as `async with MCPSessionPool(specs) as pool:`
    or call `aclose()`, which stops every server process.

    Args:
        specs: The servers, as `load_mcp_config` returns them.
        startup_timeout: Seconds a server may take to start and initialize.

    Raises:
        ConfigurationError: Two specs share a name.
    """

    def __init__(self, specs: Sequence[MCPServerSpec], *, startup_timeout: float = 30.0) -> None:
        self._specs: dict[str, MCPServerSpec] = {}
        for spec in specs:
            if spec.name in self._specs:
                msg = f"MCP server {spec.name!r} is configured twice"
                raise ConfigurationError(msg)
            self._specs[spec.name] = spec
        self._startup_timeout = startup_timeout
        self._connections: dict[str, _Connection] = {}
        self._locks = {name: asyncio.Lock() for name in self._specs}
        self._opened = dict.fromkeys(self._specs, 0)
        self._closed = False

    @property
    def servers(self) -> list[str]:
        """The configured server names."""
        return list(self._specs)

    @property
    def sessions_opened(self) -> dict[str, int]:
        """How many sessions each server has had opened (a copy); 2 means one restart."""
        return dict(self._opened)

    async def __aenter__(self) -> MCPSessionPool:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every session so each server process exits; safe to call twice."""
        self._closed = True
        connections = list(self._connections.values())
        self._connections.clear()
        await asyncio.gather(*(c.close() for c in connections))

    async def _session(self, server: str) -> tuple[_Connection, ClientSession]:
        if self._closed:
            msg = "the MCPSessionPool is closed"
            raise RuntimeError(msg)
        if server not in self._specs:
            msg = f"unknown MCP server {server!r}; configured: {', '.join(self._specs) or 'none'}"
            raise ConfigurationError(msg)
        async with self._locks[server]:
            connection = self._connections.get(server)
            if connection is not None and connection.alive:
                return connection, connection.ready.result()
            if connection is not None:
                await self._discard(server, connection)
            if self._closed:
                msg = "the MCPSessionPool is closed"
                raise RuntimeError(msg)
            connection, session = await self._start(server)
            self._opened[server] += 1
            return connection, session

    async def _start(self, server: str) -> tuple[_Connection, ClientSession]:
        """Start a server; a process that dies while starting gets one more try."""
        for attempt in range(1, STARTUP_ATTEMPTS + 1):
            connection = _Connection(self._specs[server])
            self._connections[server] = connection
            try:
                session = await asyncio.wait_for(
                    asyncio.shield(connection.ready), self._startup_timeout
                )
            except (TimeoutError, MCPTransportError) as exc:
                await self._discard(server, connection)
                if isinstance(exc, MCPTransportError) and attempt < STARTUP_ATTEMPTS:
                    logger.debug("MCP server %r died while starting; retrying", server)
                    continue
                reason = (
                    f"no answer within {self._startup_timeout:g}s"
                    if isinstance(exc, TimeoutError)
                    else str(exc)
                )
                msg = f"MCP server {server!r} could not be started: {reason}"
                raise MCPTransportError(msg) from exc
            return connection, session
        msg = f"MCP server {server!r} could not be started"
        raise MCPTransportError(msg)

    async def _discard(self, server: str, connection: _Connection) -> None:
        if self._connections.get(server) is connection:
            del self._connections[server]
        await connection.close()

    async def _request(
        self, server: str, send: Callable[[ClientSession], Awaitable[T]], *, what: str
    ) -> T:
        """Send a request on the server's session, once more on a new session if it was not sent."""
        for attempt in (1, 2):
            connection, session = await self._session(server)
            try:
                return await connection.run(send(session), what=what)
            except _NotSentError as exc:
                await self._discard(server, connection)
                if attempt == 2:
                    msg = f"MCP server {server!r} is not reachable: {exc}"
                    raise MCPTransportError(msg) from exc
            except MCPTransportError:
                await self._discard(server, connection)
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def call_tool(self, server: str, tool: str, arguments: dict[str, Any]) -> Any:
        """Call one tool and return its result as plain data.

        The result is the `structuredContent` (`{"result": x}` unwrapped to `x`),
        else the text content (parsed when it is JSON), else the content blocks
        as dicts.

        Args:
            server: The server's name.
            tool: The tool's MCP name.
            arguments: The tool's arguments.

        Returns:
            The tool's result.

        Raises:
            MCPToolError: The tool reported an error, or the server refused the call.
            MCPTransportError: The server could not be started or its connection broke.
            ConfigurationError: The server is not configured.
        """
        request = ClientRequest(
            CallToolRequest(params=CallToolRequestParams(name=tool, arguments=arguments))
        )
        # Sent as a bare request rather than through `ClientSession.call_tool`, which
        # may send a second request after the call: a broken pipe then would look
        # like an unsent call, and a retry would run the tool twice.
        result = await self._request(
            server,
            lambda session: session.send_request(request, CallToolResult),
            what=f"a call to {tool!r}",
        )
        try:
            return _result_value(result, server=server, tool=tool)
        except MCPToolError:
            raise
        except Exception as exc:  # an unreadable result is the tool's fault, not the link's
            raise MCPToolError(_describe(exc), server=server, tool=tool) from exc

    async def list_tools(self) -> list[BaseTool]:
        """Start every server and return its tools as LangChain tools.

        Each tool calls `call_tool` on this pool, so it uses the persistent
        session and survives restarts. Its `metadata` holds the MCP hints,
        `mcp_server` and `mcp_tool`. The tools are async only.

        Returns:
            The allowed tools of every server, in config order.

        Raises:
            ConfigurationError: An `allow` list names a tool the server lacks,
                or two servers offer a tool of the same name.
            MCPTransportError: A server could not be started.
        """
        per_server = await asyncio.gather(*(self._server_tools(name) for name in self._specs))
        tools: list[BaseTool] = []
        owners: dict[str, str] = {}
        for name, server_tools in zip(self._specs, per_server, strict=True):
            for tool in server_tools:
                if tool.name in owners:
                    msg = (
                        f"MCP servers {owners[tool.name]!r} and {name!r} both offer a tool "
                        f"named {tool.name!r}; deny it on one of them"
                    )
                    raise ConfigurationError(msg)
                owners[tool.name] = name
                tools.append(tool)
        return tools

    async def _server_tools(self, server: str) -> list[BaseTool]:
        async def list_all(session: ClientSession) -> list[Tool]:
            found: list[Tool] = []
            cursor: str | None = None
            while True:
                page = await session.list_tools(cursor=cursor)
                found.extend(page.tools)
                cursor = page.nextCursor
                if not cursor:
                    return found

        mcp_tools = await self._request(server, list_all, what="listing tools")
        spec = self._specs[server]
        offered = {t.name for t in mcp_tools}
        if spec.allow is not None and (missing := sorted(spec.allow - offered)):
            msg = (
                f"MCP server {server!r} has no tool named {', '.join(map(repr, missing))} "
                f"(allow list); it offers {', '.join(sorted(offered)) or 'none'}"
            )
            raise ConfigurationError(msg)
        return [
            self._langchain_tool(server, t)
            for t in mcp_tools
            if (spec.allow is None or t.name in spec.allow) and t.name not in spec.deny
        ]

    def _langchain_tool(self, server: str, tool: Tool) -> BaseTool:
        async def call(**arguments: Any) -> Any:
            return await self.call_tool(server, tool.name, arguments)

        metadata: dict[str, Any] = {"mcp_server": server, "mcp_tool": tool.name}
        if tool.annotations is not None:
            for key in MCP_HINTS:
                value = getattr(tool.annotations, key)
                if value is not None:
                    metadata[key] = value
        if tool.meta:
            metadata["_meta"] = tool.meta
        return StructuredTool(
            name=tool.name,
            description=tool.description or tool.title or tool.name,
            args_schema=tool.inputSchema,
            coroutine=call,
            response_format="content",
            metadata=metadata,
        )
