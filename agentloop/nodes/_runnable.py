"""Nodes and routers that run inline under both `invoke` and `ainvoke`.

LangGraph runs a plain sync function given to `add_node` in a thread pool under
`ainvoke`. Our nodes are either short computations (prepare, execute, collect) or have
an async twin (plan, call_tool, answer), so a thread hop per call would cost more than
the work and starve the pool when many runs share a process. These two small
`Runnable`s call the right implementation inline; nodes read LangGraph's `Runtime`
through its public `get_runtime()`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Generic, TypeVar

from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.runtime import Runtime, get_runtime

from agentloop.settings import LoopContext

__all__ = ["LoopNode", "NodeFunc", "Router"]

S = TypeVar("S")
NodeFunc = Callable[[Any, Runtime[LoopContext]], Mapping[str, Any]]
"""A node: `(state, runtime) -> update`."""
AsyncNodeFunc = Callable[[Any, Runtime[LoopContext]], Awaitable[Mapping[str, Any]]]


class LoopNode(Runnable[Any, Mapping[str, Any]]):
    """A graph node with a sync implementation and an optional async twin.

    Args:
        name: The node's name.
        func: `(state, runtime) -> update`, used by `invoke` (and by `ainvoke` when
            there is no twin: it must then be a short, non-blocking computation).
        afunc: The async twin used by `ainvoke`.
    """

    def __init__(self, name: str, func: NodeFunc, afunc: AsyncNodeFunc | None = None) -> None:
        self.name = name
        self.func = func
        self.afunc = afunc

    def invoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Mapping[str, Any]:
        """Run the node (sync)."""
        return self.func(input, get_runtime(LoopContext))

    async def ainvoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Mapping[str, Any]:
        """Run the node (async), inline."""
        runtime = get_runtime(LoopContext)
        if self.afunc is None:
            return self.func(input, runtime)
        return await self.afunc(input, runtime)


class Router(Runnable[Any, Any], Generic[S]):
    """A router: a pure function of the state, run inline under `invoke` and `ainvoke`.

    Args:
        name: The router's name.
        func: `state -> next node(s)`.
    """

    def __init__(self, name: str, func: Callable[[S], Any]) -> None:
        self.name = name
        self.func = func

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Route (sync)."""
        return self.func(input)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Route (async), inline."""
        return self.func(input)
