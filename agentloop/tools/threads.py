"""Where sync tools run: daemon threads a timeout can abandon, bounded and counted.

A sync tool cannot be interrupted, so a call that outlives its timeout keeps its thread.
Each call therefore gets a daemon thread of its own (an abandoned one never blocks the
interpreter's exit, unlike the event loop's default executor), at most `max_running`
run at once (abandoned threads no longer count), and a tool with `max_abandoned` threads
still hung is refused until one of them returns.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from collections.abc import Callable
from typing import Any

from agentloop.errors import ToolCallError

__all__ = ["DEFAULT_MAX_ABANDONED", "DEFAULT_MAX_RUNNING", "ToolThreads"]

DEFAULT_MAX_RUNNING = 64
"""Sync tool calls running at once, per loop."""
DEFAULT_MAX_ABANDONED = 4
"""Hung threads a tool may leave behind before its calls are refused."""

OnAbandoned = Callable[[str, int, int], None]
"""Called as `(tool_name, threads still hung, cap)` when a timed-out thread is abandoned."""


class _Slot:
    """One call's thread: whether it was abandoned, decided under the pool's lock."""

    __slots__ = ("abandoned", "finished")

    def __init__(self) -> None:
        self.abandoned = False
        self.finished = False


class ToolThreads:
    """Runs the sync tools of one loop.

    Args:
        max_running: Calls running at once; more wait for a free thread.
        max_abandoned: Hung threads per tool before its calls are refused.
    """

    def __init__(
        self, max_running: int = DEFAULT_MAX_RUNNING, max_abandoned: int = DEFAULT_MAX_ABANDONED
    ) -> None:
        self.max_running = max_running
        self.max_abandoned = max_abandoned
        self._lock = threading.Lock()
        self._running = 0
        self._abandoned: dict[str, int] = {}

    def abandoned(self, tool_name: str) -> int:
        """How many threads of a tool are still hung after their timeout."""
        with self._lock:
            return self._abandoned.get(tool_name, 0)

    async def _enter(self, tool_name: str) -> None:
        delay = 0.001
        while True:
            with self._lock:
                hung = self._abandoned.get(tool_name, 0)
                if hung >= self.max_abandoned:
                    msg = (
                        f"{tool_name} is refused: {hung} of its calls are still running after "
                        "their timeout; it is available again when one of them returns"
                    )
                    raise ToolCallError("tool_unavailable", msg)
                if self._running < self.max_running:
                    self._running += 1
                    return
            await asyncio.sleep(delay)  # every thread is busy: wait for one
            delay = min(delay * 2, 0.05)

    def _leave(self, tool_name: str, slot: _Slot) -> None:
        """The call's thread returned (or was abandoned a moment ago)."""
        with self._lock:
            if slot.finished:
                return
            slot.finished = True
            if slot.abandoned:
                self._abandoned[tool_name] -= 1
                if not self._abandoned[tool_name]:
                    del self._abandoned[tool_name]
            else:
                self._running -= 1

    def _abandon(self, tool_name: str, slot: _Slot) -> int:
        with self._lock:
            if slot.finished:
                return self._abandoned.get(tool_name, 0)
            slot.abandoned = True
            self._running -= 1
            self._abandoned[tool_name] = self._abandoned.get(tool_name, 0) + 1
            return self._abandoned[tool_name]

    async def run(
        self,
        tool_name: str,
        function: Callable[[], Any],
        timeout_s: float,
        on_abandoned: OnAbandoned | None = None,
    ) -> Any:
        """Run `function` in a daemon thread within `timeout_s`.

        Raises:
            TimeoutError: It took longer; its thread is abandoned and reported.
            ToolCallError: The tool has too many hung threads (`tool_unavailable`).
        """
        await self._enter(tool_name)
        slot = _Slot()
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        context = contextvars.copy_context()

        def target() -> None:
            try:
                if future.set_running_or_notify_cancel():
                    try:
                        future.set_result(context.run(function))
                    except BaseException as error:
                        future.set_exception(error)
            finally:
                self._leave(tool_name, slot)

        thread = threading.Thread(target=target, name=f"agentloop-tool-{tool_name}", daemon=True)
        try:
            thread.start()
        except BaseException:
            self._leave(tool_name, slot)
            raise
        try:
            async with asyncio.timeout(timeout_s):
                return await asyncio.wrap_future(future)
        except (TimeoutError, asyncio.CancelledError):
            hung = self._abandon(tool_name, slot)
            if slot.abandoned and on_abandoned is not None:
                on_abandoned(tool_name, hung, self.max_abandoned)
            raise
