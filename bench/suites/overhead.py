"""Loop overhead: 20 rounds of 4 zero-time tool calls, time per round.

Our loop against `langchain.agents.create_agent` (and the deprecated
`langgraph.prebuilt.create_react_agent` while it still imports), with the same
decisions: 4 calls per round for 20 rounds, then the answer. Every reply arrives
as one chunk, so the figure is the framework's own cost; a second, informational
figure streams our plans in 8-character chunks (the cost of reading a plan as a
stream, which the prebuilt agents do not pay under `ainvoke`). A third, also
informational, gives both sides LangGraph's `InMemorySaver`, as an app with a
checkpointer runs them (each step is then checkpointed: the cost grows with the
state's channels). A fourth runs both sides through `invoke`, as a script or a notebook
cell calls them, with a tool that has a sync form (each side calls it).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver

from bench.contenders import (
    RECURSION_LIMIT,
    Graph,
    agent_input,
    agent_script,
    both_forms_tool,
    build_create_agent,
    build_loop,
    build_react_agent,
    loop_input,
    sleeping_tool,
)
from bench.harness import Figure, Settings, Target, median, timed

__all__ = ["NAME", "profile_workload", "run"]

NAME = "overhead"
ROUNDS = 20
CALLS = 4
STREAMED_CHUNK = 8
TARGET = Target(1.0)


def _rounds() -> list[list[dict[str, Any]]]:
    # Distinct arguments in every round: the loop skips a repeated query.
    return [
        [{"tool_name": "get_item", "tool_kwargs": {"n": r * CALLS + i}} for i in range(CALLS)]
        for r in range(ROUNDS)
    ]


def _ours(chunk_size: int | None = None, *, saver: bool = False) -> Callable[[], Graph]:
    def build() -> Graph:
        extra: dict[str, Any] = {} if chunk_size is None else {"chunk_size": chunk_size}
        if saver:
            extra["checkpointer"] = InMemorySaver()
        return build_loop(_rounds(), [sleeping_tool("get_item", 0)], **extra)

    return build


def _create_agent() -> Graph:
    return build_create_agent(agent_script(_rounds()), [sleeping_tool("get_item", 0)])


def _ours_sync() -> Graph:
    return build_loop(_rounds(), [both_forms_tool()])


def _create_agent_sync() -> Graph:
    return build_create_agent(agent_script(_rounds()), [both_forms_tool()])


def _create_agent_saved() -> Graph:
    return build_create_agent(
        agent_script(_rounds()), [sleeping_tool("get_item", 0)], checkpointer=InMemorySaver()
    )


def _react_agent() -> Graph | None:
    return build_react_agent(agent_script(_rounds()), [sleeping_tool("get_item", 0)])


async def _ms_per_round(
    build: Callable[[], Graph | None], payload: dict[str, Any], *, sync: bool = False
) -> tuple[float, float]:
    """Run once (`invoke` in a worker thread under `sync`); return (wall ms, CPU ms) per round."""
    graph = build()
    if graph is None:
        return float("nan"), float("nan")
    config: RunnableConfig = {"recursion_limit": RECURSION_LIMIT}
    if getattr(graph, "checkpointer", None) is not None:
        config["configurable"] = {"thread_id": "overhead"}
    if sync:
        timing = await timed(lambda: asyncio.to_thread(graph.invoke, payload, config))
    else:
        timing = await timed(lambda: graph.ainvoke(payload, config))
    return timing.wall_s * 1000 / ROUNDS, timing.cpu_s * 1000 / ROUNDS


async def run(settings: Settings) -> list[Figure]:
    """Measure the time per round of each contender (interleaved, median of repeats)."""
    sides: dict[str, tuple[Callable[[], Graph | None], dict[str, Any]]] = {
        "ours": (_ours(), loop_input()),
        "ours_streamed": (_ours(STREAMED_CHUNK), loop_input()),
        "create_agent": (_create_agent, agent_input()),
        "create_react_agent": (_react_agent, agent_input()),
        "ours_saved": (_ours(saver=True), loop_input()),
        "create_agent_saved": (_create_agent_saved, agent_input()),
        "ours_sync": (_ours_sync, loop_input()),
        "create_agent_sync": (_create_agent_sync, agent_input()),
    }
    samples: dict[str, list[float]] = {side: [] for side in sides}
    cpu: dict[str, list[float]] = {side: [] for side in sides}
    for side, (build, payload) in sides.items():  # warm-up: imports, schema caches
        await _ms_per_round(build, payload, sync=side.endswith("_sync"))
    for _ in range(settings.repeats):
        for side, (build, payload) in sides.items():
            wall_ms, cpu_ms = await _ms_per_round(build, payload, sync=side.endswith("_sync"))
            samples[side].append(wall_ms)
            cpu[side].append(cpu_ms)
    ours = median(samples["ours"])
    agent = median(samples["create_agent"])
    figures = [
        Figure(
            "Loop overhead per round (20 x 4 calls)",
            ours,
            agent,
            "ms",
            "create_agent",
            TARGET,
            {"ours": samples["ours"], "contender": samples["create_agent"]},
            "aim: ratio <= 0.8",
        )
    ]
    react = samples["create_react_agent"]
    if react and not math.isnan(react[0]):  # create_react_agent still imports
        figures.append(
            Figure(
                "Loop overhead per round (20 x 4 calls)",
                ours,
                median(react),
                "ms",
                "create_react_agent",
                TARGET,
                {"ours": samples["ours"], "contender": react},
            )
        )

    def information(name: str, ours: list[float], agent: list[float], note: str) -> Figure:
        """An information row: our samples against create_agent's, no target."""
        sampled = {"ours": ours, "contender": agent}
        return Figure(name, median(ours), median(agent), "ms", "create_agent", None, sampled, note)

    figures += [
        information(
            "Loop overhead per round, CPU time",
            cpu["ours"],
            cpu["create_agent"],
            "information: process CPU time, steadier than wall time on a busy machine",
        ),
        information(
            "Loop overhead per round, plan streamed in 8-char chunks",
            samples["ours_streamed"],
            samples["create_agent"],
            "information: adds the cost of reading each plan as ~50 chunks",
        ),
        information(
            "Loop overhead per round, both with InMemorySaver",
            samples["ours_saved"],
            samples["create_agent_saved"],
            "information: every step checkpointed, as in an app with a checkpointer",
        ),
        information(
            "Loop overhead per round, both through invoke",
            samples["ours_sync"],
            samples["create_agent_sync"],
            "information: a sync run, as a script or a notebook cell makes it",
        ),
    ]
    return figures


async def profile_workload(settings: Settings) -> None:
    """Run our side a few times (for `--profile overhead`)."""
    for _ in range(max(3, settings.repeats)):
        await _ms_per_round(_ours(), loop_input())
