"""Event-loop stall: a heartbeat beside a run whose tool returns a large result.

A heartbeat task sleeps 10 ms at a time on the event loop while one `ainvoke` runs a
round of one async tool returning a large result, which the loop redacts and bounds to
its 20,000-character budget: a 50 MB JSON string (a list of small rows), a Python dict
of 1,000,000 keys, and a Python list of 1,000,000 small dicts. The figure is the worst
heartbeat delay (how late a beat woke up): how long every other run on that event loop
would have waited. The reference is the 100 ms bound; an information row gives the same
worst delay beside a run whose tool returns a short string (the machine's own noise).
Each run follows a run of the same loop with a short result, so that what is measured is
the large result, not the first run's imports.

One more row has the same heartbeat beside a `plan_mode="native"` run whose planner
replies with 5,000 tool calls: 64 run (`max_commands_per_round`), the 4,936 others are
refused, each with its record and its error `ToolMessage`. The reply comes as one chunk
(as providers that send each call whole do) built before the heartbeat starts, so the
figure is the loop's work, not the scripted model's; `max_plan_chars` is raised so the
plan is read whole rather than cut.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Iterator
from typing import Any

from langchain_core.messages import AIMessageChunk, BaseMessage
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGenerationChunk
from langchain_core.tools import BaseTool, tool
from pydantic import PrivateAttr

from agentloop import ModelLimits, ModelOptions, create_tool_loop
from bench.contenders import ONE_CHUNK, BenchChatModel, loop_input
from bench.harness import Figure, Settings, Target, median

__all__ = ["NAME", "profile_workload", "run"]

NAME = "stall"
ROW = '{"id": 7, "name": "row", "tags": ["a", "b"]},'
DOCUMENT_CHARS = 50_000_000
BEAT_S = 0.01
BOUND_MS = 100.0
TARGET = Target(BOUND_MS, on="ours")


WIDE_ITEMS = 1_000_000
PLAN_CALLS = 5_000
"""Tool calls of the wide native plan."""


def _tool(result: Any) -> BaseTool:
    @tool
    async def get_export(n: int) -> Any:
        """Export every row."""
        return result

    return get_export


async def _heartbeat(stop: asyncio.Event, delays: list[float]) -> None:
    last = time.perf_counter()
    while not stop.is_set():
        await asyncio.sleep(BEAT_S)
        now = time.perf_counter()
        delays.append(now - last - BEAT_S)
        last = now


def _graph(result: Any) -> Any:
    planner = BenchChatModel(
        [
            '{"next_action": "execute", "execution_commands": [{"purpose": "", '
            '"tool_name": "get_export", "tool_kwargs": {"n": 1}, "todo_suggestion": ""}]}',
            '{"next_action": "response", "execution_commands": []}',
        ],
        chunk_size=ONE_CHUNK,
    )
    return create_tool_loop(
        planner,
        [_tool(result)],
        models=ModelOptions(answer_model=BenchChatModel(["Done."], chunk_size=ONE_CHUNK)),
    )


async def worst_stall_ms(result: Any) -> float:
    """Run one round of a tool returning `result` beside a heartbeat; return its worst delay."""
    await _graph('[{"id": 1}]').ainvoke(loop_input())  # warm: imports, first compilations
    graph = _graph(result)
    stop, delays = asyncio.Event(), list[float]()
    beating = asyncio.create_task(_heartbeat(stop, delays))
    await asyncio.sleep(5 * BEAT_S)
    try:
        out = await graph.ainvoke(loop_input())
    finally:
        stop.set()
        await beating
    large = not isinstance(result, str) or len(result) > 20_000
    if large and not out["tool_logs"][0]["truncated"]:
        msg = "the large result was not bounded"
        raise RuntimeError(msg)
    return float(max(delays)) * 1000


class _WidePlanner(BenchChatModel):
    """A native planner whose first reply is one chunk of `PLAN_CALLS` calls, built ahead."""

    _plan: AIMessageChunk | None = PrivateAttr(default=None)

    def __init__(self, calls: int) -> None:
        super().__init__(["Done."], chunk_size=ONE_CHUNK)
        self._plan = AIMessageChunk(
            "",
            tool_call_chunks=[
                tool_call_chunk(name="get_item", args=f'{{"n": {n}}}', id=f"call_{n}", index=n)
                for n in range(calls)
            ],
            chunk_position="last",
        )

    def _chunks(self, messages: list[BaseMessage], kwargs: Any) -> Iterator[ChatGenerationChunk]:
        plan, self._plan = self._plan, None
        if plan is None:
            yield from super()._chunks(messages, kwargs)
        else:
            yield ChatGenerationChunk(message=plan)


def _native_graph(calls: int) -> Any:
    @tool
    async def get_item(n: int) -> str:
        """Read one item."""
        return f"item {n}"

    limits = ModelLimits(max_plan_chars=20 * calls + 1_000)  # read whole, not cut
    return create_tool_loop(
        _WidePlanner(calls),
        [get_item],
        plan_mode="native",
        models=ModelOptions(
            answer_model=BenchChatModel(["Done."], chunk_size=ONE_CHUNK), limits=limits
        ),
    )


async def plan_stall_ms(calls: int = PLAN_CALLS, *, gc_paused: bool = False) -> float:
    """Run a native plan of `calls` tool calls beside a heartbeat; return its worst delay.

    With `gc_paused`, Python's cyclic garbage collector is off during the run (and
    collects after it), so the figure is the loop's own work.
    """
    await _native_graph(2).ainvoke(loop_input())  # warm: the native path's first run
    graph = _native_graph(calls)
    stop, delays = asyncio.Event(), list[float]()
    beating = asyncio.create_task(_heartbeat(stop, delays))
    await asyncio.sleep(5 * BEAT_S)
    if gc_paused:
        gc.disable()
    try:
        out = await graph.ainvoke(loop_input())
    finally:
        stop.set()
        await beating
        if gc_paused:
            gc.enable()
            gc.collect()
    refused = sum(r["error_type"] == "too_many_commands" for r in out["tool_logs"])
    if len(out["tool_logs"]) != calls or refused != calls - 64:
        msg = f"the plan's calls were not all recorded ({len(out['tool_logs'])}, {refused})"
        raise RuntimeError(msg)
    return float(max(delays)) * 1000


def _document() -> str:
    return "[" + ROW * (DOCUMENT_CHARS // len(ROW)) + '{"id": 0}]'


def _wide_dict() -> dict[str, int]:
    return {f"key-{n}": n for n in range(WIDE_ITEMS)}


def _wide_list() -> list[dict[str, int]]:
    return [{"id": n} for n in range(WIDE_ITEMS)]


async def run(settings: Settings) -> list[Figure]:
    """Measure the worst stall with each large result and with a short one (interleaved)."""
    document = _document()
    size = f"{len(document) / 1e6:.0f} MB"
    results: dict[str, Any] = {
        f"a {size} JSON result": document,
        f"a {WIDE_ITEMS:,}-key dict result": _wide_dict(),
        f"a {WIDE_ITEMS:,}-item list result (small dicts)": _wide_list(),
    }
    large: dict[str, list[float]] = {name: [] for name in results}
    small: list[float] = []
    plans: list[float] = []
    plans_gc_paused: list[float] = []
    for _ in range(settings.repeats):
        for name, result in results.items():
            large[name].append(await worst_stall_ms(result))
        plans.append(await plan_stall_ms())
        plans_gc_paused.append(await plan_stall_ms(gc_paused=True))
        small.append(await worst_stall_ms('[{"id": 1}]'))
    return [
        *(
            Figure(
                f"Event-loop stall beside a run with {name}",
                median(samples),
                BOUND_MS,
                "ms",
                "bound",
                TARGET,
                {"ours": samples},
                f"worst delay of a {BEAT_S * 1000:g} ms heartbeat; max over repeats "
                f"{max(samples):.0f} ms",
            )
            for name, samples in large.items()
        ),
        Figure(
            f"Event-loop stall beside a native plan of {PLAN_CALLS:,} calls",
            median(plans),
            BOUND_MS,
            "ms",
            "bound",
            TARGET,
            {"ours": plans},
            f"64 run, {PLAN_CALLS - 64:,} refused with a record and a ToolMessage each; "
            f"max over repeats {max(plans):.0f} ms",
        ),
        Figure(
            f"Event-loop stall beside a native plan of {PLAN_CALLS:,} calls, cyclic GC paused",
            median(plans_gc_paused),
            BOUND_MS,
            "ms",
            "bound",
            None,
            {"ours": plans_gc_paused},
            "the loop's own work: Python's full collections, which the plan's objects "
            "trigger, left out",
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
    """Run the large-result sides a few times (for `--profile stall`)."""
    results = [_document(), _wide_dict(), _wide_list()]
    for _ in range(max(3, settings.repeats)):
        for result in results:
            await worst_stall_ms(result)
        await plan_stall_ms()
