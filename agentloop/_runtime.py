"""Reading LangGraph's runtime (context, stream writer) from a node's config."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Coroutine
from contextvars import ContextVar
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig

__all__ = ["run_context", "run_coroutine_sync", "stream_writer"]

_RUNTIME_KEY = "__pregel_runtime"

CURRENT_RUN: ContextVar[str] = ContextVar("agentloop_current_run", default="")
"""The id of the loop run whose tool call is executing (selects that run's MCP sessions)."""

USAGE_SINK: ContextVar[list[dict[str, Any]] | None] = ContextVar("agentloop_usage", default=None)
"""Where a sub-agent running as a tool reports its token usage to the calling loop."""
T = TypeVar("T")


def _runtime(config: RunnableConfig | None) -> Any:
    return ((config or {}).get("configurable") or {}).get(_RUNTIME_KEY)


def run_context(config: RunnableConfig | None) -> Any:
    """Return the run's `context` (a `LoopContext` or None)."""
    return getattr(_runtime(config), "context", None)


def stream_writer(config: RunnableConfig | None) -> Any:
    """Return the run's custom stream writer, or None."""
    return getattr(_runtime(config), "stream_writer", None)


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
