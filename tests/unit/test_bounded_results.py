"""Tool results are bounded before they are materialized: iterators, slow and endless
generators, objects that cannot be converted. Through `invoke` and `ainvoke`."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from agentloop import GovernanceOptions, ModelOptions, ToolPolicy, ToolRetry, create_tool_loop
from agentloop.governance.results import UNREAD_MARKER
from agentloop.testing import ScriptedChatModel, plan_reply

GUARD_ITEMS = 100_000
"""An endless generator in these tests gives up after this many items, so a loop that
drains it fails the test instead of exhausting the machine's memory."""


def cmd(tool_name: str, **kwargs: Any) -> dict[str, Any]:
    return {"tool_name": tool_name, "tool_kwargs": kwargs}


def build(commands: list[dict[str, Any]], tools: list[Any], **options: Any) -> Any:
    planner = ScriptedChatModel([plan_reply("execute", commands), plan_reply("response")])
    return create_tool_loop(
        planner, tools, models=ModelOptions(answer_model=ScriptedChatModel(["ok"])),
        checkpointer=InMemorySaver(), **options,
    )  # fmt: skip


def config() -> dict[str, Any]:
    return {"configurable": {"thread_id": f"t-{time.monotonic_ns()}"}}


def endless() -> Iterator[int]:
    for number in itertools.count():
        if number >= GUARD_ITEMS:
            msg = "drained far past any bound"
            raise RuntimeError(msg)
        yield number


@tool
def get_numbers(start: int) -> Any:
    """Count forever from `start`."""
    return (start + number for number in endless())


@tool
def get_rows(n: int) -> Any:
    """Return `n` rows, lazily."""
    return ({"row": index} for index in range(n))


@tool
def get_ticks(n: int) -> Any:
    """Tick forever, slowly."""

    def ticks() -> Iterator[int]:
        for number in endless():
            yield number
            time.sleep(0.05)

    return ticks()


@tool
async def get_stream(n: int) -> Any:
    """Stream forever (an async generator)."""

    async def stream() -> AsyncIterator[str]:
        for number in endless():
            await asyncio.sleep(0)
            yield f"chunk {number}"

    return stream()


@tool
async def get_slow_stream(n: int) -> Any:
    """Stream forever, slowly."""

    async def stream() -> AsyncIterator[int]:
        for number in endless():
            yield number
            await asyncio.sleep(0.05)

    return stream()


@tool
async def get_few(n: int) -> Any:
    """Stream `n` items and end."""

    async def stream() -> AsyncIterator[dict[str, int]]:
        for index in range(n):
            yield {"index": index}

    return stream()


@tool
def get_nested(n: int) -> Any:
    """Return a dict holding an endless generator."""
    return {"name": "numbers", "values": endless(), "count": range(10**15)}


class BrokenMapping(dict):  # type: ignore[type-arg]
    def items(self) -> Any:
        msg = "items are broken"
        raise RuntimeError(msg)


@tool
def get_broken(n: int) -> Any:
    """Return a mapping that cannot be read."""
    return BrokenMapping(a=1)


NO_RETRY = ToolRetry(max_attempts=1)


async def test_endless_generators_are_read_up_to_the_item_limit(run_loop: Any) -> None:
    graph = build(
        [cmd("get_numbers", start=5), cmd("get_stream", n=1)],
        [get_numbers, get_stream],
        governance=GovernanceOptions(
            policies={
                "get_numbers": ToolPolicy(max_result_items=50),
                "get_stream": ToolPolicy(max_result_items=30),
            }
        ),
    )
    out = await run_loop(graph, {"user_input": "count"}, config())
    numbers, stream = out["tool_logs"]
    assert numbers["success"] and numbers["truncated"]
    assert numbers["result"] == list(range(5, 55))
    assert stream["success"] and stream["truncated"]
    assert stream["result"] == [f"chunk {index}" for index in range(30)]
    assert any("30 items read, then stopped at its item limit" in n for n in stream["notes"])
    assert out["answer"] == "ok"


async def test_generators_stop_at_the_size_limit(run_loop: Any) -> None:
    graph = build(
        [cmd("get_numbers", start=10**6)],
        [get_numbers],
        governance=GovernanceOptions(policies={"get_numbers": ToolPolicy(max_result_chars=400)}),
    )
    out = await run_loop(graph, {"user_input": "count"}, config())
    [numbers] = out["tool_logs"]
    assert numbers["success"] and numbers["truncated"]
    assert 40 <= len(numbers["result"]) <= 60  # ~400 characters of 8-character items
    assert any("its size limit" in note for note in numbers["notes"])


async def test_slow_generators_stop_at_the_time_limit(run_loop: Any) -> None:
    policy = ToolPolicy(timeout_s=0.6, retry=NO_RETRY)
    graph = build(
        [cmd("get_ticks", n=1), cmd("get_slow_stream", n=2)],
        [get_ticks, get_slow_stream],
        governance=GovernanceOptions(policies={"get_ticks": policy, "get_slow_stream": policy}),
    )
    out = await run_loop(graph, {"user_input": "tick"}, config())  # endless: only a limit ends it
    for record in out["tool_logs"]:
        assert record["success"] and record["truncated"], record
        assert record["result"] == list(range(len(record["result"])))
        # the first tick comes at once; 100 would take 5 s, the item limit (1,000) 50 s
        assert 1 <= len(record["result"]) < 100
        assert any("its time limit" in note for note in record["notes"])


async def test_finite_generators_are_read_whole(run_loop: Any) -> None:
    graph = build([cmd("get_rows", n=3), cmd("get_few", n=2)], [get_rows, get_few])
    out = await run_loop(graph, {"user_input": "rows"}, config())
    rows, few = out["tool_logs"]
    assert rows["result"] == [{"row": 0}, {"row": 1}, {"row": 2}] and not rows["truncated"]
    assert few["result"] == [{"index": 0}, {"index": 1}] and not few["truncated"]
    assert "the tool returned an iterator: 3 items read" in rows["notes"]


async def test_iterators_nested_in_a_result_are_bounded(run_loop: Any) -> None:
    graph = build(
        [cmd("get_nested", n=1)],
        [get_nested],
        governance=GovernanceOptions(policies={"get_nested": ToolPolicy(max_result_chars=10**6)}),
    )
    out = await run_loop(graph, {"user_input": "nested"}, config())
    [nested] = out["tool_logs"]
    assert nested["success"]
    values, count = nested["result"]["values"], nested["result"]["count"]
    assert values[:3] == [0, 1, 2] and values[-1] == UNREAD_MARKER and len(values) == 1001
    assert count[-1] == UNREAD_MARKER and len(count) == 1001


async def test_a_result_that_cannot_be_converted_is_a_failed_record(run_loop: Any) -> None:
    graph = build([cmd("get_broken", n=1), cmd("get_rows", n=1)], [get_broken, get_rows])
    out = await run_loop(graph, {"user_input": "broken"}, config())
    broken, rows = out["tool_logs"]
    assert not broken["success"] and broken["error_type"] == "unserializable_result"
    assert "BrokenMapping" in broken["error"] and "items are broken" in broken["error"]
    assert broken["result"]["error"] == "unserializable_result"
    assert rows["success"] and rows["result"] == [{"row": 0}]
    assert out["answer"] == "ok"


@pytest.mark.parametrize("max_items", [1, 7])
async def test_exactly_the_item_limit_is_not_truncated(max_items: int) -> None:
    graph = build(
        [cmd("get_rows", n=max_items)],
        [get_rows],
        governance=GovernanceOptions(policies={"get_rows": ToolPolicy(max_result_items=max_items)}),
    )
    out = await graph.ainvoke({"user_input": "rows"}, config())
    [rows] = out["tool_logs"]
    assert len(rows["result"]) == max_items and not rows["truncated"]
