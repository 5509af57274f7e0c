"""The sessions of an MCP toolset: counting, releasing and closing them.

`MCPToolset` gets these from `ToolsetSessions`. A toolset is closed by `close()` (or its
`with` block); one still open is closed when it is collected or at interpreter exit, by a
`weakref.finalize` of its own (the library keeps no list of toolsets).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import weakref
from collections.abc import Sequence
from types import TracebackType
from typing import Self

from agentloop.mcp.config import MCPServerSpec
from agentloop.mcp.pools import SessionPools

__all__ = ["ToolsetSessions"]


class ToolsetSessions:
    """The lifecycle of a toolset's sessions (one pool per server, shared by runs).

    Args:
        specs: The servers.
        pools: Their session pools.
    """

    def __init__(self, specs: Sequence[MCPServerSpec], pools: SessionPools) -> None:
        self.specs = list(specs)
        self._pools = pools
        self._finalizer = weakref.finalize(self, pools.close, 10.0)
        """Closes the sessions of a toolset nobody closed (collected, or at exit)."""

    def sessions_opened(
        self, run_id: str | None = None, *, thread_id: str | None = None
    ) -> dict[str, int]:
        """How many sessions each server has needed: shared ones, a run's or a thread's."""
        return self._pools.sessions_opened(run_id, thread_id=thread_id)

    @property
    def has_run_scope(self) -> bool:
        """Whether a run may open sessions of its own (`run`; `thread` without a thread)."""
        return any(spec.scope in ("run", "thread") for spec in self.specs)

    @property
    def open_runs(self) -> list[str]:
        """Runs whose own sessions are open."""
        return self._pools.open_runs

    @property
    def open_threads(self) -> list[str]:
        """Threads whose own sessions are open (closed once idle)."""
        return self._pools.open_threads

    def release(self, run_id: str) -> concurrent.futures.Future[None] | None:
        """Close a run's own sessions in the background (called when the run answers).

        Returns:
            Done once their processes exited (None when the run has none open): wait
            with `.result()` from sync code, `await asyncio.wrap_future(...)` from async.
        """
        return self._pools.release(run_id)

    def close(self, timeout: float = 30.0) -> None:
        """Close every session (each server process exits) and stop the background loop.

        Safe to call twice; the toolset cannot be used afterwards.
        """
        self._finalizer.detach()
        self._pools.close(timeout)

    async def aclose(self) -> None:
        """`close` without blocking the caller's event loop."""
        await asyncio.to_thread(self.close)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
