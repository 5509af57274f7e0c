"""Streaming dispatch starts only what will be reported, within the per-round cap."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

from langchain_core.tools import tool

from agentloop import ModelOptions, create_tool_loop
from agentloop.testing import ScriptedChatModel


class Counter:
    def __init__(self) -> None:
        self.started = 0
        self.lock = threading.Lock()

    def tool(self) -> Any:
        @tool
        async def get_item(item_id: int) -> str:
            """Read one item."""
            with self.lock:
                self.started += 1
            await asyncio.sleep(0)
            return f"item {item_id}"

        return get_item


def huge_plan(commands: int) -> str:
    plan = {
        "next_action": "execute",
        "execution_commands": [
            {"tool_name": "get_item", "tool_kwargs": {"item_id": n}} for n in range(commands)
        ],
    }
    return json.dumps(plan)


async def test_a_huge_plan_cut_mid_stream_runs_at_most_the_cap_and_reports_it(
    run_loop: Any,
) -> None:
    counter = Counter()
    plan = huge_plan(2000)  # about 100,000 characters: past max_plan_chars (32,000)
    planner = ScriptedChatModel([plan], repeat_last=True, chunk_size=400)
    answerer = ScriptedChatModel(["unused"], repeat_last=True)
    graph = create_tool_loop(planner, [counter.tool()], models=ModelOptions(answer_model=answerer))
    out = await run_loop(graph, {"user_input": "list them all"})
    assert out["status"] == "planner_failed"
    assert planner.request_count == 3  # the plan was asked again twice
    assert 0 < counter.started <= 64  # the per-round cap, across every reply
    records = out["tool_logs"]
    assert len(records) == counter.started  # every call that started has a record
    assert all(r["tool_name"] == "get_item" for r in records)
    assert all(r["success"] or r["error_type"] == "cancelled" for r in records)
    assert "No tool was consulted" not in out["answer"]
    assert "tool_logs" in out["answer"]
    assert answerer.request_count == 0  # no answer is made up from a rejected plan
