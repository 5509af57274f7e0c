"""Where tools run: pooled daemon threads and tasks a timeout can abandon, bounded and counted.

A sync tool cannot be interrupted, so a call that outlives its timeout keeps its thread.
Calls therefore run on the loop's `WorkerPool` of daemon threads (an abandoned one never
blocks the interpreter's exit, unlike those of a `ThreadPoolExecutor`), reused from
call to call: at most `max_running` run at once, a thread abandoned at a timeout is
given up by the pool (another takes its place, so a hung tool starves no later call),
and a tool with `max_abandoned` calls still hung is refused until one of them returns.
Under `invoke`, the coroutines that need an event loop (async tools, async-only
`wrap_tool_call` middleware) run on the loop's one `LoopRunner` (`run_coroutine`).

An async tool runs in a task of its own (`run_task`): at its timeout the task is
cancelled, and a task that ignores the cancellation for `cancel_grace_s` is abandoned
the same way (it runs on, counted against the same cap) so the run goes on. It is also
detached from its event loop's task list, so `asyncio.run()` does not wait for it at
shutdown (it would wait forever): the process can exit.

At a timeout, the child processes the call started are ended (`agentloop.governance.processes`):
those started in its context (a sync call's thread, an async call's task and the tasks
it creates), and those its thread started where Python does not show who did, when the
thread is its own (a sync call's). A call's thread that returns after its timeout ends
the children it still has.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import threading
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from agentloop.base.sync import (
    LoopRunner,
    WorkerPool,
    detach_task,
    has_running_loop,
    pause,
    run_without_loop,
)
from agentloop.errors import ToolCallError
from agentloop.governance.processes import (
    DEFAULT_TERMINATE_GRACE_S,
    CallChildren,
    end_processes,
)

__all__ = [
    "DEFAULT_CANCEL_GRACE_S",
    "DEFAULT_MAX_ABANDONED",
    "DEFAULT_MAX_RUNNING",
    "AbandonedCall",
    "CallTimedOut",
    "ToolThreads",
]

DEFAULT_MAX_RUNNING = 64
"""Sync tool calls running at once, per loop."""
DEFAULT_MAX_ABANDONED = 4
"""Hung threads a tool may leave behind before its calls are refused."""

DEFAULT_CANCEL_GRACE_S = 1.0
"""How long a cancelled async tool may take to stop before it is abandoned."""

T = TypeVar("T")

OnAbandoned = Callable[[str, int, int], None]
"""Called as `(tool_name, calls still hung, cap)` when a timed-out call is abandoned."""


class CallTimedOut(TimeoutError):
    """A call outlived its time limit (raised by `ToolThreads`, never by the tool itself).

    Args:
        message: What happened.
        pending: Completes with the call's late result when it could not be stopped (a
            `concurrent.futures.Future` for a thread, an `asyncio.Task` for a
            coroutine), else None.
    """

    def __init__(self, message: str, pending: Any = None) -> None:
        super().__init__(message)
        self.pending = pending


class AbandonedCall(CallTimedOut):
    """A call outlived its timeout and could not be stopped: it runs on, unattended."""

    def __init__(self, message: str, pending: Any) -> None:
        super().__init__(message, pending)


class _Slot:
    """One call's thread: whether it was abandoned, decided under the pool's lock."""

    __slots__ = ("abandoned", "finished")

    def __init__(self) -> None:
        self.abandoned = False
        self.finished = False


class ToolThreads:
    """Runs the sync tools of one loop, and the coroutines its sync runs await.

    The pool's threads (`workers`) and the event loop of sync runs (`runner`) start on
    first use and end when the `ToolThreads` is garbage collected.

    Args:
        max_running: Sync calls running at once (the size of the thread pool); more
            wait for a free thread.
        max_abandoned: Hung calls (threads and tasks) per tool before its calls are refused.
        cancel_grace_s: How long a cancelled async tool may take to stop.
        terminate_grace_s: How long a timed-out call's child process may take to exit
            after SIGTERM before it gets SIGKILL.
    """

    def __init__(
        self,
        max_running: int = DEFAULT_MAX_RUNNING,
        max_abandoned: int = DEFAULT_MAX_ABANDONED,
        cancel_grace_s: float = DEFAULT_CANCEL_GRACE_S,
        terminate_grace_s: float = DEFAULT_TERMINATE_GRACE_S,
    ) -> None:
        self.max_running = max_running
        self.max_abandoned = max_abandoned
        self.cancel_grace_s = cancel_grace_s
        self.terminate_grace_s = terminate_grace_s
        self._lock = threading.Lock()
        self._running = 0
        self._abandoned: dict[str, int] = {}
        self.workers = WorkerPool(max_running, "agentloop-tool")
        """The threads sync tools and sync model streams run on."""
        self.runner = LoopRunner()
        """The event loop that runs, under `invoke`, what must be awaited."""

    def run_coroutine(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine from sync code on the loop's one event loop, and wait for it."""
        return self.runner.run(coroutine)

    def abandoned(self, tool_name: str) -> int:
        """How many calls (threads and tasks) of a tool are still hung after their timeout."""
        with self._lock:
            return self._abandoned.get(tool_name, 0)

    def _refuse_if_hung(self, tool_name: str) -> None:
        """Raise `tool_unavailable` when the tool has `max_abandoned` hung calls (under lock)."""
        hung = self._abandoned.get(tool_name, 0)
        if hung >= self.max_abandoned:
            msg = (
                f"{tool_name} is refused: {hung} of its calls are still running after "
                "their timeout; it is available again when one of them returns"
            )
            raise ToolCallError("tool_unavailable", msg)

    async def _enter(self, tool_name: str) -> None:
        delay = 0.001
        while True:
            with self._lock:
                if self._abandoned:
                    self._refuse_if_hung(tool_name)
                if self._running < self.max_running:
                    self._running += 1
                    return
            await pause(delay)  # every thread is busy: wait for one
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
        """Run `function` on a pool thread within `timeout_s`.

        Awaited on an event loop, the loop goes on meanwhile; driven without one
        (`agentloop.base.sync.run_without_loop`, a sync run), the calling thread waits.

        Raises:
            TimeoutError: It took longer; its thread is abandoned and reported.
            ToolCallError: The tool has too many hung threads (`tool_unavailable`).
        """
        await self._enter(tool_name)
        slot = _Slot()
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        calls: list[CallChildren] = []

        def target() -> None:
            children = CallChildren.open(threading.get_native_id())  # in the job's context
            calls.append(children)
            try:
                if future.set_running_or_notify_cancel():
                    try:
                        future.set_result(function())
                    except BaseException as error:
                        future.set_exception(error)
            finally:
                try:
                    if slot.abandoned:  # what it started is ended, as at its timeout
                        self._end_late_children(children)
                finally:
                    children.close()
                    self._leave(tool_name, slot)

        try:
            job = self.workers.submit(target)
        except BaseException:
            self._leave(tool_name, slot)
            raise
        try:
            if not has_running_loop():
                return future.result(timeout_s)
            async with asyncio.timeout(timeout_s):
                return await asyncio.wrap_future(future)
        except (TimeoutError, asyncio.CancelledError) as error:
            if isinstance(error, TimeoutError) and _raised_by_function(future):
                raise  # the tool's own TimeoutError: it ended, within its time
            if future.cancel():  # it never started: nothing runs on
                if isinstance(error, TimeoutError):
                    msg = f"{tool_name} did not start within {timeout_s:g}s (every thread busy)"
                    raise CallTimedOut(msg) from error
                raise
            hung = self._abandon(tool_name, slot)
            if slot.abandoned:
                self.workers.abandon(job)
            if slot.abandoned and on_abandoned is not None:
                on_abandoned(tool_name, hung, self.max_abandoned)
            if slot.abandoned and isinstance(error, TimeoutError):
                msg = f"{tool_name} did not finish within {timeout_s:g}s; its thread runs on"
                if calls:
                    if has_running_loop():  # /proc is read in a worker thread
                        own, _ = await asyncio.to_thread(calls[0].started)
                    else:
                        own, _ = calls[0].started()
                    ended = await end_processes(own, grace_s=self.terminate_grace_s)
                    msg = "; ".join(filter(None, (msg, ended.describe())))
                raise AbandonedCall(msg, future) from error
            raise

    def _end_late_children(self, children: CallChildren) -> None:
        """End the children a timed-out sync call started (from its thread, once it returned)."""
        with contextlib.suppress(Exception):  # best effort, from a thread nobody awaits
            own, _ = children.started()
            run_without_loop(end_processes(own, grace_s=self.terminate_grace_s))

    async def run_task(
        self,
        tool_name: str,
        coroutine: Coroutine[Any, Any, Any],
        timeout_s: float,
        on_abandoned: OnAbandoned | None = None,
        *,
        cancel: bool = True,
        end_children: bool = True,
    ) -> Any:
        """Run an async tool's coroutine in a task of its own within `timeout_s`.

        At the timeout the task is cancelled; if it has not stopped `cancel_grace_s`
        later, it is abandoned (it runs on, and counts as hung until it ends) and
        detached from its event loop's task list, so that `asyncio.run()` returns
        without waiting for it. A task that returns a value within the grace period has
        finished: its value is returned. With `cancel=False` (work better finished than
        cut midway, such as a sub-agent with side effects, whose own calls are
        guarded), it is abandoned at the timeout and stays attached.

        With `end_children`, the child processes started in the task's context (by
        the coroutine and the tasks it creates) are ended at its timeout. Those the
        event loop's thread started meanwhile where Python does not show who did could
        be any code's: the error says they were left running.

        Raises:
            CallTimedOut: It took longer and stopped when cancelled.
            AbandonedCall: It took longer and ignored the cancellation.
            ToolCallError: The tool has too many hung calls (`tool_unavailable`).
        """
        # no tool has hung calls, the usual case, is read without the lock: a call that hangs
        # just after this check is as one that hangs just after the check under the lock
        if self._abandoned:
            with self._lock:
                try:
                    self._refuse_if_hung(tool_name)
                except ToolCallError:
                    coroutine.close()
                    raise
        children, context = None, None
        if end_children:  # noted in the task's context, which its own tasks inherit
            context = contextvars.copy_context()
            children = context.run(CallChildren.open, threading.get_native_id(), shared=True)
        task = asyncio.get_running_loop().create_task(coroutine, context=context)
        try:
            finished = await _finished_within(task, timeout_s)
            if not finished and cancel:
                task.cancel()
                await asyncio.wait({task}, timeout=self.cancel_grace_s)
        except asyncio.CancelledError:  # the run itself is cancelled
            task.cancel()
            raise
        finally:
            if children is not None:
                children.close()
        if finished or (task.done() and not task.cancelled() and task.exception() is None):
            return task.result()  # in time, or it finished its work while being cancelled
        if task.done():
            if not task.cancelled():
                task.exception()  # retrieved: it stopped with an error when cancelled
            msg = f"{tool_name} did not finish within {timeout_s:g}s and was cancelled"
            ended = await self._end_children(children, tool_name)
            raise CallTimedOut("; ".join(filter(None, (msg, ended))))
        hung = self._abandon_task(tool_name, task)
        if on_abandoned is not None:
            on_abandoned(tool_name, hung, self.max_abandoned)
        if cancel:
            msg = (
                f"{tool_name} did not finish within {timeout_s:g}s and ignored its "
                f"cancellation for {self.cancel_grace_s:g}s; it runs on, unattended"
            )
            if detach_task(task):
                msg += ", detached from its event loop (asyncio.run() does not wait for it)"
            else:
                msg += "; asyncio.run() will wait for it at shutdown"
        else:
            msg = f"{tool_name} did not finish within {timeout_s:g}s; it runs on, to its end"
        ended = await self._end_children(children, tool_name)
        raise AbandonedCall("; ".join(filter(None, (msg, ended))), task)

    async def _end_children(self, children: CallChildren | None, tool_name: str) -> str:
        """End the children a timed-out async call started; say what happened ("" if none)."""
        if children is None:
            return ""
        own, unproven = await asyncio.to_thread(children.started)  # reads /proc
        ended = await end_processes(own, grace_s=self.terminate_grace_s)
        said = ended.describe()
        if unproven:
            left = (
                f"child processes {sorted(unproven)} were left running: the event loop's "
                f"thread started them while {tool_name} ran, in a way that does not show "
                f"which task did, so they may not be {tool_name}'s"
            )
            said = "; ".join(filter(None, (said, left)))
        return said

    def _abandon_task(self, tool_name: str, task: asyncio.Task[Any]) -> int:
        """Count a task that ignored its cancellation as hung until it ends or is dropped."""
        slot = _Slot()
        slot.abandoned = True
        with self._lock:
            self._abandoned[tool_name] = self._abandoned.get(tool_name, 0) + 1
            hung = self._abandoned[tool_name]

        def gone(*_: Any) -> None:
            self._leave(tool_name, slot)

        task.add_done_callback(gone)
        weakref.finalize(task, gone)  # its loop closed before it ended
        return hung


async def _finished_within(task: asyncio.Task[Any], timeout_s: float) -> bool:
    """Wait for a task for at most `timeout_s`; tell whether it finished.

    What `asyncio.wait({task}, timeout=timeout_s)` does for one task, with one future
    and one timer: the task is neither cancelled nor awaited.
    """
    loop = task.get_loop()
    waiter: asyncio.Future[None] = loop.create_future()

    def wake(_: object = None) -> None:
        if not waiter.done():
            waiter.set_result(None)

    task.add_done_callback(wake)
    timer = loop.call_later(timeout_s, wake)
    try:
        await waiter
    finally:
        timer.cancel()
        task.remove_done_callback(wake)
    return task.done()


def _raised_by_function(future: concurrent.futures.Future[Any]) -> bool:
    """Whether the function a pool thread ran has ended by raising (not still running)."""
    return future.done() and not future.cancelled() and future.exception() is not None
