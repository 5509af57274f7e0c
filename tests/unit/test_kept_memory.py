"""Whole values kept for `"$N"` references: counted by their real size, released with their run.

Through the public API (memory traced with `tracemalloc`), and the measure and the store
of kept values directly.
"""

from __future__ import annotations

import asyncio
import gc
import random
import tracemalloc
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.tools import tool

from agentloop import ModelOptions, create_tool_loop
from agentloop.governance.results import WholeResult
from agentloop.governance.whole_results import WholeResults, memory_size
from agentloop.testing import ScriptedChatModel, plan_reply, planning_round

FLOATS = 200_000


@pytest.fixture
def traced() -> Iterator[None]:
    tracemalloc.start()
    try:
        yield
    finally:
        tracemalloc.stop()


def _traced_mb() -> float:
    gc.collect()
    return tracemalloc.get_traced_memory()[0] / 1e6


@pytest.mark.parametrize(
    "make",
    [
        lambda: {"a": [random.random() for _ in range(FLOATS)], "b": [random.random()] * 3},
        lambda: [f"{n}" + "x" * 800_000 for n in range(3)],
        lambda: [{"id": n, "name": f"row {n}", "score": n / 7} for n in range(50_000)],
        lambda: {"nested": [[random.random() for _ in range(500)] for _ in range(400)]},
    ],
    ids=["few large members", "three long texts", "many rows", "lists of lists"],
)
def test_a_value_is_measured_at_no_less_than_its_real_size(traced: None, make: Any) -> None:
    before = tracemalloc.get_traced_memory()[0]
    value = make()
    real = tracemalloc.get_traced_memory()[0] - before
    measured = memory_size(value)
    assert 0.9 * real <= measured <= 3 * real, (measured, real)


def test_a_value_shared_within_itself_counts_once_and_a_cycle_ends() -> None:
    row = list(range(1000))
    shared = [row, row, row]
    assert memory_size(shared) < 2 * memory_size(row)
    cycle: list[Any] = [1, 2]
    cycle.append(cycle)
    assert memory_size(cycle) > 0


def test_one_runs_values_never_push_out_another_runs() -> None:
    kept = WholeResults(max_bytes=3 * memory_size("x" * 100_000))
    text = WholeResult("x" * 100_000)
    assert kept.keep("run-a", "a:1:0", text)
    assert kept.keep("run-b", "b:1:0", text)
    assert kept.keep("run-a", "a:1:1", text)
    assert not kept.keep("run-c", "c:1:0", text)  # over the bound: not kept
    assert kept.get("run-a", "a:1:0") is text and kept.get("run-b", "b:1:0") is text
    assert kept.get("run-c", "c:1:0") is None
    assert kept.get("run-b", "a:1:0") is None  # another run's call id is not this run's
    kept.release("run-a")
    assert len(kept) == 1 and kept.get("run-a", "a:1:1") is None
    assert kept.keep("run-c", "c:1:0", text)


def test_a_run_that_never_ends_is_dropped_after_its_time() -> None:
    now = [0.0]
    kept = WholeResults(ttl_s=60, clock=lambda: now[0])
    kept.keep("run-a", "a:1:0", WholeResult("x" * 1000))
    now[0] = 61
    kept.keep("run-b", "b:1:0", WholeResult("y"))
    assert kept.get("run-a", "a:1:0") is None and len(kept) == 1


def _loop(store: Any) -> Any:
    @tool
    def read_measurements(n: int) -> dict[str, list[float]]:
        """Read measurements (a few large members)."""
        return {"a": [random.random() for _ in range(FLOATS)], "b": [1.5, 2.5]}

    read_measurements.metadata = {"agentloop": {"read_only": True}}
    commands = [
        {"tool_name": "read_measurements", "tool_kwargs": {"n": 1}},
        {"tool_name": "store_measurements", "tool_kwargs": {"data": "$1"}},
    ]

    def plan(messages: Any) -> str:
        first = planning_round(messages) == 0
        return str(plan_reply("execute", commands) if first else plan_reply("response"))

    return create_tool_loop(
        ScriptedChatModel(responder=plan, keep_requests=False),
        [read_measurements, store],
        models=ModelOptions(answer_model=ScriptedChatModel(["done"], repeat_last=True)),
    )


async def test_values_are_released_when_their_runs_end(run_loop: Any, traced: None) -> None:
    stored: list[int] = []

    @tool
    def store_measurements(data: dict[str, list[float]]) -> int:
        """Store measurements (a write)."""
        stored.append(len(data["a"]))
        return len(data["a"])

    graph = _loop(store_measurements)
    await run_loop(graph, {"user_input": "copy the measurements"})  # warm
    before = _traced_mb()
    for _ in range(4):
        out = await run_loop(graph, {"user_input": "copy the measurements"})
        assert out["tool_logs"][1]["status"] == "succeeded"
    del out
    assert stored == [FLOATS] * 5
    assert _traced_mb() - before < 4  # one run's value is about 6.4 MB: none is held


async def test_a_cancelled_runs_values_are_released(traced: None) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    @tool
    async def store_measurements(data: dict[str, list[float]]) -> int:
        """Store measurements (a write that waits)."""
        started.set()
        await release.wait()
        return len(data["a"])

    graph = _loop(store_measurements)
    before = _traced_mb()
    run = asyncio.ensure_future(graph.ainvoke({"user_input": "copy the measurements"}))
    await asyncio.wait_for(started.wait(), 60)
    assert _traced_mb() - before > 4  # the whole value is held while the write runs
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    del run
    for _ in range(500):  # the cancellation reaches the run's inner tasks in a few turns
        if _traced_mb() - before < 2:
            break
        await asyncio.sleep(0.01)
    assert _traced_mb() - before < 2
