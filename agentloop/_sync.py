"""Running a coroutine from sync code, even under a running event loop."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["run_coroutine_sync"]

T = TypeVar("T")


def run_coroutine_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync code, even under a running event loop.

    With no loop running in this thread it uses `asyncio.run`; otherwise (a sync
    `invoke` inside Jupyter, say) it runs the coroutine in a helper thread. The caller's
    context variables (LangChain config, callbacks) are carried over.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    context = contextvars.copy_context()
    result: list[T] = []
    failure: list[BaseException] = []

    def target() -> None:
        try:
            result.append(context.run(asyncio.run, coroutine))
        except BaseException as error:
            failure.append(error)

    thread = threading.Thread(target=target, name="agentloop-sync-bridge")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return result[0]
