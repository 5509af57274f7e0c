"""Running a coroutine from sync code, even under a running event loop."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["LEFTOVER_GRACE_S", "run_coroutine_sync"]

T = TypeVar("T")

LEFTOVER_GRACE_S = 1.0
"""How long tasks still running when the coroutine returns may take to stop once cancelled."""


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
    leftovers = asyncio.all_tasks(loop)
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
            tasks = asyncio.all_tasks(loop)
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
