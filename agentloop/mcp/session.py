"""Persistent MCP sessions: one per server, opened on first use, reopened after a failure.

`MCPSessionPool` keeps one session per server (one process for a stdio server),
serves many concurrent calls on it, restarts it when it dies, and sends each server's
stderr to its own logger (`agentloop.mcp.server.<name>`) instead of the terminal.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from types import TracebackType
from typing import Any, TypeVar

from langchain_core.tools import BaseTool

from agentloop.errors import ConfigurationError, MCPToolError, MCPTransportError
from agentloop.mcp import sdk
from agentloop.mcp.client import CallHooks, ClientHandlers
from agentloop.mcp.config import MCPServerSpec, is_pattern, matches
from agentloop.mcp.connection import Connection, NotSentError, describe
from agentloop.mcp.decode import DecodedResult, OutputCheck, decode_result, output_check
from agentloop.mcp.sdk import ClientSession, types, wire
from agentloop.mcp.tools import langchain_tool, offered_tools

__all__ = ["MCPSessionPool", "check_unique_names", "every_page"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

STARTUP_ATTEMPTS = 2
"""A server process that exits while starting is started once more before giving up."""
HEALTH_CHECK_IDLE_S = 30.0
"""A session idle this long is pinged before it is used again (restarted if it is dead)."""


async def every_page(session: ClientSession, kind: str) -> list[Any]:
    """Every item of a paginated MCP list (`tools`, `prompts`, ...), page by page."""
    list_page = sdk.list_page(session, kind)
    found: list[Any] = []
    cursor: str | None = None
    while True:
        page, cursor = await list_page(cursor)
        found.extend(getattr(page, kind))
        if not cursor:
            return found


def check_unique_names(offers: Iterable[tuple[str, Iterable[str]]]) -> None:
    """Refuse two servers offering a tool of the same name (servers in config order).

    Args:
        offers: Each server's name and its tools' names.

    Raises:
        ConfigurationError: Two servers offer a tool of the same name.
    """
    owners: dict[str, str] = {}
    for server, names in offers:
        for name in names:
            if name in owners:
                msg = (
                    f"MCP servers {owners[name]!r} and {server!r} both offer a tool "
                    f"named {name!r}; deny it on one of them"
                )
                raise ConfigurationError(msg)
            owners[name] = server


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

    def __init__(
        self,
        specs: Sequence[MCPServerSpec],
        *,
        startup_timeout: float = 30.0,
        handlers: Callable[[MCPServerSpec], ClientHandlers] | None = None,
    ) -> None:
        self._specs: dict[str, MCPServerSpec] = {}
        for spec in specs:
            if spec.name in self._specs:
                msg = f"MCP server {spec.name!r} is configured twice"
                raise ConfigurationError(msg)
            self._specs[spec.name] = spec
        make = handlers or (lambda spec: ClientHandlers(spec, lambda: None, lambda name: None))
        self.handlers = {name: make(spec) for name, spec in self._specs.items()}
        self._startup_timeout = startup_timeout
        self._connections: dict[str, Connection] = {}
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

    async def _session(self, server: str) -> tuple[Connection, ClientSession]:
        if self._closed:
            msg = "the MCPSessionPool is closed"
            raise RuntimeError(msg)
        if server not in self._specs:
            msg = f"unknown MCP server {server!r}; configured: {', '.join(self._specs) or 'none'}"
            raise ConfigurationError(msg)
        async with self._locks[server]:
            connection = self._connections.get(server)
            if connection is not None and connection.alive:
                idle = time.monotonic() - connection.last_used
                if idle < HEALTH_CHECK_IDLE_S or await connection.healthy():
                    return connection, connection.ready.result()
                logger.info("MCP server %r stopped answering; starting it again", server)
            if connection is not None:
                await self._discard(server, connection)
            if self._closed:
                msg = "the MCPSessionPool is closed"
                raise RuntimeError(msg)
            connection, session = await self._start(server)
            self._opened[server] += 1
            return connection, session

    async def _start(self, server: str) -> tuple[Connection, ClientSession]:
        """Start a server; a process that dies while starting gets one more try."""
        for attempt in range(1, STARTUP_ATTEMPTS + 1):
            connection = Connection(self._specs[server], self.handlers[server])
            self._connections[server] = connection
            try:
                session = await asyncio.wait_for(
                    asyncio.shield(connection.ready), self._startup_timeout
                )
            except (TimeoutError, MCPTransportError) as exc:
                await self._discard(server, connection)
                retry = connection.bad_output is None  # a server that writes junk stays so
                if isinstance(exc, MCPTransportError) and retry and attempt < STARTUP_ATTEMPTS:
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

    async def _discard(self, server: str, connection: Connection) -> None:
        if self._connections.get(server) is connection:
            del self._connections[server]
        await connection.close()

    async def request(
        self,
        server: str,
        send: Callable[[ClientSession], Awaitable[T]],
        *,
        what: str,
        lane: str = "",
    ) -> T:
        """Send a request on the server's session, once more on a new session if it was not sent.

        Args:
            server: The server's name.
            send: Sends the request on a session (one request: a cancelled caller
                cancels it on the server, see `Connection.run`).
            what: Names the request in error messages ("listing prompts").
            lane: Requests of one lane wait until a cancelled one of theirs ended on
                the server (a tool call's lane is its tool and arguments).

        Raises:
            MCPToolError: The server answered with an error.
            MCPTransportError: The server could not be started or its connection broke.
        """
        for attempt in (1, 2):
            connection, _ = await self._session(server)
            try:
                return await connection.run(send, what=what, lane=lane)
            except NotSentError as exc:
                await self._discard(server, connection)
                if attempt == 2:
                    msg = f"MCP server {server!r} is not reachable: {exc}"
                    raise MCPTransportError(msg) from exc
            except MCPTransportError:
                await self._discard(server, connection)
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def capabilities(self, server: str) -> types.ServerCapabilities | None:
        """The capabilities a server declared (starting it if needed)."""
        connection, _ = await self._session(server)
        return connection.capabilities

    async def call_tool(
        self,
        server: str,
        tool: str,
        arguments: dict[str, Any],
        *,
        check: OutputCheck | None = None,
    ) -> Any:
        """Call one tool and return its result as plain data (see `call_tool_result`)."""
        return (await self.call_tool_result(server, tool, arguments, check=check)).value

    async def call_tool_result(
        self,
        server: str,
        tool: str,
        arguments: dict[str, Any],
        *,
        hooks: CallHooks | None = None,
        prefix: str = "",
        meta: dict[str, Any] | None = None,
        check: OutputCheck | None = None,
    ) -> DecodedResult:
        """Call one tool and decode its result.

        The value is the `structuredContent` (`{"result": x}` unwrapped to `x`), else the
        text content (parsed when it is JSON), with placeholders for media, which are
        kept apart as attachments.

        Args:
            server: The server's name.
            tool: The tool's MCP name.
            arguments: The tool's arguments.
            hooks: Progress and elicitation hooks of this call.
            prefix: Starts the handles of the result's attachments.
            meta: The request's `_meta` (such as whom the call serves).
            check: Checks the result against the tool's `outputSchema` (`output_check`).

        Raises:
            MCPToolError: The tool reported an error, the server refused the call, or the
                result breaks the tool's `outputSchema`.
            MCPTransportError: The server could not be started or its connection broke.
            ConfigurationError: The server is not configured.
        """
        hooks = hooks or CallHooks()
        handlers = self.handlers.get(server)
        token = handlers.register(hooks) if handlers is not None else 0

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            if hooks.on_progress is not None:
                hooks.on_progress(progress, total, message)

        def sending(session: ClientSession, request_id: int) -> None:
            if handlers is not None:  # the server's questions name the call by this id
                handlers.sending(token, session, request_id)

        # Sent as a bare request rather than through `ClientSession.call_tool`, which
        # may send a second request after the call: a broken pipe then would look
        # like an unsent call, and a retry would run the tool twice.
        def send(session: ClientSession) -> Awaitable[types.CallToolResult]:
            return sdk.call_tool(
                session,
                tool,
                arguments,
                meta=meta,
                on_progress=on_progress,
                on_send=lambda request_id: sending(session, request_id),
            )

        try:
            result = await self.request(
                server,
                send,
                what=f"a call to {tool!r}",
                lane=f"{tool} {json.dumps(arguments, sort_keys=True, default=str)}",
            )
        finally:
            if handlers is not None:
                handlers.unregister(token)
        try:
            return decode_result(
                wire(result), server=server, tool=tool, prefix=prefix or tool, check=check
            )
        except MCPToolError:
            raise
        except Exception as exc:  # an unreadable result is the tool's fault, not the link's
            raise MCPToolError(describe(exc), server=server, tool=tool) from exc

    async def read_resource(self, server: str, uri: str) -> dict[str, Any]:
        """Read a resource of a server (`resources/read`): the result as wire data.

        Raises:
            MCPToolError: The server refused (an unknown URI, say).
            MCPTransportError: The server could not be started or its connection broke.
        """
        result = await self.request(
            server, lambda session: sdk.read_resource(session, uri), what=f"reading {uri}"
        )
        return wire(result)

    async def list_tools(self) -> list[BaseTool]:
        """Start every server and return its tools as LangChain tools.

        Each tool calls `call_tool` on this pool, so it uses the persistent
        session and survives restarts. Its `metadata` holds the MCP hints,
        `mcp_server` and `mcp_tool`. The tools are async only and return the
        result as data (see `call_tool`).

        Returns:
            The allowed tools of every server, in config order.

        Raises:
            ConfigurationError: An `allow` list names a tool the server lacks,
                or two servers offer a tool of the same name.
            MCPTransportError: A server could not be started.
        """
        per_server = await asyncio.gather(*(self.list_server_tools(name) for name in self._specs))
        offers = list(zip(self._specs, per_server, strict=True))
        check_unique_names((server, [tool["name"] for tool in tools]) for server, tools in offers)
        return [self._langchain_tool(server, tool) for server, tools in offers for tool in tools]

    async def list_server_tools(self, server: str) -> list[dict[str, Any]]:
        """The tools of one server the loop can use: allowed, not denied, not task-only.

        Each is the tool as the server listed it, as wire data (`name`, `title`,
        `inputSchema`, `outputSchema`, `annotations`, ...).

        Allow and deny entries are names or glob patterns (`"git_*"`); a name the server
        lacks is an error, a pattern that matches nothing is not.

        Raises:
            ConfigurationError: Its `allow` list names a tool the server lacks.
            MCPTransportError: The server could not be started.
        """
        listed: list[Any] = await self.request(
            server, lambda session: every_page(session, "tools"), what="listing tools"
        )
        mcp_tools = [wire(tool) for tool in listed]
        spec = self._specs[server]
        offered = {t["name"] for t in mcp_tools}
        names = {name for name in spec.allow or () if not is_pattern(name)}
        if missing := sorted(names - offered):
            msg = (
                f"MCP server {server!r} has no tool named {', '.join(map(repr, missing))} "
                f"(allow list); it offers {', '.join(sorted(offered)) or 'none'}"
            )
            raise ConfigurationError(msg)
        allowed = [
            t
            for t in mcp_tools
            if (spec.allow is None or matches(t["name"], spec.allow))
            and not matches(t["name"], spec.deny)
        ]
        if spec.allow is not None and not allowed and mcp_tools:
            logger.warning(
                "MCP server %r: its allow list %s matches none of its %d tools",
                server,
                sorted(spec.allow),
                len(mcp_tools),
            )
        return offered_tools(server, allowed)

    def _langchain_tool(self, server: str, tool: dict[str, Any]) -> BaseTool:
        check = output_check(tool)

        async def call(**arguments: Any) -> Any:
            return await self.call_tool(server, tool["name"], arguments, check=check)

        policy = self._specs[server].policies.get(tool["name"])
        return langchain_tool(server, tool, call, policy=policy)
