"""Nodes and routers that run inline under both `invoke` and `ainvoke`.

LangGraph runs a plain sync function given to `add_node` in a thread pool under
`ainvoke`. Our nodes are either short computations (prepare, execute, collect) or
cores written once for both entry points (plan, call_tool, answer: see
`agentloop._effects`), so a thread hop per call would cost more than the work and starve
the pool when many runs share a process. These two small `Runnable`s run the node
inline: a core is driven with `drive` under `invoke` and `adrive` under `ainvoke`. Nodes
read LangGraph's `Runtime` through its public `get_runtime()`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar, cast

from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.runtime import Runtime, get_runtime

from agentloop._effects import Core, adrive, drive
from agentloop.settings import LoopContext

__all__ = ["LoopNode", "NodeCore", "NodeFunc", "Router"]

S = TypeVar("S")
NodeFunc = Callable[[Any, Runtime[LoopContext]], Mapping[str, Any]]
"""A node: `(state, runtime) -> update`."""
NodeCore = Callable[[Any, Runtime[LoopContext]], Core[Mapping[str, Any]]]
"""A node written as a core: `(state, runtime) -> core making the update`."""


class LoopNode(Runnable[Any, Mapping[str, Any]]):
    """A graph node: a short computation, or a core driven by the entry point used.

    Give exactly one of `func` and `core`.

    Args:
        name: The node's name.
        func: `(state, runtime) -> update`, a short, non-blocking computation run as is
            under both `invoke` and `ainvoke`.
        core: `(state, runtime) -> core`, driven with `drive` under `invoke` and with
            `adrive` under `ainvoke`.
    """

    def __init__(
        self, name: str, func: NodeFunc | None = None, *, core: NodeCore | None = None
    ) -> None:
        if (func is None) == (core is None):
            msg = "LoopNode takes exactly one of func and core"
            raise TypeError(msg)
        self.name = name
        self.func = func
        self.core = core

    def invoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Mapping[str, Any]:
        """Run the node (sync)."""
        if self.core is not None:
            return drive(self.core(input, get_runtime(LoopContext)))
        return cast(NodeFunc, self.func)(input, get_runtime(LoopContext))

    async def ainvoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Mapping[str, Any]:
        """Run the node (async), inline."""
        if self.core is not None:
            return await adrive(self.core(input, get_runtime(LoopContext)))
        return cast(NodeFunc, self.func)(input, get_runtime(LoopContext))


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
