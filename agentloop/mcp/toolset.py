"""MCP servers as loop tools, with sessions that outlive runs.

By default each server has one session per toolset (a compiled loop or an `MCPToolset`),
shared by every run and thread: the tool list is fetched once, refreshed when the server
announces `tools/list_changed`, and a second run's first call starts no process. A
server configured with `"scope": "run"` gets one session per run instead, closed when
the run answers (or once idle). The sessions live on one background event loop owned
by the toolset, so they work the same under `invoke` (a fresh event loop per call),
`ainvoke`, Jupyter and LangGraph's server.

A server that cannot start leaves its tools out (a log line, and a
`mcp_server_unavailable` event at the start of each run) and is tried again in the
background; `"required": true` makes that failure fatal instead.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import threading
import time
import weakref
from collections.abc import Coroutine, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from mcp.types import Tool

from agentloop.errors import ConfigurationError, MCPToolError, MCPTransportError
from agentloop.mcp.bridge import CallBridge
from agentloop.mcp.client import CallHooks, ClientHandlers
from agentloop.mcp.config import MCPServerSpec, load_mcp_config
from agentloop.mcp.decode import DecodedResult, decode_resource
from agentloop.mcp.session import MCPSessionPool
from agentloop.mcp.tools import langchain_tool, result_text
from agentloop.redaction import Redactor
from agentloop.tools.artifacts import ATTACHMENTS_ARTIFACT, RESULT_ARTIFACT
from agentloop.tools.call_config import call_info

__all__ = ["READ_RESOURCE_TOOL", "MCPToolset", "McpServersConfig"]

logger = logging.getLogger(__name__)

T = TypeVar("T")
McpServersConfig = str | Mapping[str, Any]
"""A path to a JSON/YAML `mcpServers` file, or the same content as a dict."""

READ_RESOURCE_TOOL = "read_resource"
"""The built-in tool that reads a resource a result mentions (when a server has resources)."""
MAX_RETRY_INTERVAL_S = 300.0

_live_toolsets: weakref.WeakSet[MCPToolset] = weakref.WeakSet()


class MCPToolset:
    """The tools of some MCP servers, on sessions shared by every run.

    Use it as `with MCPToolset(config) as toolset:` (or `async with`), or call
    `close()` / `aclose()`; open toolsets are also closed at process exit.

    Args:
        servers: Server specs, a config file path, or an `mcpServers` dict.
        startup_timeout_s: Seconds a server may take to start.
        idle_timeout_s: A run-scoped session closes after this long without a call.
        retry_interval_s: First wait before a server that failed to start is tried again
            (doubling up to 5 minutes).
        model: Answers the servers' sampling requests (servers with `"sampling": true`);
            a loop built with this toolset sets its own model if none is given.

    Raises:
        ConfigurationError: The config is invalid.
    """

    def __init__(
        self,
        servers: Sequence[MCPServerSpec] | McpServersConfig,
        *,
        startup_timeout_s: float = 30.0,
        idle_timeout_s: float = 300.0,
        retry_interval_s: float = 10.0,
        model: BaseChatModel | None = None,
    ) -> None:
        if isinstance(servers, str | Mapping):
            servers = load_mcp_config(servers)
        self.specs = list(servers)
        self._specs = {spec.name: spec for spec in self.specs}
        if len(self._specs) != len(self.specs):
            msg = "two MCP servers share a name"
            raise ConfigurationError(msg)
        self.startup_timeout_s = startup_timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.retry_interval_s = retry_interval_s
        self.model = model
        self.redact = Redactor(self.secrets)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._discovery_lock = threading.Lock()
        self._shared: MCPSessionPool | None = None
        self._run_pools: dict[str, MCPSessionPool] = {}
        self._last_used: dict[str, float] = {}
        self._background: set[asyncio.Task[Any]] = set()
        self._reaper: asyncio.Task[None] | None = None
        self._server_tools: dict[str, list[BaseTool]] = {}
        self._listed: dict[str, list[str]] = {}
        self._resource_servers: set[str] = set()
        self._resource_owner: dict[str, str] = {}
        self._unavailable: dict[str, str] = {}
        self._refreshing: dict[str, bool] = {}
        self._discovered = False
        self._closed = False
        self._reader = self._read_resource_tool()
        self._version = 0
        _live_toolsets.add(self)

    # -- the background event loop -------------------------------------------------------

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._closed:
                msg = "the MCPToolset is closed"
                raise RuntimeError(msg)
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="agentloop-mcp", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def _submit(self, coroutine: Coroutine[Any, Any, T]) -> asyncio.Future[T]:
        future = asyncio.run_coroutine_threadsafe(coroutine, self._ensure_loop())
        return asyncio.wrap_future(future)

    def _spawn(self, coroutine: Coroutine[Any, Any, Any]) -> None:
        """Start a background task on the toolset's loop (from that loop)."""
        task = asyncio.get_running_loop().create_task(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    @property
    def secrets(self) -> frozenset[str]:
        """The values of the servers' own `env` and `headers` (redacted by the loop)."""
        return frozenset().union(*(spec.secrets for spec in self.specs))

    def _handlers(self, spec: MCPServerSpec) -> ClientHandlers:
        return ClientHandlers(spec, lambda: self.model, self._tools_changed)

    def _pool(self, specs: Sequence[MCPServerSpec]) -> MCPSessionPool:
        return MCPSessionPool(
            specs, startup_timeout=self.startup_timeout_s, handlers=self._handlers
        )

    def _pool_of(self, server: str, run_id: str) -> MCPSessionPool:
        """The pool a call uses: the shared one, or its run's (on the toolset's loop)."""
        spec = self._specs[server]
        if spec.scope == "toolset":
            if self._shared is None:
                self._shared = self._pool([s for s in self.specs if s.scope == "toolset"])
            return self._shared
        pool = self._run_pools.get(run_id)
        if pool is None:
            pool = self._run_pools[run_id] = self._pool([s for s in self.specs if s.scope == "run"])
            if self._reaper is None or self._reaper.done():
                self._reaper = asyncio.get_running_loop().create_task(self._reap_idle())
        self._last_used[run_id] = time.monotonic()
        return pool

    # -- tools ---------------------------------------------------------------------------

    @property
    def version(self) -> int:
        """Changes whenever `tools` does."""
        return self._version

    @property
    def unavailable(self) -> dict[str, str]:
        """Servers whose tools are missing now (they failed to start), with the reason."""
        return dict(self._unavailable)

    @property
    def tools(self) -> list[BaseTool]:
        """The servers' tools now (listed on first access, which starts the servers).

        Raises:
            MCPTransportError: A `required` server could not be started.
            ConfigurationError: An allow list names a missing tool, or two servers
                offer a tool of the same name.
        """
        with self._discovery_lock:
            if not self._discovered:
                timeout = self.startup_timeout_s * 2 + 30
                discovery = asyncio.run_coroutine_threadsafe(self._discover(), self._ensure_loop())
                discovery.result(timeout)
        tools = [tool for spec in self.specs for tool in self._server_tools.get(spec.name, [])]
        if self._resource_servers and all(tool.name != READ_RESOURCE_TOOL for tool in tools):
            tools.append(self._reader)
        return tools

    async def _discover(self) -> None:
        if self._discovered:
            return
        results = await asyncio.gather(
            *(self._list(spec.name) for spec in self.specs), return_exceptions=True
        )
        fatal: list[BaseException] = []
        for spec, result in zip(self.specs, results, strict=True):
            if isinstance(result, ConfigurationError) or (
                isinstance(result, BaseException) and spec.required
            ):
                fatal.append(result)
            elif isinstance(result, BaseException):
                self._mark_unavailable(spec.name, result)
            else:
                self._accept(spec.name, result)
        if fatal:
            raise fatal[0]
        self._check_unique_names()
        self._discovered = True

    def _check_unique_names(self) -> None:
        owners: dict[str, str] = {}
        for spec in self.specs:
            for tool in self._server_tools.get(spec.name, []):
                if tool.name in owners:
                    msg = (
                        f"MCP servers {owners[tool.name]!r} and {spec.name!r} both offer a "
                        f"tool named {tool.name!r}; deny it on one of them"
                    )
                    raise ConfigurationError(msg)
                owners[tool.name] = spec.name

    async def _list(self, server: str) -> list[Tool]:
        """List a server's tools (and note whether it has resources)."""
        spec = self._specs[server]
        if spec.scope == "toolset":
            pool = self._pool_of(server, "")
            tools = await pool.list_server_tools(server)
            capabilities = await pool.capabilities(server)
        else:
            async with self._pool([spec]) as pool:
                tools = await pool.list_server_tools(server)
                capabilities = await pool.capabilities(server)
        if capabilities is not None and capabilities.resources is not None:
            self._resource_servers.add(server)
        return tools

    def _accept(self, server: str, tools: list[Tool]) -> None:
        """Use a server's tool list; the version moves only when it changed."""
        listed = [tool.model_dump_json() for tool in tools]
        if self._listed.get(server) == listed and server in self._server_tools:
            return
        taken = {
            tool.name
            for name, others in self._server_tools.items()
            if name != server
            for tool in others
        }
        clashes = sorted(tool.name for tool in tools if tool.name in taken)
        if clashes and self._discovered:
            logger.error(
                "MCP server %r: tools %s are left out: another server offers tools of the "
                "same name",
                server,
                ", ".join(clashes),
            )
            tools = [tool for tool in tools if tool.name not in taken]
        self._listed[server] = listed
        self._server_tools[server] = [self._routed_tool(server, tool) for tool in tools]
        self._version += 1

    def _mark_unavailable(self, server: str, error: BaseException) -> None:
        reason = str(error) or type(error).__name__
        first = server not in self._unavailable
        self._unavailable[server] = reason
        if first:
            logger.warning(
                "MCP server %r is unavailable, its tools are left out for now: %s",
                server,
                reason,
            )
            self._spawn(self._retry(server))

    async def _retry(self, server: str) -> None:
        """Try a server that failed to start again, with a growing interval."""
        delay = self.retry_interval_s
        while not self._closed and server in self._unavailable:
            await asyncio.sleep(delay)
            try:
                tools = await self._list(server)
            except Exception as error:
                self._unavailable[server] = str(error) or type(error).__name__
                delay = min(delay * 2, MAX_RETRY_INTERVAL_S)
                continue
            del self._unavailable[server]
            self._accept(server, tools)
            logger.info("MCP server %r is available again: %d tools", server, len(tools))

    def _tools_changed(self, server: str) -> None:
        """`tools/list_changed`: fetch the server's list again (once per burst)."""
        if self._refreshing.get(server) is not None:
            self._refreshing[server] = True
            return
        self._refreshing[server] = False
        self._spawn(self._refresh(server))

    async def _refresh(self, server: str) -> None:
        try:
            while True:
                self._refreshing[server] = False
                try:
                    self._accept(server, await self._list(server))
                except Exception as error:
                    logger.warning("MCP server %r: cannot list its tools: %s", server, error)
                if not self._refreshing[server]:
                    return
        finally:
            self._refreshing.pop(server, None)

    def _routed_tool(self, server: str, tool: Tool) -> BaseTool:
        read_only = bool(tool.annotations and tool.annotations.readOnlyHint)

        async def call(config: RunnableConfig, **arguments: Any) -> tuple[str, dict[str, Any]]:
            info = call_info(config)
            bridge = CallBridge(
                server=server,
                tool=tool.name,
                call_id=info["call_id"] if info else "",
                read_only=read_only,
                loop_name=info.get("loop", "") if info else "",
                redact=self.redact,
            )
            position = info["call_id"].split(":", 1)[-1] if info else ""
            decoded = await bridge.run(
                self._call(
                    server,
                    tool.name,
                    arguments,
                    run_id=info["run_id"] if info else "",
                    hooks=bridge.hooks,
                    prefix=f"{tool.name}:{position}" if position else tool.name,
                )
            )
            return _tool_output(decoded)

        policy = self._specs[server].policies.get(tool.name)
        return langchain_tool(
            server, tool, call, response_format="content_and_artifact", policy=policy
        )

    # -- calls ---------------------------------------------------------------------------

    async def call(
        self, server: str, tool: str, arguments: dict[str, Any], *, run_id: str = ""
    ) -> Any:
        """Call a tool of `server` and return its result as data.

        Args:
            server: The server's name.
            tool: The tool's MCP name.
            arguments: The tool's arguments.
            run_id: The loop run whose session to use (for `"scope": "run"` servers).

        Raises:
            MCPToolError: The tool reported an error (`isError`).
            MCPTransportError: The server died or cannot be reached; the next call
                starts it again.
        """
        return (await self._call(server, tool, arguments, run_id=run_id)).value

    def _call(
        self,
        server: str,
        tool: str,
        arguments: dict[str, Any],
        *,
        run_id: str = "",
        hooks: CallHooks | None = None,
        prefix: str = "",
    ) -> asyncio.Future[DecodedResult]:
        async def on_loop() -> DecodedResult:
            pool = self._pool_of(server, run_id)
            try:
                decoded = await pool.call_tool_result(
                    server, tool, arguments, hooks=hooks, prefix=prefix
                )
            finally:
                if run_id in self._last_used:
                    self._last_used[run_id] = time.monotonic()
            for uri in decoded.resource_uris:
                self._resource_owner[uri] = server
            return decoded

        return self._submit(on_loop())

    async def read_resource(self, uri: str, *, server: str | None = None, run_id: str = "") -> Any:
        """Read a resource (as text, or with placeholders for binary contents).

        Args:
            uri: The resource's URI, as a result mentioned it.
            server: The server to ask (default: the one whose result mentioned the URI,
                else each server that has resources, in config order).
            run_id: The loop run whose session to use (for `"scope": "run"` servers).

        Raises:
            MCPToolError: No server could read it.
        """
        return (await self._read(uri, server=server, run_id=run_id, prefix="resource")).value

    def _read(
        self, uri: str, *, server: str | None, run_id: str, prefix: str
    ) -> asyncio.Future[DecodedResult]:
        async def on_loop() -> DecodedResult:
            if server is not None and server not in self._specs:
                msg = f"unknown MCP server {server!r}; configured: {', '.join(self._specs)}"
                raise MCPToolError(msg, tool=READ_RESOURCE_TOOL)
            owner = server or self._resource_owner.get(uri)
            candidates = [owner] if owner else sorted(self._resource_servers)
            failures: list[str] = []
            for candidate in candidates:
                try:
                    result = await self._pool_of(candidate, run_id).read_resource(candidate, uri)
                except (MCPToolError, MCPTransportError) as error:
                    failures.append(f"{candidate}: {error}")
                    continue
                return decode_resource(result, prefix=prefix)
            msg = f"cannot read {uri}: " + ("; ".join(failures) or "no server has resources")
            raise MCPToolError(msg, tool=READ_RESOURCE_TOOL)

        return self._submit(on_loop())

    def _read_resource_tool(self) -> BaseTool:
        async def read(
            config: RunnableConfig, uri: str, server: str | None = None
        ) -> tuple[str, dict[str, Any]]:
            info = call_info(config)
            position = info["call_id"].split(":", 1)[-1] if info else ""
            decoded = await self._read(
                uri,
                server=server,
                run_id=info["run_id"] if info else "",
                prefix=f"{READ_RESOURCE_TOOL}:{position}" if position else READ_RESOURCE_TOOL,
            )
            return _tool_output(decoded)

        return StructuredTool.from_function(
            coroutine=read,
            name=READ_RESOURCE_TOOL,
            description=(
                "Read a resource an MCP tool result mentioned, by its URI (such as "
                "file:///... or demo://...). `server` is only needed when several "
                "servers could have it."
            ),
            response_format="content_and_artifact",
            metadata={"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False},
        )

    # -- lifecycle -----------------------------------------------------------------------

    def sessions_opened(self, run_id: str | None = None) -> dict[str, int]:
        """How many sessions each server has needed: shared ones, or a run's (`run_id`)."""
        pool = self._shared if run_id is None else self._run_pools.get(run_id)
        return pool.sessions_opened if pool is not None else {}

    @property
    def has_run_scope(self) -> bool:
        """Whether some server keeps one session per run."""
        return any(spec.scope == "run" for spec in self.specs)

    @property
    def open_runs(self) -> list[str]:
        """Runs whose own sessions are open."""
        return list(self._run_pools)

    def release(self, run_id: str) -> None:
        """Close a run's own sessions in the background (called when the run answers)."""
        loop = self._loop
        if run_id in self._run_pools and loop is not None and not loop.is_closed():
            asyncio.run_coroutine_threadsafe(self._close_run(run_id), loop)

    async def arelease(self, run_id: str) -> None:
        """Close a run's own sessions and wait until their processes exited."""
        if run_id in self._run_pools:
            await self._submit(self._close_run(run_id))

    async def _close_run(self, run_id: str) -> None:
        pool = self._run_pools.pop(run_id, None)
        self._last_used.pop(run_id, None)
        if pool is not None:
            await pool.aclose()

    async def _reap_idle(self) -> None:
        while self._run_pools:
            await asyncio.sleep(min(30.0, self.idle_timeout_s))
            now = time.monotonic()
            for run_id, used in list(self._last_used.items()):
                if now - used >= self.idle_timeout_s:
                    await self._close_run(run_id)

    async def _close_all(self) -> None:
        for task in [*self._background, *([self._reaper] if self._reaper else [])]:
            task.cancel()
        pools = [*self._run_pools.values(), *([self._shared] if self._shared else [])]
        self._run_pools.clear()
        self._shared = None
        await asyncio.gather(*(pool.aclose() for pool in pools), return_exceptions=True)

    def close(self, timeout: float = 30.0) -> None:
        """Close every session (each server process exits) and stop the background loop.

        Safe to call twice; the toolset cannot be used afterwards.
        """
        with self._lock:
            loop, self._closed = self._loop, True
        if loop is None or loop.is_closed():
            return
        try:
            asyncio.run_coroutine_threadsafe(self._close_all(), loop).result(timeout)
        except Exception as error:  # a server that will not stop must not block the caller
            logger.warning("closing the MCP sessions: %s", error)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            if self._thread is not None:
                self._thread.join(timeout)
            if not loop.is_running():
                loop.close()

    async def aclose(self) -> None:
        """`close` without blocking the caller's event loop."""
        await asyncio.to_thread(self.close)

    def __enter__(self) -> MCPToolset:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> MCPToolset:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def _tool_output(decoded: DecodedResult) -> tuple[str, dict[str, Any]]:
    """Content (text) and artifact (the data, and the media kept aside) of a result."""
    artifact: dict[str, Any] = {RESULT_ARTIFACT: decoded.value}
    if decoded.attachments:
        artifact[ATTACHMENTS_ARTIFACT] = decoded.attachments
    return result_text(decoded.value), artifact


@atexit.register
def _close_all_toolsets() -> None:
    for toolset in list(_live_toolsets):
        with contextlib.suppress(Exception):  # best effort at interpreter exit
            toolset.close(timeout=10)
