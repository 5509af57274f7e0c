"""Parallel efficiency: 8 async tools sleeping 100 ms in one round.

The execute phase is timed from our `plan_decided` event to `round_completed` (event
timestamps), and divided by the ideal: 100 ms for one parallel batch, 400 ms with
`concurrency=2` (4 batches of 2), 300 ms with an unsafe `save_` call in the middle
(a batch, the unsafe call alone, a batch). For information, the same 8 calls under
`create_agent`, whose tool node is timed between its `model` and `tools` updates.
"""

from __future__ import annotations

import time
from typing import Any

from bench.contenders import (
    agent_input,
    agent_script,
    build_create_agent,
    build_loop,
    loop_input,
    sleeping_tool,
)
from bench.harness import Figure, Settings, Target, median

__all__ = ["NAME", "profile_workload", "run"]

NAME = "parallel"
CALLS = 8
SLEEP_S = 0.1
UNSAFE_AT = 4
TARGET = Target(1.10)


def _commands(unsafe_at: int | None = None) -> list[dict[str, Any]]:
    return [
        {"tool_name": "save_item" if i == unsafe_at else "get_item", "tool_kwargs": {"n": i}}
        for i in range(CALLS)
    ]


def _tools() -> list[Any]:
    return [sleeping_tool("get_item", SLEEP_S), sleeping_tool("save_item", SLEEP_S)]


async def _ours_ms(concurrency: int | None, unsafe_at: int | None) -> float:
    graph = build_loop([_commands(unsafe_at)], _tools(), concurrency=concurrency)
    stamps: dict[str, float] = {}
    async for event in graph.astream(loop_input(), stream_mode="custom"):
        if event["type"] in ("plan_decided", "round_completed"):
            stamps.setdefault(event["type"], event["ts"])
    return (stamps["round_completed"] - stamps["plan_decided"]) * 1000


async def _agent_ms() -> float:
    graph = build_create_agent(agent_script([_commands()]), _tools())
    stamps: dict[str, float] = {}
    async for update in graph.astream(agent_input(), stream_mode="updates"):
        for node in update:
            stamps.setdefault(node, time.perf_counter())
    return (stamps["tools"] - stamps["model"]) * 1000


VARIANTS: dict[str, tuple[int | None, int | None, int]] = {
    "8 x 100 ms, one batch": (None, None, 1),
    "8 x 100 ms, concurrency=2": (2, None, 4),
    "8 x 100 ms, one unsafe call in the middle": (None, UNSAFE_AT, 3),
}
"""Name: (concurrency, index of the unsafe call, ideal number of 100 ms batches)."""


async def run(settings: Settings) -> list[Figure]:
    """Time the execute phase of each variant against its ideal, and create_agent's."""
    samples: dict[str, list[float]] = {name: [] for name in VARIANTS}
    agent: list[float] = []
    await _ours_ms(None, None)  # warm-up
    for _ in range(settings.repeats):
        for name, (concurrency, unsafe_at, _) in VARIANTS.items():
            samples[name].append(await _ours_ms(concurrency, unsafe_at))
        agent.append(await _agent_ms())
    figures = []
    for name, (_, _, batches) in VARIANTS.items():
        ideal = batches * SLEEP_S * 1000
        figures.append(
            Figure(
                f"Parallel efficiency, {name}",
                median(samples[name]),
                ideal,
                "ms",
                f"ideal ({batches} x 100 ms)",
                TARGET,
                {"ours": samples[name]},
            )
        )
    first = next(iter(VARIANTS))
    figures.append(
        Figure(
            f"Parallel phase, {first}",
            median(samples[first]),
            median(agent),
            "ms",
            "create_agent",
            None,
            {"ours": samples[first], "contender": agent},
            "information: create_agent timed between its model and tools updates",
        )
    )
    return figures


async def profile_workload(settings: Settings) -> None:
    """Run our variants a few times (for `--profile parallel`)."""
    for _ in range(max(3, settings.repeats)):
        for concurrency, unsafe_at, _ in VARIANTS.values():
            await _ours_ms(concurrency, unsafe_at)
