"""Python function calls per run: a cProfile count, steady on a noisy machine.

The same scripted work as the overhead benchmark (20 rounds of 4 zero-time tool calls,
then the answer), once through `ainvoke` and once through `invoke`, ours against
`langchain.agents.create_agent`, in JSON mode and in `plan_mode="native"`; then a short
run (one tool call and its answer), the throughput suite's, each side against the
contender of its own shape (native against plain `create_agent`, JSON mode against
`create_agent` with an answer step). Each side is built and run once before it is counted
(imports, schema caches), then built afresh and counted over one whole run. The count is
what the interpreter reports (`pstats.Stats.total_calls`: every Python function call,
primitive or recursive, plus built-in calls), so it moves only when the code path does.

Two information rows say where much of the difference lies: the LangGraph steps
(supersteps) and tasks of the same run, read from LangGraph's `debug` stream.
"""

from __future__ import annotations

import asyncio
import cProfile
import pstats
import threading
from collections.abc import Callable
from typing import Any

from langchain_core.runnables import RunnableConfig

from bench.contenders import (
    RECURSION_LIMIT,
    Graph,
    agent_input,
    agent_script,
    both_forms_tool,
    build_create_agent,
    build_loop,
    loop_input,
)
from bench.harness import Figure, Settings, Target
from bench.suites import throughput
from bench.suites.overhead import _rounds

__all__ = ["NAME", "count_calls", "count_steps", "profile_workload", "run"]

NAME = "calls"
TARGET = Target(1.0)
JSON_TARGET = Target(1.1)
"""JSON mode's long run against create_agent: its plans are text, its answer a third call."""


def _ours() -> Graph:
    return build_loop(_rounds(), [both_forms_tool()])


def _ours_native() -> Graph:
    return build_loop(_rounds(), [both_forms_tool()], plan_mode="native")


def _create_agent() -> Graph:
    return build_create_agent(agent_script(_rounds()), [both_forms_tool()])


class _AllThreads:
    """cProfile in the calling thread and in every thread started while it counts."""

    def __init__(self) -> None:
        self.profilers: list[cProfile.Profile] = []

    def _start_in_thread(self, *_: Any) -> None:
        profiler = cProfile.Profile()
        self.profilers.append(profiler)
        profiler.enable()  # replaces this bootstrap as the thread's profile function

    def __enter__(self) -> _AllThreads:
        threading.setprofile(self._start_in_thread)
        self._start_in_thread()
        return self

    def __exit__(self, *_: object) -> None:
        threading.setprofile(None)
        self.profilers[0].disable()

    @property
    def total_calls(self) -> int:
        counts: list[int] = [
            pstats.Stats(profiler).total_calls  # type: ignore[attr-defined]
            for profiler in self.profilers
        ]
        return sum(counts)


async def count_calls(
    build: Callable[[], Graph], payload: dict[str, Any], *, sync: bool = False
) -> int:
    """Return the function calls of one run of a freshly built graph (after one warm-up).

    Under `sync`, the run is `invoke` in a worker thread (as a script's call is, off any
    event loop); otherwise `ainvoke` on this loop. Calls in every thread the run starts
    (tool and node worker threads) are counted; calls in threads that existed before
    (a pool kept from the warm-up) are not, on either side.
    """
    config: RunnableConfig = {"recursion_limit": RECURSION_LIMIT}

    async def run_once(graph: Graph) -> Any:
        if sync:
            return await asyncio.to_thread(graph.invoke, payload, config)
        return await graph.ainvoke(payload, config)

    await run_once(build())
    graph = build()
    if sync:

        def counted() -> int:
            with _AllThreads() as counter:
                graph.invoke(payload, config)
            return counter.total_calls

        return await asyncio.to_thread(counted)
    with _AllThreads() as counter:
        await run_once(graph)
    return counter.total_calls


async def count_steps(graph: Graph, payload: dict[str, Any]) -> tuple[int, int]:
    """Return the LangGraph steps and tasks of one run (`ainvoke`'s path, streamed as `debug`)."""
    config: RunnableConfig = {"recursion_limit": RECURSION_LIMIT}
    steps: set[int] = set()
    tasks = 0
    async for event in graph.astream(payload, config, stream_mode="debug"):
        if event["type"] == "task":
            tasks += 1
            steps.add(event["step"])
    return len(steps), tasks


async def run(settings: Settings) -> list[Figure]:
    """Count each side's function calls per run, under `ainvoke` and under `invoke`."""
    del settings  # a count is exact: one run per side is the figure
    figures: list[Figure] = []
    for label, sync in (("ainvoke", False), ("invoke", True)):
        ours = await count_calls(_ours, loop_input(), sync=sync)
        agent = await count_calls(_create_agent, agent_input(), sync=sync)
        figures.append(
            Figure(
                f"Python function calls per run (20 x 4 calls, {label})",
                float(ours),
                float(agent),
                "calls",
                "create_agent",
                JSON_TARGET,
                {"ours": [float(ours)], "contender": [float(agent)]},
                "a cProfile count of one whole run, in the caller's thread and every "
                "thread the run starts",
            )
        )
    native = await count_calls(_ours_native, loop_input())
    agent = await count_calls(_create_agent, agent_input())
    figures.append(
        Figure(
            "Python function calls per run (20 x 4 calls, ainvoke, plan_mode='native')",
            float(native),
            float(agent),
            "calls",
            "create_agent",
            TARGET,
            {"ours": [float(native)], "contender": [float(agent)]},
            "create_agent's shape: one model plans by tool calls",
        )
    )
    short = (
        ("plan_mode='native'", throughput._ours_native, throughput._agent, "create_agent"),
        (
            "JSON mode",
            throughput._ours,
            throughput._agent_answering,
            "create_agent + answer step",
        ),
    )
    for label, ours_side, their_side, contender in short:
        mine = await count_calls(ours_side, loop_input())
        theirs = await count_calls(their_side, agent_input())
        figures.append(
            Figure(
                f"Python function calls per short run (1 call + answer, {label})",
                float(mine),
                float(theirs),
                "calls",
                contender,
                TARGET,
                {"ours": [float(mine)], "contender": [float(theirs)]},
                "the throughput suite's run, each side against the contender of its shape",
            )
        )
    ours_steps = await count_steps(_ours(), loop_input())
    agent_steps = await count_steps(_create_agent(), agent_input())
    for position, what in enumerate(("steps", "tasks")):
        figures.append(
            Figure(
                f"LangGraph {what} per run (20 x 4 calls)",
                float(ours_steps[position]),
                float(agent_steps[position]),
                what,
                "create_agent",
                None,
                {
                    "ours": [float(ours_steps[position])],
                    "contender": [float(agent_steps[position])],
                },
                "information: LangGraph's own work grows with each step and task",
            )
        )
    return figures


async def profile_workload(settings: Settings) -> None:
    """Run our side once (for `--profile calls`)."""
    del settings
    graph = _ours()
    await graph.ainvoke(loop_input(), {"recursion_limit": RECURSION_LIMIT})
