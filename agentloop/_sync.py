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
    """`asyncio.run`, except that leftover tasks are waited for only `LEFTOVER_GRACE_S`.

    A tool abandoned because it ignores cancellation would otherwise hang `asyncio.run`'s
    clean-up forever; it is dropped with its loop instead.
    """
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        return loop.run_until_complete(coroutine)
    finally:
        try:
            _cancel_leftovers(loop)
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            asyncio.set_event_loop(None)
            loop.close()


def _cancel_leftovers(loop: asyncio.AbstractEventLoop) -> None:
    leftovers = asyncio.all_tasks(loop)
    if not leftovers:
        return
    for task in leftovers:
        task.cancel()
    loop.run_until_complete(asyncio.wait(leftovers, timeout=LEFTOVER_GRACE_S))
    for task in leftovers:
        if task.done() and not task.cancelled() and task.exception() is not None:
            loop.call_exception_handler(
                {
                    "message": "unhandled exception of a task cancelled at the end of a run",
                    "exception": task.exception(),
                    "task": task,
                }
            )


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
