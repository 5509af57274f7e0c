"""Memory: what whole values kept for `"$N"` references hold, after runs and while they run.

A plan reads a result of a few large members (two lists of 1,000,000 floats: about 64 MB
in memory, where a JSON estimate saw a tenth of it) and hands it whole to a write with
`"$1"`. Two figures, each our process's resident memory (RSS, read from the kernel):

- its growth after 8 such runs one after the other, once nothing is in flight: each
  run's values are released when its round ends, so the growth is about one value (the
  allocator keeps some freed pages), bounded by 128 MB;
- its peak growth while 40 runs at once each pass three texts of 700,000 characters by
  reference (about 85 MB together, within the loop's 256 MiB bound), and how many of
  their writes were refused `reference_unavailable` (bound: none).
"""

from __future__ import annotations

import asyncio
import gc
import os
import random
from pathlib import Path
from typing import Any

from langchain_core.tools import tool

from agentloop import ModelOptions, create_tool_loop
from agentloop.testing import planning_round
from bench.contenders import ONE_CHUNK, BenchChatModel
from bench.harness import Figure, Settings, Target, median

__all__ = ["NAME", "profile_workload", "run"]

NAME = "memory"
FLOATS = 1_000_000
SEQUENTIAL_RUNS = 8
CONCURRENT_RUNS = 40
TEXT_CHARS = 2_100_000
GROWTH_BOUND_MB = 128.0
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_mb() -> float:
    """This process's resident memory, in MB."""
    statm = Path("/proc/self/statm")
    if statm.exists():
        return int(statm.read_text().split()[1]) * _PAGE / 1e6
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3  # a peak: less exact


def _graph(result: Any) -> Any:
    @tool
    async def read_measurements(n: int) -> Any:
        """Read every measurement."""
        return result()

    @tool
    async def store_measurements(data: Any) -> int:
        """Store measurements (a write)."""
        return len(data)

    read_measurements.metadata = {"agentloop": {"read_only": True}}
    plan = (
        '{"next_action": "execute", "execution_commands": ['
        '{"purpose": "", "tool_name": "read_measurements", "tool_kwargs": {"n": 1}},'
        '{"purpose": "", "tool_name": "store_measurements", "tool_kwargs": {"data": "$1"}}]}'
    )
    done = '{"next_action": "response", "execution_commands": []}'
    planner = BenchChatModel(
        responder=lambda messages: plan if planning_round(messages) == 0 else done,
        chunk_size=ONE_CHUNK,
    )
    return create_tool_loop(
        planner,
        [read_measurements, store_measurements],
        models=ModelOptions(answer_model=BenchChatModel(["Done."], chunk_size=ONE_CHUNK)),
    )


def _few_large_members() -> dict[str, list[float]]:
    return {name: [random.random() for _ in range(FLOATS)] for name in ("a", "b")}


def _texts() -> list[str]:
    """Three texts of 700,000 characters (each under the 1,000,000 a text result may hold)."""
    part = TEXT_CHARS // 3
    return ["".join(random.choices("abcdefgh", k=part)) for _ in range(3)]


def _refused(out: dict[str, Any]) -> int:
    return sum(r.get("error_type") == "reference_unavailable" for r in out["tool_logs"])


async def sequential_growth_mb() -> float:
    """RSS growth after runs that each pass two 1,000,000-float lists by reference."""
    graph = _graph(_few_large_members)
    await graph.ainvoke({"user_input": "copy the measurements"})  # warm, and the allocator
    gc.collect()
    before = rss_mb()
    for _ in range(SEQUENTIAL_RUNS):
        out = await graph.ainvoke({"user_input": "copy the measurements"})
        if _refused(out):
            msg = "a write was refused its whole value"
            raise RuntimeError(msg)
    gc.collect()
    return rss_mb() - before


async def concurrent_peak_mb() -> tuple[float, int]:
    """Peak RSS growth while 40 runs at once each pass 2 M characters; writes refused."""
    graph = _graph(_texts)
    await graph.ainvoke({"user_input": "copy the text"})
    gc.collect()
    before = peak = rss_mb()
    done = asyncio.Event()

    async def watch() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, rss_mb())
            await asyncio.sleep(0.005)

    watcher = asyncio.create_task(watch())
    try:
        outs = await asyncio.gather(
            *(graph.ainvoke({"user_input": "copy the text"}) for _ in range(CONCURRENT_RUNS))
        )
    finally:
        done.set()
        await watcher
    return peak - before, sum(map(_refused, outs))


async def run(settings: Settings) -> list[Figure]:
    """Measure RSS growth after sequential runs and under concurrent ones."""
    growth: list[float] = []
    peaks: list[float] = []
    refused: list[float] = []
    for _ in range(settings.repeats):
        growth.append(await sequential_growth_mb())
        peak, lost = await concurrent_peak_mb()
        peaks.append(peak)
        refused.append(float(lost))
    return [
        Figure(
            f"RSS growth after {SEQUENTIAL_RUNS} runs passing 2 x {FLOATS:,} floats by reference",
            median(growth),
            GROWTH_BOUND_MB,
            "MB",
            "bound",
            Target(GROWTH_BOUND_MB, on="ours"),
            {"ours": growth},
            "each run's whole values are released when its round ends",
        ),
        Figure(
            f"Peak RSS growth, {CONCURRENT_RUNS} runs at once passing {TEXT_CHARS:,} "
            "characters by reference",
            median(peaks),
            256 * 1.048576,
            "MB",
            "the loop's bound",
            None,
            {"ours": peaks},
            f"max over repeats {max(peaks):.0f} MB",
        ),
        Figure(
            f"Writes refused reference_unavailable, {CONCURRENT_RUNS} runs at once",
            median(refused),
            0.0,
            "writes",
            "none",
            Target(0.0, on="ours"),
            {"ours": refused},
            "one run's values never push out another's",
        ),
    ]


async def profile_workload(settings: Settings) -> None:
    """Run both sides a few times (for `--profile memory`)."""
    for _ in range(max(2, settings.repeats)):
        await sequential_growth_mb()
        await concurrent_peak_mb()
