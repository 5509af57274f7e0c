"""Wrapping node and router functions so they run inline under both `invoke` and `ainvoke`.

A plain sync function given to LangGraph runs in a thread pool under `ainvoke`; our
nodes and routers are short pure computations, so a thread hop per call would cost more
than the work (and starve the pool with many concurrent runs). Each function therefore
gets an async twin that runs it inline.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda

_RunnableCallable: Any
try:  # LangGraph's own light wrapper (config injection, optional tracing)
    from langgraph._internal._runnable import RunnableCallable as _RunnableCallable
except ImportError:  # pragma: no cover - a future LangGraph may move it
    _RunnableCallable = None

__all__ = ["graph_node"]

NodeFunc = Callable[[Any, RunnableConfig], Any]


def _inline_twin(func: NodeFunc) -> Callable[[Any, RunnableConfig], Awaitable[Any]]:
    async def twin(state: Any, config: RunnableConfig) -> Any:
        return func(state, config)

    return twin


def graph_node(
    func: NodeFunc,
    afunc: Callable[[Any, RunnableConfig], Awaitable[Any]] | None = None,
    *,
    name: str,
    trace: bool = True,
) -> Runnable[Any, Any]:
    """Return a runnable for a `(state, config)` function and its async twin.

    Args:
        func: The sync implementation.
        afunc: The async implementation (default: `func` run inline).
        name: The node's name.
        trace: Whether callbacks see it as a run (False for routers).
    """
    asynchronous = afunc or _inline_twin(func)
    if _RunnableCallable is not None:
        node: Runnable[Any, Any] = _RunnableCallable(func, asynchronous, name=name, trace=trace)
        return node
    return RunnableLambda(func, afunc=asynchronous, name=name)
