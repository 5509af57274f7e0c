"""Running a coroutine from sync code: without an event loop when it never suspends.

The loop's async code is written once; sync code drives it two ways:

- `run_without_loop` drives a coroutine to its end in this thread with no event loop
  at all. That works for coroutines that never suspend: everything they wait for
  blocks instead (`pause` sleeps, a tool's thread is joined), which the pipeline does
  whenever no event loop runs in its thread (`has_running_loop`).
- `run_coroutine_sync` runs any coroutine on an event loop of its own (in a helper
  thread when this one already runs a loop), for what needs one: async-only tools,
  the app's async interceptors and middleware.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import time
import weakref
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = [
    "LEFTOVER_GRACE_S",
    "detach_task",
    "has_running_loop",
    "pause",
    "run_coroutine_sync",
    "run_without_loop",
]

T = TypeVar("T")

LEFTOVER_GRACE_S = 1.0
"""How long tasks still running when the coroutine returns may take to stop once cancelled."""

_detached: weakref.WeakSet[asyncio.Task[Any]] = weakref.WeakSet()
"""Tasks taken out of asyncio's task list by `detach_task` (weakly held, as asyncio does)."""


def detach_task(task: asyncio.Task[Any]) -> bool:
    """Take a task that ignored its cancellation out of its event loop's task list.

    `asyncio.run()` cancels the tasks left at its end and waits for them: a task that
    ignores its cancellation would keep it from ever returning. A detached task runs on
    while its loop runs, and is not waited for when the loop shuts down (it is dropped,
    unfinished, when the loop closes). So are the tasks it waits for, down the chain
    (LangChain runs a tool's coroutine in a task of its own, which the task awaits).
    The loops of sync runs (`run_coroutine_sync`) still let them run to their end, in a
    daemon thread.

    Returns:
        Whether it is detached: asyncio's task list no longer holds it or the tasks it
        waits for (False on a Python whose asyncio keeps tasks where they cannot be
        taken out).
    """
    unregister = getattr(asyncio.tasks, "_unregister_task", None)
    if unregister is None:
        return False
    chain: list[asyncio.Task[Any]] = []
    waited: Any = task
    while isinstance(waited, asyncio.Task) and waited not in chain:
        chain.append(waited)
        waited = getattr(waited, "_fut_waiter", None)  # what it awaits (asyncio's own field)
    for link in chain:
        unregister(link)
        _detached.add(link)
        with contextlib.suppress(AttributeError):  # no "destroyed but pending" when dropped
            link._log_destroy_pending = False  # type: ignore[attr-defined]
    return not asyncio.all_tasks(task.get_loop()).intersection(chain)


def _leftovers(loop: asyncio.AbstractEventLoop) -> set[asyncio.Task[Any]]:
    """The loop's unfinished tasks, detached ones included."""
    detached = {task for task in _detached if task.get_loop() is loop and not task.done()}
    return asyncio.all_tasks(loop) | detached


def _run(coroutine: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run`, except that tasks left running are waited for only briefly.

    Once the coroutine returns, leftover tasks are cancelled and given `LEFTOVER_GRACE_S`
    to stop. A task that ignores its cancellation (a tool abandoned at its timeout)
    would hang `asyncio.run`'s clean-up forever; instead the loop runs on in a daemon
    thread until those tasks end, then closes.
    """
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    stubborn: set[asyncio.Task[Any]] = set()
    try:
        return loop.run_until_complete(coroutine)
    finally:
        try:
            stubborn = _cancel_leftovers(loop)
        finally:
            asyncio.set_event_loop(None)
            if stubborn:
                threading.Thread(
                    target=_close_when_done,
                    args=(loop, stubborn),
                    name="agentloop-abandoned-tasks",
                    daemon=True,
                ).start()
            else:
                _close(loop)


def _cancel_leftovers(loop: asyncio.AbstractEventLoop) -> set[asyncio.Task[Any]]:
    """Cancel the loop's leftover tasks; return those still running after the grace."""
    leftovers = _leftovers(loop)
    if not leftovers:
        return set()
    for task in leftovers:
        task.cancel()
    done, pending = loop.run_until_complete(asyncio.wait(leftovers, timeout=LEFTOVER_GRACE_S))
    for task in done:
        if not task.cancelled() and task.exception() is not None:
            loop.call_exception_handler(
                {
                    "message": "unhandled exception of a task cancelled at the end of a run",
                    "exception": task.exception(),
                    "task": task,
                }
            )
    return pending


def _close_when_done(loop: asyncio.AbstractEventLoop, tasks: set[asyncio.Task[Any]]) -> None:
    try:
        while tasks:  # they may start more (recording their late outcome)
            loop.run_until_complete(asyncio.wait(tasks))
            for task in tasks:
                if not task.cancelled():
                    task.exception()  # retrieved: abandoned, their outcome is reported late
            tasks = _leftovers(loop)
    finally:
        _close(loop)


def _close(loop: asyncio.AbstractEventLoop) -> None:
    try:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
    finally:
        loop.close()


def run_coroutine_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync code, even under a running event loop.

    With no loop running in this thread it runs on a new event loop (like `asyncio.run`,
    but tasks left running are waited for only `LEFTOVER_GRACE_S` once cancelled);
    otherwise (a sync `invoke` inside Jupyter, say) it does so in a helper thread. The
    caller's context variables (LangChain config, callbacks) are carried over.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _run(coroutine)
    context = contextvars.copy_context()
    result: list[T] = []
    failure: list[BaseException] = []

    def target() -> None:
        try:
            result.append(context.run(_run, coroutine))
        except BaseException as error:
            failure.append(error)

    thread = threading.Thread(target=target, name="agentloop-sync-bridge")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return result[0]


def has_running_loop() -> bool:
    """Whether an event loop runs in this thread (else the code runs without one)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


async def pause(seconds: float) -> None:
    """Wait: on the event loop when one runs in this thread, else by blocking the thread."""
    if has_running_loop():
        await asyncio.sleep(seconds)
    else:
        time.sleep(seconds)


def run_without_loop(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends to its end, in this thread, with no event loop.

    Raises:
        RuntimeError: The coroutine suspended on something only an event loop can
            resume (it is closed first).
    """
    try:
        while True:
            if coroutine.send(None) is not None:  # a bare yield only passes control back
                break
    except StopIteration as done:
        result: T = done.value
        return result
    coroutine.close()
    name = getattr(coroutine, "__qualname__", "a coroutine")
    msg = f"{name} waited for an event loop while run without one"
    raise RuntimeError(msg)
