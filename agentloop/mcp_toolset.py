"""MCP servers as loop tools: one persistent session per server for each loop run.

The sessions live on one background event loop owned by the toolset, so they work the
same under `invoke` (a fresh event loop per call), `ainvoke`, Jupyter and LangGraph's
server. Each run gets its own `MCPSessionPool` (one process per stdio server), opened
on its first call and closed when the run answers; a run that never finishes (an
interrupted thread that is not resumed, a crash) has its pool closed once idle.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import threading
import time
import weakref
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool

from agentloop.mcp import MCPSessionPool
from agentloop.mcp_config import MCPServerSpec, load_mcp_config
from agentloop.tools.call_config import call_info

__all__ = ["MCPToolset", "McpServersConfig"]

T = TypeVar("T")
McpServersConfig = str | Mapping[str, Any]
"""A path to a JSON/YAML `mcpServers` file, or the same content as a dict."""

_live_toolsets: weakref.WeakSet[MCPToolset] = weakref.WeakSet()


def _run_of(config: RunnableConfig | None) -> str:
    """The loop run a tool call belongs to."""
    info = call_info(config)
    return info["run_id"] if info is not None else ""


class MCPToolset:
    """The tools of some MCP servers, with per-run persistent sessions.

    Args:
        servers: Server specs, a config file path, or an `mcpServers` dict.
        idle_timeout_s: A run's sessions close after this long without a call.
        startup_timeout_s: Seconds a server may take to start.
    """

    def __init__(
        self,
        servers: Sequence[MCPServerSpec] | McpServersConfig,
        *,
        idle_timeout_s: float = 300.0,
        startup_timeout_s: float = 30.0,
    ) -> None:
        if isinstance(servers, str | Mapping):
            servers = load_mcp_config(servers)
        self.specs = list(servers)
        self.idle_timeout_s = idle_timeout_s
        self.startup_timeout_s = startup_timeout_s
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._pools: dict[str, MCPSessionPool] = {}
        self._last_used: dict[str, float] = {}
        self._reaper: asyncio.Task[None] | None = None
        self._tools: list[BaseTool] | None = None
        _live_toolsets.add(self)

    # -- the background event loop -------------------------------------------------------

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._start_lock:
            if self._loop is None or self._loop.is_closed():
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

    def _run_blocking(self, coroutine: Coroutine[Any, Any, T], timeout: float) -> T:
        future = asyncio.run_coroutine_threadsafe(coroutine, self._ensure_loop())
        return future.result(timeout)

    @property
    def secrets(self) -> frozenset[str]:
        """The values of the servers' own `env` and `headers` (redacted by the loop)."""
        return frozenset().union(*(spec.secrets for spec in self.specs))

    # -- tools ---------------------------------------------------------------------------

    @property
    def tools(self) -> list[BaseTool]:
        """The servers' tools (discovered on first access by starting each server once)."""
        if self._tools is None:
            discovered = self._run_blocking(self._discover(), self.startup_timeout_s * 2 + 30)
            self._tools = [self._routed_tool(tool) for tool in discovered]
        return list(self._tools)

    async def _discover(self) -> list[BaseTool]:
        pool = MCPSessionPool(self.specs, startup_timeout=self.startup_timeout_s)
        try:
            return await pool.list_tools()
        finally:
            await pool.aclose()

    def _routed_tool(self, discovered: BaseTool) -> BaseTool:
        metadata = dict(discovered.metadata or {})
        server, name = str(metadata["mcp_server"]), str(metadata["mcp_tool"])

        async def call(config: RunnableConfig, **arguments: Any) -> Any:
            return await self.call(server, name, arguments, run_id=_run_of(config))

        return StructuredTool(
            name=discovered.name,
            description=discovered.description,
            args_schema=discovered.args_schema or {"type": "object", "properties": {}},
            coroutine=call,
            response_format="content",
            metadata=metadata,
        )

    async def call(
        self, server: str, tool: str, arguments: dict[str, Any], *, run_id: str = ""
    ) -> Any:
        """Call a tool on a run's session of `server`.

        Args:
            server: The server's name.
            tool: The tool's MCP name.
            arguments: The tool's arguments.
            run_id: The loop run whose sessions to use.

        Raises:
            MCPToolError: The tool reported an error (`isError`).
            MCPTransportError: The server died or cannot be reached; the next call
                starts it again.
        """
        return await self._submit(self._call(run_id, server, tool, arguments))

    async def _call(self, run_id: str, server: str, tool: str, arguments: dict[str, Any]) -> Any:
        pool = self._pools.get(run_id)
        if pool is None:
            pool = MCPSessionPool(self.specs, startup_timeout=self.startup_timeout_s)
            self._pools[run_id] = pool
            if self._reaper is None or self._reaper.done():
                self._reaper = asyncio.create_task(self._reap_idle())
        self._last_used[run_id] = time.monotonic()
        try:
            return await pool.call_tool(server, tool, arguments)
        finally:
            self._last_used[run_id] = time.monotonic()

    # -- lifecycle -----------------------------------------------------------------------

    def sessions_opened(self, run_id: str) -> dict[str, int]:
        """How many sessions (processes) each server needed in a run so far."""
        pool = self._pools.get(run_id)
        return pool.sessions_opened if pool is not None else {}

    @property
    def open_runs(self) -> list[str]:
        """Runs whose sessions are open."""
        return list(self._pools)

    def release(self, run_id: str) -> None:
        """Close a run's sessions in the background (called when the run answers)."""
        if run_id in self._pools and self._loop is not None and not self._loop.is_closed():
            asyncio.run_coroutine_threadsafe(self._close_run(run_id), self._loop)

    async def arelease(self, run_id: str) -> None:
        """Close a run's sessions and wait until their processes exited."""
        if run_id in self._pools:
            await self._submit(self._close_run(run_id))

    async def _close_run(self, run_id: str) -> None:
        pool = self._pools.pop(run_id, None)
        self._last_used.pop(run_id, None)
        if pool is not None:
            await pool.aclose()

    async def _reap_idle(self) -> None:
        while self._pools:
            await asyncio.sleep(min(30.0, self.idle_timeout_s))
            now = time.monotonic()
            for run_id, used in list(self._last_used.items()):
                if now - used >= self.idle_timeout_s:
                    await self._close_run(run_id)

    def close(self, timeout: float = 30.0) -> None:
        """Close every session and stop the background loop (idempotent)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return

        async def close_all() -> None:
            await asyncio.gather(*(self._close_run(run) for run in list(self._pools)))
            if self._reaper is not None:
                self._reaper.cancel()

        try:
            asyncio.run_coroutine_threadsafe(close_all(), loop).result(timeout)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            if self._thread is not None:
                self._thread.join(timeout)
            if not loop.is_running():
                loop.close()


@atexit.register
def _close_all_toolsets() -> None:
    for toolset in list(_live_toolsets):
        with contextlib.suppress(Exception):  # best effort at interpreter exit
            toolset.close(timeout=10)
