"""Nodes and routers that run inline under both `invoke` and `ainvoke`.

LangGraph runs a plain sync function given to `add_node` in a thread pool under
`ainvoke`. Our nodes are either short computations (prepare, execute) or
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
T = TypeVar("T")
NodeFunc = Callable[[Any, Runtime[LoopContext]], Mapping[str, Any]]
"""A node: `(state, runtime) -> update`."""
NodeCore = Callable[[Any, Runtime[LoopContext]], Core[Mapping[str, Any]]]
"""A node written as a core: `(state, runtime) -> core making the update`."""


class _Inline(Runnable[Any, Any]):
    """Runs `steps(input)` inline: driven with `drive` under `invoke`, `adrive` under `ainvoke`."""

    name: str

    def steps(self, input: Any) -> Core[Any]:
        """The core of one call."""
        raise NotImplementedError

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Run (sync)."""
        return drive(self.steps(input))

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Run (async), inline."""
        return await adrive(self.steps(input))


def _at_once(value: T) -> Core[T]:
    """A core that needs no effect: it returns `value` (for short computations)."""
    if False:  # a generator, so the drivers can run it like any core
        yield
    return value


class LoopNode(_Inline):
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

    def steps(self, input: Any) -> Core[Mapping[str, Any]]:
        """The node's core (its function's update, at once, for a short computation)."""
        runtime = get_runtime(LoopContext)
        if self.core is not None:
            return self.core(input, runtime)
        return _at_once(cast(NodeFunc, self.func)(input, runtime))

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Run (sync): a short computation is called as it is, without a driver."""
        runtime = get_runtime(LoopContext)
        if self.func is not None:
            return self.func(input, runtime)
        core = self.core  # `steps` inline: a call less per node call
        assert core is not None  # one of the two is given
        return drive(core(input, runtime))

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Run (async), inline: a short computation is called as it is, without a driver."""
        runtime = get_runtime(LoopContext)
        if self.func is not None:
            return self.func(input, runtime)
        core = self.core  # `steps` inline: a call less per node call
        assert core is not None  # one of the two is given
        return await adrive(core(input, runtime))


class Router(_Inline, Generic[S]):
    """A router: a pure function of the state, run inline under `invoke` and `ainvoke`.

    Args:
        name: The router's name.
        func: `state -> next node(s)`.
    """

    def __init__(self, name: str, func: Callable[[S], Any]) -> None:
        self.name = name
        self.func = func

    def steps(self, input: Any) -> Core[Any]:
        """The route, at once."""
        return _at_once(self.func(input))

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """The route (sync): the function is called as it is."""
        return self.func(input)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """The route (async), inline: the function is called as it is."""
        return self.func(input)
