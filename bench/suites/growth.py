"""Growth: 200 rounds of one call returning 2 kB, with each checkpointer.

Per-round time over the last 20 rounds divided by that over the first 20 (from the
timestamps of our `round_completed` events; for `create_agent`, from the arrival of
its `tools` updates), with no checkpointer, `InMemorySaver` and `AsyncSqliteSaver` on
a temporary file. Peak memory is measured in a separate run of each side under
tracemalloc (which slows it down, so its timing is not used).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from agentloop import PlanningOptions
from bench.contenders import (
    RECURSION_LIMIT,
    agent_input,
    agent_script,
    build_create_agent,
    build_loop,
    loop_input,
    text_tool,
)
from bench.harness import Figure, MemoryProbe, Settings, Target, median, per_round

__all__ = ["NAME", "profile_workload", "run"]

NAME = "growth"
ROUNDS = 200
QUICK_ROUNDS = 60
WINDOW = 20
RESULT_CHARS = 2_000
KEEP_TOOL_RESULTS = 5
TARGET = Target(1.5, on="ours")

Saver = BaseCheckpointSaver[Any] | None


@dataclass
class Stamps:
    """When each round ended: wall-clock seconds and process CPU seconds."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    def add(self, wall: float) -> None:
        """Record a round that ended at `wall` (now, in CPU time)."""
        self.wall.append(wall)
        self.cpu.append(time.process_time())


@asynccontextmanager
async def _no_saver() -> AsyncIterator[Saver]:
    yield None


@asynccontextmanager
async def _memory_saver() -> AsyncIterator[Saver]:
    yield InMemorySaver()


@asynccontextmanager
async def _sqlite_saver() -> AsyncIterator[Saver]:
    with tempfile.TemporaryDirectory(prefix="agentloop-bench-") as folder:
        path = os.path.join(folder, "checkpoints.sqlite")
        async with AsyncSqliteSaver.from_conn_string(path) as saver:
            yield saver


SAVERS: dict[str, Callable[[], Any]] = {
    "no checkpointer": _no_saver,
    "InMemorySaver": _memory_saver,
    "AsyncSqliteSaver": _sqlite_saver,
}


def _rounds(count: int) -> list[list[dict[str, Any]]]:
    return [[{"tool_name": "get_page", "tool_kwargs": {"n": r}}] for r in range(count)]


def _config() -> RunnableConfig:
    return {"recursion_limit": RECURSION_LIMIT, "configurable": {"thread_id": "bench"}}


async def ours_stamps(count: int, saver: Saver) -> Stamps:
    """Run our loop for `count` rounds; return when each round completed.

    Wall-clock stamps are the events' `ts`; CPU stamps are the process CPU time when the
    event arrives.
    """
    graph = build_loop(
        _rounds(count),
        [text_tool("get_page", RESULT_CHARS)],
        checkpointer=saver,
        planning=PlanningOptions(keep_tool_results=KEEP_TOOL_RESULTS),
    )
    stamps = Stamps()
    async for event in graph.astream(loop_input(), _config(), stream_mode="custom"):
        if event["type"] == "round_completed":
            stamps.add(event["ts"])
    return stamps


async def agent_stamps(count: int, saver: Saver) -> Stamps:
    """Run create_agent for `count` tool turns; return when each tool step's update arrived."""
    graph = build_create_agent(
        agent_script(_rounds(count)), [text_tool("get_page", RESULT_CHARS)], checkpointer=saver
    )
    stamps = Stamps()
    async for update in graph.astream(agent_input(), _config(), stream_mode="updates"):
        if "tools" in update:
            stamps.add(time.time())
    return stamps


Runner = Callable[[int, Saver], Any]


async def _growth(runner: Runner, count: int, saver_factory: Callable[[], Any]) -> list[float]:
    """Return [wall last/first, first ms, last ms, CPU last/first]."""
    async with saver_factory() as saver:
        stamps: Stamps = await runner(count, saver)
    first, last = per_round(stamps.wall, WINDOW)
    cpu_first, cpu_last = per_round(stamps.cpu, WINDOW)
    return [last / first, first * 1000, last * 1000, cpu_last / cpu_first]


async def _peak_mb(runner: Runner, count: int, saver_factory: Callable[[], Any]) -> float:
    probe = MemoryProbe()
    async with saver_factory() as saver, probe.measure():
        await runner(count, saver)
    return probe.peak_mb


async def run(settings: Settings) -> list[Figure]:
    """Measure growth and peak memory of each side with each checkpointer."""
    count = QUICK_ROUNDS if settings.quick else ROUNDS
    repeats = settings.repeats
    figures: list[Figure] = []
    for saver_name, saver_factory in SAVERS.items():
        ours: list[list[float]] = []
        agent: list[list[float]] = []
        for _ in range(repeats):
            ours.append(await _growth(ours_stamps, count, saver_factory))
            agent.append(await _growth(agent_stamps, count, saver_factory))
        ours_ratio = [sample[0] for sample in ours]
        agent_ratio = [sample[0] for sample in agent]
        first = median([sample[1] for sample in ours])
        last = median([sample[2] for sample in ours])
        ours_cpu = median([sample[3] for sample in ours])
        agent_cpu = median([sample[3] for sample in agent])
        figures.append(
            Figure(
                f"Growth ({count} rounds x 2 kB), {saver_name}",
                median(ours_ratio),
                median(agent_ratio),
                "last/first",
                "create_agent",
                TARGET,
                {"ours": ours_ratio, "contender": agent_ratio},
                f"ours: {first:.2f} ms/round in the first {WINDOW}, "
                f"{last:.2f} ms in the last {WINDOW}; create_agent: "
                f"{median([s[1] for s in agent]):.2f} -> {median([s[2] for s in agent]):.2f} ms; "
                f"in CPU time: ours {ours_cpu:.2f}, create_agent {agent_cpu:.2f}",
            )
        )
        ours_mb = await _peak_mb(ours_stamps, count, saver_factory)
        agent_mb = await _peak_mb(agent_stamps, count, saver_factory)
        figures.append(
            Figure(
                f"Growth peak memory ({count} rounds), {saver_name}",
                ours_mb,
                agent_mb,
                "MiB",
                "create_agent",
                None,
                {"ours": [ours_mb], "contender": [agent_mb]},
                "information: tracemalloc peak during one run",
            )
        )
    return figures


async def profile_workload(settings: Settings) -> None:
    """Run our side once per checkpointer (for `--profile growth`)."""
    count = QUICK_ROUNDS if settings.quick else ROUNDS
    for saver_factory in SAVERS.values():
        async with saver_factory() as saver:
            await ours_stamps(count, saver)
