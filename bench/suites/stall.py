"""Event-loop stall: a heartbeat beside a run whose tool returns a 50 MB JSON document.

A heartbeat task sleeps 10 ms at a time on the event loop while one `ainvoke` runs a
round of one async tool returning a 50 MB JSON string (a list of small rows), which the
loop bounds to its 20,000-character budget. The figure is the worst heartbeat delay
(how late a beat woke up): how long every other run on that event loop would have
waited. The reference is the 100 ms bound; an information row gives the same worst delay
beside a run whose tool returns a short string (the machine's own noise).
"""

from __future__ import annotations

import asyncio
import time

from langchain_core.tools import BaseTool, tool

from agentloop import ModelOptions, create_tool_loop
from bench.contenders import ONE_CHUNK, BenchChatModel, loop_input
from bench.harness import Figure, Settings, Target, median

__all__ = ["NAME", "profile_workload", "run"]

NAME = "stall"
ROW = '{"id": 7, "name": "row", "tags": ["a", "b"]},'
DOCUMENT_CHARS = 50_000_000
BEAT_S = 0.01
BOUND_MS = 100.0
TARGET = Target(BOUND_MS, on="ours")


def _tool(text: str) -> BaseTool:
    @tool
    async def get_export(n: int) -> str:
        """Export every row as one JSON document."""
        return text

    return get_export


async def _heartbeat(stop: asyncio.Event, delays: list[float]) -> None:
    last = time.perf_counter()
    while not stop.is_set():
        await asyncio.sleep(BEAT_S)
        now = time.perf_counter()
        delays.append(now - last - BEAT_S)
        last = now


async def worst_stall_ms(text: str) -> float:
    """Run one round of a tool returning `text` beside a heartbeat; return its worst delay."""
    planner = BenchChatModel(
        [
            '{"next_action": "execute", "execution_commands": [{"purpose": "", '
            '"tool_name": "get_export", "tool_kwargs": {"n": 1}, "todo_suggestion": ""}]}',
            '{"next_action": "response", "execution_commands": []}',
        ],
        chunk_size=ONE_CHUNK,
    )
    graph = create_tool_loop(
        planner,
        [_tool(text)],
        models=ModelOptions(answer_model=BenchChatModel(["Done."], chunk_size=ONE_CHUNK)),
    )
    stop, delays = asyncio.Event(), list[float]()
    beating = asyncio.create_task(_heartbeat(stop, delays))
    await asyncio.sleep(5 * BEAT_S)
    try:
        out = await graph.ainvoke(loop_input())
    finally:
        stop.set()
        await beating
    if not out["tool_logs"][0]["truncated"] and len(text) > 20_000:
        msg = "the large result was not bounded"
        raise RuntimeError(msg)
    return float(max(delays)) * 1000


def _document() -> str:
    return "[" + ROW * (DOCUMENT_CHARS // len(ROW)) + '{"id": 0}]'


async def run(settings: Settings) -> list[Figure]:
    """Measure the worst stall with the large result and with a short one (interleaved)."""
    document = _document()
    large: list[float] = []
    small: list[float] = []
    for _ in range(settings.repeats):
        large.append(await worst_stall_ms(document))
        small.append(await worst_stall_ms('[{"id": 1}]'))
    size = f"{len(document) / 1e6:.0f} MB"
    return [
        Figure(
            f"Event-loop stall beside a run with a {size} JSON result",
            median(large),
            BOUND_MS,
            "ms",
            "bound",
            TARGET,
            {"ours": large},
            f"worst delay of a {BEAT_S * 1000:g} ms heartbeat; max over repeats "
            f"{max(large):.0f} ms",
        ),
        Figure(
            "Event-loop stall beside a run with a short result",
            median(small),
            BOUND_MS,
            "ms",
            "bound",
            None,
            {"ours": small},
            "the machine's own noise",
        ),
    ]


async def profile_workload(settings: Settings) -> None:
    """Run the large-result side a few times (for `--profile stall`)."""
    document = _document()
    for _ in range(max(3, settings.repeats)):
        await worst_stall_ms(document)
