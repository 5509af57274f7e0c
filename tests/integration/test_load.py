"""Many loop runs at once on one event loop: all correct, nothing leaks between them."""

from __future__ import annotations

import asyncio
import gc
import re
import threading
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from agentloop import ModelOptions, create_tool_loop
from agentloop.testing import ScriptedChatModel, plan_reply, planning_round

pytestmark = pytest.mark.integration

RUNS = 200


@tool
async def get_greeting(user: str) -> str:
    """Greets one user."""
    await asyncio.sleep(0.01)
    return f"hello {user}"


def plan(messages: list[Any]) -> str:
    user = re.search(r"I am (\w+)", str(messages[1].content))  # the request
    assert user is not None
    if planning_round(messages) == 0:
        command = {"tool_name": "get_greeting", "tool_kwargs": {"user": user.group(1)}}
        return str(plan_reply("execute", [command]))
    return str(plan_reply("response"))


def answer(messages: list[Any]) -> str:
    found = re.search(r'"Use get_greeting": "(hello \w+)"', str(messages[-1].content))
    return found.group(1) if found else "no result"


def build(**options: Any) -> Any:
    return create_tool_loop(
        ScriptedChatModel(responder=plan, keep_requests=False),
        [get_greeting],
        models=ModelOptions(answer_model=ScriptedChatModel(responder=answer, keep_requests=False)),
        **options,
    )


async def run_all(graph: Any, *, threads: bool, runs: int = RUNS) -> list[Any]:
    async def one(i: int) -> Any:
        config = {"configurable": {"thread_id": f"user-{i}"}} if threads else None
        return await graph.ainvoke({"user_input": f"I am user{i}, greet me"}, config)

    return await asyncio.gather(*(one(i) for i in range(runs)))


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class PeakRss:
    """Samples the process's resident memory every 20 ms while a block runs."""

    def __enter__(self) -> PeakRss:
        self.peak = rss_mb()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, rss_mb())

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_mb())


def check(outputs: list[Any]) -> None:
    for i, out in enumerate(outputs):
        assert out["answer"] == f"hello user{i}"
        [record] = out["tool_logs"]
        assert record["kwargs"] == {"user": f"user{i}"}
        assert record["success"] and not record["duplicate"] and not record["from_cache"]


async def test_200_concurrent_runs_with_a_checkpointer() -> None:
    saver = InMemorySaver()
    graph = build(checkpointer=saver)
    check(await run_all(graph, threads=True))
    state = await graph.aget_state({"configurable": {"thread_id": "user-7"}})
    assert state.values["answer"] == "hello user7"


async def test_200_concurrent_runs_release_their_memory() -> None:
    graph = build()
    check(await run_all(graph, threads=False))  # warm up caches and imports
    gc.collect()
    tracemalloc.start()
    try:
        start, _ = tracemalloc.get_traced_memory()
        outputs = await run_all(graph, threads=False)
        check(outputs)
        peak = tracemalloc.get_traced_memory()[1]
        del outputs
        gc.collect()
        end, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    grown = end - start
    assert grown < 0.1 * (peak - start) + 2_000_000, (start, peak, end)


async def test_1000_concurrent_runs_rss(report: Any) -> None:
    """RSS before, at the peak and after 1,000 concurrent runs, twice.

    CPython's allocator keeps the arenas a burst needed (they hold a few long-lived
    objects), so RSS stays near the first peak; what matters is that it does not grow
    with more runs: a second burst reuses that memory.
    """
    if not Path("/proc/self/status").exists():
        pytest.skip("reads /proc/self/status")
    graph = build()
    check(await run_all(graph, threads=False, runs=50))  # imports and caches
    gc.collect()
    before = rss_mb()
    figures = []
    for burst in (1, 2):
        with PeakRss() as sampler:
            outputs = await run_all(graph, threads=False, runs=1000)
        check(outputs[:RUNS])
        del outputs
        gc.collect()
        figures.append((sampler.peak, rss_mb()))
        report(
            f"1,000 concurrent runs, burst {burst}: RSS before {before:.0f} MB, "
            f"peak {sampler.peak:.0f} MB, after {rss_mb():.0f} MB"
        )
    (first_peak, first_after), (_, second_after) = figures
    assert first_peak > before
    assert second_after < first_after + 0.1 * (first_peak - before) + 10, figures
