"""Nodes and routers that run inline under both `invoke` and `ainvoke`.

LangGraph runs a plain sync function given to `add_node` in a thread pool under
`ainvoke`. Our nodes are either short computations (prepare, execute) or coroutines
written once for both entry points (plan, call_tool, answer), so a thread hop per call
would cost more than the work and starve the pool when many runs share a process. These
two small `Runnable`s run the node inline: a coroutine is awaited under `ainvoke` and
run with `run_blocking` under `invoke` (each step of I/O then blocks: see
`agentloop.base.sync.by_mode`). Nodes read LangGraph's `Runtime` through its public
`get_runtime()`.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Generic, TypeVar

from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.runtime import Runtime, get_runtime

from agentloop.base.sync import run_blocking
from agentloop.settings import LoopContext

__all__ = ["LoopNode", "NodeCoroutine", "NodeFunc", "Router"]

S = TypeVar("S")
T = TypeVar("T")
NodeFunc = Callable[[Any, Runtime[LoopContext]], Mapping[str, Any]]
"""A node: `(state, runtime) -> update`."""
NodeCoroutine = Callable[[Any, Runtime[LoopContext]], Coroutine[Any, Any, Mapping[str, Any]]]
"""A node written as a coroutine: `async (state, runtime) -> update`."""


class LoopNode(Runnable[Any, Any]):
    """A graph node: a short computation, or a coroutine run the way the entry point needs.

    Give exactly one of `func` and `coroutine`.

    Args:
        name: The node's name.
        func: `(state, runtime) -> update`, a short, non-blocking computation run as is
            under both `invoke` and `ainvoke`.
        coroutine: `async (state, runtime) -> update`, awaited under `ainvoke` and run with
            `run_blocking` under `invoke`.
    """

    def __init__(
        self, name: str, func: NodeFunc | None = None, *, coroutine: NodeCoroutine | None = None
    ) -> None:
        if (func is None) == (coroutine is None):
            msg = "LoopNode takes exactly one of func and coroutine"
            raise TypeError(msg)
        self.name = name
        self.func = func
        self.coroutine = coroutine

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Run (sync): a short computation is called as it is."""
        runtime = get_runtime(LoopContext)
        if self.func is not None:
            return self.func(input, runtime)
        coroutine = self.coroutine
        assert coroutine is not None  # one of the two is given
        return run_blocking(coroutine(input, runtime))

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Run (async), inline: a short computation is called as it is."""
        runtime = get_runtime(LoopContext)
        if self.func is not None:
            return self.func(input, runtime)
        coroutine = self.coroutine
        assert coroutine is not None  # one of the two is given
        return await coroutine(input, runtime)


class Router(Runnable[Any, Any], Generic[S]):
    """A router: a pure function of the state, run inline under `invoke` and `ainvoke`.

    (LangGraph runs a plain sync function given as a route in a worker thread under
    `ainvoke`: a thread hop on every route.)

    Args:
        name: The router's name.
        func: `state -> next node(s)`.
        takes_config: `func` takes the run's config too: `(state, config) -> next node(s)`.
    """

    def __init__(
        self,
        name: str,
        func: Callable[[S], Any] | Callable[[S, RunnableConfig], Any],
        *,
        takes_config: bool = False,
    ) -> None:
        self.name = name
        self.func: Callable[..., Any] = func
        self.takes_config = takes_config

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """The route (sync): the function is called as it is."""
        if self.takes_config:
            return self.func(input, config or {})
        return self.func(input)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """The route (async), inline: the function is called as it is."""
        if self.takes_config:
            return self.func(input, config or {})
        return self.func(input)
