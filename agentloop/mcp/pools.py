"""Where a toolset's sessions live: one background event loop, a shared pool, run pools.

Servers with `"scope": "toolset"` share one `MCPSessionPool`; each thread gets its own
pool for the `"scope": "thread"` servers, reused by the thread's runs and closed once
idle; each run gets its own pool for the `"scope": "run"` servers (and the `"thread"`
ones when it has no thread), closed when the run answers or once idle. Everything
runs on a background event loop owned by the toolset, so sessions work the same under
`invoke` (a fresh event loop per call), `ainvoke`, Jupyter and LangGraph's server.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from agentloop.errors import MCPTransportError
from agentloop.mcp.config import MCPServerSpec
from agentloop.mcp.session import MCPSessionPool

__all__ = ["SessionPools", "Started", "mark_retrieved"]

logger = logging.getLogger(__name__)

T = TypeVar("T")
PoolFactory = Callable[[Sequence[MCPServerSpec]], MCPSessionPool]


_THREAD_PREFIX = "thread:"


@dataclass(frozen=True)
class Started(Generic[T]):
    """A coroutine running on the toolset's background loop."""

    future: concurrent.futures.Future[T]
    """Its outcome, set when it has ended (cancelled when it was stopped)."""
    stop: Callable[[], bool]
    """Cancel it there (a request it sent is cancelled on its server); `future` is
    done once it has ended. False when the background loop has already closed."""

    async def wait(self) -> T:
        """Await it from any event loop; cancelling the caller stops it and waits for its end."""
        result = asyncio.wrap_future(self.future)
        try:
            return await asyncio.shield(result)
        except asyncio.CancelledError:
            # the cancelled caller does not want its outcome, whenever it comes (even
            # after a second cancellation ends the wait below, or the toolset closes)
            result.add_done_callback(mark_retrieved)
            if self.stop():
                await asyncio.wait({result})
            raise


def mark_retrieved(future: asyncio.Future[Any]) -> None:
    """Mark a done future's exception as retrieved (a done callback).

    Nobody awaits it any more, so asyncio must not log it as "never retrieved".
    """
    if not future.cancelled():
        future.exception()


def _thread_key(thread_id: str) -> str:
    """A thread's pool key (run ids never start with the prefix)."""
    return f"{_THREAD_PREFIX}{thread_id}"


class SessionPools:
    """The background loop of a toolset and the session pools on it.

    Args:
        specs: Every server of the toolset.
        make_pool: Builds a pool for some servers.
        idle_timeout_s: A run's pool closes after this long without a call.
    """

    def __init__(
        self, specs: Sequence[MCPServerSpec], make_pool: PoolFactory, idle_timeout_s: float
    ) -> None:
        self._specs = {spec.name: spec for spec in specs}
        self._make_pool = make_pool
        self.idle_timeout_s = idle_timeout_s
        self.closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._shared: MCPSessionPool | None = None
        self._run_pools: dict[str, MCPSessionPool] = {}
        self._last_used: dict[str, float] = {}
        self._background: set[asyncio.Task[Any]] = set()
        self._calls: set[asyncio.Task[Any]] = set()
        self._reaper: asyncio.Task[None] | None = None

    # -- the background event loop -------------------------------------------------------

    def ensure_loop(self) -> asyncio.AbstractEventLoop:
        """The background loop, started on first use.

        Raises:
            RuntimeError: The pools are closed.
        """
        with self._lock:
            if self.closed:
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

    def start(self, coroutine: Coroutine[Any, Any, T]) -> Started[T]:
        """Start a coroutine on the background loop, where it runs until it ends or is stopped.

        It outlives the caller's event loop (a call paused for an elicitation answer is
        kept so); closing the pools stops it.

        Raises:
            RuntimeError: The pools are closed.
        """
        loop = self.ensure_loop() if not self.closed else None
        if loop is None:
            coroutine.close()
            msg = "the MCPToolset is closed"
            raise RuntimeError(msg)
        outcome: concurrent.futures.Future[T] = concurrent.futures.Future()
        started: list[asyncio.Task[T]] = []

        def start() -> None:
            task = loop.create_task(coroutine)
            started.append(task)
            self._calls.add(task)  # cancelled if the pools close first
            task.add_done_callback(self._calls.discard)
            task.add_done_callback(lambda done: self._copy_outcome(done, outcome))

        def stop() -> bool:
            try:  # runs after `start`: callbacks run in order
                loop.call_soon_threadsafe(lambda: started and started[0].cancel())
            except RuntimeError:  # the loop is closed: nothing runs there anymore
                return False
            return True

        loop.call_soon_threadsafe(start)
        return Started(outcome, stop)

    async def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the background loop and await it from the caller's loop.

        Cancelling the caller cancels it there too (a request it sent is cancelled on its
        server) and waits until it has ended, so nothing of it is left running here.
        """
        return await self.start(coroutine).wait()

    def _copy_outcome(self, task: asyncio.Task[T], outcome: concurrent.futures.Future[T]) -> None:
        if task.cancelled():
            if self.closed:  # not the caller's cancellation: tell it why
                msg = "the call was stopped: the MCPToolset was closed"
                outcome.set_exception(MCPTransportError(msg))
            else:
                outcome.cancel()
        elif (error := task.exception()) is not None:
            outcome.set_exception(error)
        else:
            outcome.set_result(task.result())

    def spawn(self, coroutine: Coroutine[Any, Any, Any]) -> None:
        """Start a background task (from the background loop); it is cancelled on close."""
        task = asyncio.get_running_loop().create_task(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- pools ---------------------------------------------------------------------------

    def pool_of(self, server: str, run_id: str, thread_id: str = "") -> MCPSessionPool:
        """The pool a call uses: the shared one, its thread's or its run's.

        Called on the background loop.
        """
        scope = self._specs[server].scope
        if scope == "toolset":
            if self._shared is None:
                self._shared = self._make_pool(
                    [spec for spec in self._specs.values() if spec.scope == "toolset"]
                )
            return self._shared
        key, scopes = (
            (_thread_key(thread_id), ("thread",))
            if scope == "thread" and thread_id
            else (run_id, ("run", "thread"))
        )
        pool = self._run_pools.get(key)
        if pool is None:
            pool = self._run_pools[key] = self._make_pool(
                [spec for spec in self._specs.values() if spec.scope in scopes]
            )
            if self._reaper is None or self._reaper.done():
                self._reaper = asyncio.get_running_loop().create_task(self._reap_idle())
        self.touch(run_id, thread_id)
        return pool

    def touch(self, run_id: str, thread_id: str = "") -> None:
        """Note that a run (and its thread) used its pool now (it stays open while used)."""
        now = time.monotonic()
        for key in (run_id, _thread_key(thread_id) if thread_id else None):
            if key is not None and key in self._run_pools:
                self._last_used[key] = now

    def sessions_opened(
        self, run_id: str | None = None, *, thread_id: str | None = None
    ) -> dict[str, int]:
        """How many sessions each server has needed: shared ones, a run's or a thread's."""
        if thread_id is not None:
            pool = self._run_pools.get(_thread_key(thread_id))
        else:
            pool = self._shared if run_id is None else self._run_pools.get(run_id)
        return pool.sessions_opened if pool is not None else {}

    @property
    def open_runs(self) -> list[str]:
        """Runs whose own sessions are open."""
        return [key for key in self._run_pools if not key.startswith(_THREAD_PREFIX)]

    @property
    def open_threads(self) -> list[str]:
        """Threads whose own sessions are open."""
        return [
            key[len(_THREAD_PREFIX) :] for key in self._run_pools if key.startswith(_THREAD_PREFIX)
        ]

    def release(self, run_id: str) -> concurrent.futures.Future[None] | None:
        """Close a run's pool in the background.

        Returns:
            Done once its processes exited (None when the run has no pool open).
        """
        loop = self._loop
        if run_id not in self._run_pools or loop is None or loop.is_closed():
            return None
        return asyncio.run_coroutine_threadsafe(self._close_run(run_id), loop)

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

    # -- closing -------------------------------------------------------------------------

    async def close_started(self) -> None:
        """Close what a failed start opened (shared sessions, background retries).

        The pools stay usable: the next call starts its server again. Once `close` has
        begun, the calls still running are stopped too.
        """
        for task in [*self._background, *([self._reaper] if self._reaper else [])]:
            task.cancel()
        if self.closed:
            for task in self._calls:
                task.cancel()
        pools = [*self._run_pools.values(), *([self._shared] if self._shared else [])]
        self._run_pools.clear()
        self._shared = None
        await asyncio.gather(*(pool.aclose() for pool in pools), return_exceptions=True)

    def close(self, timeout: float = 30.0) -> None:
        """Close every pool (each server process exits) and stop the background loop.

        Whatever still runs on the loop then (a start-up the caller stopped waiting
        for, a server process being spawned) is cancelled and awaited too, so the loop
        stops with nothing pending: no process is left behind and asyncio has nothing
        to report at exit.
        """
        with self._lock:
            loop, self.closed = self._loop, True
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

    async def _close_all(self) -> None:
        """Close the pools, then cancel and await every other task of the loop."""
        await self.close_started()
        current = asyncio.current_task()
        while pending := [t for t in asyncio.all_tasks() if t is not current and not t.done()]:
            for task in pending:
                task.cancel()
            await asyncio.wait(pending)
        await asyncio.get_running_loop().shutdown_asyncgens()
