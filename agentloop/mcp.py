"""MCP servers as agentloop tools: config loading and a pool of persistent sessions.

`load_mcp_config` reads the common `mcpServers` JSON / YAML shape into
`MCPServerSpec`s. `MCPSessionPool` keeps one session per server (one process
for a stdio server), opened on first use and reopened after a failure, and
turns the servers' tools into LangChain tools whose calls go through the pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO, TypeVar, cast

import anyio
import yaml
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

from agentloop.errors import ConfigurationError

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

logger = logging.getLogger(__name__)

T = TypeVar("T")

MCP_HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
"""The MCP tool annotations copied into each LangChain tool's `metadata`."""

INHERITED_ENV = (
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LC_ALL", "LC_CTYPE",
    "TMPDIR", "TEMP", "TMP", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV",
    "SYSTEMROOT", "SYSTEMDRIVE", "WINDIR", "COMSPEC", "PATHEXT", "APPDATA",
    "LOCALAPPDATA", "USERPROFILE", "HOMEDRIVE", "HOMEPATH",
)  # fmt: skip
"""The only parent variables a stdio server inherits; its own `env` goes on top."""

_HTTP_TRANSPORTS = {"http", "streamable_http", "streamable-http", "streamable http"}
_ALLOW_KEYS = ("allow", "allowTools", "include")
_DENY_KEYS = ("deny", "denyTools", "exclude")
CLOSE_TIMEOUT_S = 10.0
STARTUP_ATTEMPTS = 2
"""A server process that exits while starting is started once more before giving up."""
"""How long `aclose` waits for a session to shut down before cancelling it."""


class MCPToolError(Exception):
    """An MCP tool reported an error (`isError`), or the server refused the request.

    Args:
        message: The server's error text.
        server: The server's name, when known.
        tool: The tool's name, when known.
    """

    def __init__(self, message: str, *, server: str | None = None, tool: str | None = None):
        super().__init__(message)
        self.message = message
        self.server = server
        self.tool = tool


class MCPTransportError(ConnectionError):
    """An MCP server could not be started or reached, or its connection broke.

    The session is discarded first, so the next call starts a new one. A
    `ConnectionError`, so retry policies treat it as transient.
    """


@dataclass(frozen=True)
class MCPServerSpec:
    """One MCP server to connect to."""

    name: str
    """The server's name in the config; also `metadata["mcp_server"]` of its tools."""
    connection: dict[str, Any]
    """A `langchain_mcp_adapters` connection: stdio (`command`, `args`, `env`,
    `cwd`), `streamable_http` or `sse` (`url`, `headers`)."""
    allow: frozenset[str] | None = None
    """The tool names to keep; `None` keeps all."""
    deny: frozenset[str] = frozenset()
    """The tool names to drop; wins over `allow`."""


# --- config --------------------------------------------------------------------------------


def load_mcp_config(source: str | os.PathLike[str] | Mapping[str, Any]) -> list[MCPServerSpec]:
    """Read MCP servers from a JSON / YAML file or a mapping.

    The shape is `{"mcpServers": {name: {...}}}` or the bare `{name: {...}}`.
    A server with `command` (and `args`, `env`, `cwd`) runs over stdio, with
    only `INHERITED_ENV` from this process under its own `env`; one with `url`
    (and `headers`) is reached over streamable HTTP, or SSE when
    `transport: sse`. `allow` / `allowTools` / `include` and `deny` /
    `denyTools` / `exclude` filter its tools; `disabled: true` skips it. A
    relative `cwd` is taken from the config file's folder. Other keys are
    ignored, so configs written for other MCP clients load as they are.

    Args:
        source: A `.json`, `.yaml` or `.yml` path, or the parsed mapping.

    Returns:
        The enabled servers, in config order.

    Raises:
        ConfigurationError: The file is missing or unreadable, or a server is
            malformed; the message names the file and the server.
    """
    if isinstance(source, Mapping):
        return _parse_config(source, origin="MCP config", base_dir=None)
    path = Path(source)
    return _parse_config(_read_config_file(path), origin=str(path), base_dir=path.parent)


def _read_config_file(path: Path) -> Any:
    suffix = path.suffix.lower()
    if suffix not in {".json", ".yaml", ".yml"}:
        msg = f"{path}: MCP config must be a .json, .yaml or .yml file"
        raise ConfigurationError(msg)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        msg = f"{path}: MCP config file not found"
        raise ConfigurationError(msg) from None
    except (OSError, UnicodeDecodeError) as exc:
        msg = f"{path}: cannot read MCP config: {exc}"
        raise ConfigurationError(msg) from None
    try:
        if suffix == ".json":
            return json.loads(text)
        return yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        msg = f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        raise ConfigurationError(msg) from None
    except yaml.YAMLError as exc:
        problem = " ".join(str(exc).split())
        msg = f"{path}: invalid YAML: {problem}"
        raise ConfigurationError(msg) from None


def _parse_config(data: Any, *, origin: str, base_dir: Path | None) -> list[MCPServerSpec]:
    if not isinstance(data, Mapping):
        msg = f"{origin}: expected a mapping of MCP servers, got {type(data).__name__}"
        raise ConfigurationError(msg)
    servers = data.get("mcpServers", data)
    if not isinstance(servers, Mapping):
        msg = f"{origin}: 'mcpServers' must be a mapping, got {type(servers).__name__}"
        raise ConfigurationError(msg)
    specs: list[MCPServerSpec] = []
    for name, entry in servers.items():
        where = f"{origin}: server {name!r}"
        if not isinstance(name, str) or not name:
            msg = f"{where}: a server name must be a non-empty string"
            raise ConfigurationError(msg)
        if not isinstance(entry, Mapping):
            msg = f"{where}: expected a mapping, got {type(entry).__name__}"
            raise ConfigurationError(msg)
        disabled = entry.get("disabled", False)
        if not isinstance(disabled, bool):
            msg = f"{where}: 'disabled' must be true or false"
            raise ConfigurationError(msg)
        if not disabled:
            specs.append(_parse_server(name, entry, where=where, base_dir=base_dir))
    return specs


def _parse_server(
    name: str, entry: Mapping[str, Any], *, where: str, base_dir: Path | None
) -> MCPServerSpec:
    transport = entry.get("transport", entry.get("type"))
    if transport is not None and not isinstance(transport, str):
        msg = f"{where}: 'transport' must be a string"
        raise ConfigurationError(msg)
    transport = transport.lower() if transport else None
    has_command, has_url = entry.get("command") is not None, entry.get("url") is not None
    if has_command and has_url:
        msg = f"{where}: give either 'command' (stdio) or 'url' (HTTP), not both"
        raise ConfigurationError(msg)
    if has_command:
        if transport not in (None, "stdio"):
            msg = f"{where}: transport {transport!r} needs a 'url', not a 'command'"
            raise ConfigurationError(msg)
        connection = _stdio_connection(entry, where=where, base_dir=base_dir)
    elif has_url:
        if transport not in (None, "sse", *_HTTP_TRANSPORTS):
            msg = f"{where}: unknown transport {transport!r} (use 'http' or 'sse')"
            raise ConfigurationError(msg)
        connection = _http_connection(entry, sse=transport == "sse", where=where)
    else:
        msg = f"{where}: needs either 'command' (stdio) or 'url' (HTTP)"
        raise ConfigurationError(msg)
    allow = _tool_names(entry, _ALLOW_KEYS, where=where)
    deny = _tool_names(entry, _DENY_KEYS, where=where)
    return MCPServerSpec(name, connection, allow, deny or frozenset())


def _stdio_connection(
    entry: Mapping[str, Any], *, where: str, base_dir: Path | None
) -> dict[str, Any]:
    command, args = entry["command"], entry.get("args") or []
    if not isinstance(command, str) or not command.strip():
        msg = f"{where}: 'command' must be a non-empty string"
        raise ConfigurationError(msg)
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        msg = f"{where}: 'args' must be a list of strings"
        raise ConfigurationError(msg)
    env = {key: os.environ[key] for key in INHERITED_ENV if key in os.environ}
    env.update(_string_map(entry, "env", where=where, allow_numbers=True))
    connection: dict[str, Any] = {
        "transport": "stdio",
        "command": command,
        "args": list(args),
        "env": env,
    }
    cwd = entry.get("cwd")
    if cwd is not None:
        if not isinstance(cwd, str) or not cwd:
            msg = f"{where}: 'cwd' must be a non-empty string"
            raise ConfigurationError(msg)
        cwd_path = Path(cwd).expanduser()
        if base_dir is not None and not cwd_path.is_absolute():
            cwd_path = base_dir / cwd_path
        connection["cwd"] = str(cwd_path)
    return connection


def _http_connection(entry: Mapping[str, Any], *, sse: bool, where: str) -> dict[str, Any]:
    url = entry["url"]
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        msg = f"{where}: 'url' must be an http:// or https:// URL"
        raise ConfigurationError(msg)
    connection: dict[str, Any] = {"transport": "sse" if sse else "streamable_http", "url": url}
    headers = _string_map(entry, "headers", where=where, allow_numbers=False)
    if headers:
        connection["headers"] = headers
    return connection


def _string_map(
    entry: Mapping[str, Any], key: str, *, where: str, allow_numbers: bool
) -> dict[str, str]:
    value = entry.get(key)
    if value is None:
        return {}
    scalar: tuple[type, ...] = (str, int, float) if allow_numbers else (str,)
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, scalar) and not isinstance(v, bool)
        for k, v in value.items()
    ):
        msg = f"{where}: '{key}' must map names to strings"
        raise ConfigurationError(msg)
    return {k: str(v) for k, v in value.items()}


def _tool_names(
    entry: Mapping[str, Any], keys: tuple[str, ...], *, where: str
) -> frozenset[str] | None:
    given = [k for k in keys if entry.get(k) is not None]
    if len(given) > 1:
        msg = f"{where}: give only one of {', '.join(repr(k) for k in given)}"
        raise ConfigurationError(msg)
    if not given:
        return None
    names = entry[given[0]]
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        msg = f"{where}: {given[0]!r} must be a list of tool names"
        raise ConfigurationError(msg)
    return frozenset(names)


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
