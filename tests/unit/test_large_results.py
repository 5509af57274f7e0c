"""A 50 MB result never blocks the event loop: a heartbeat beside the run keeps beating.

The bench suite reports the real figure (`python -m bench --only stall`); this test only
checks a generous bound, so that a slow shared machine does not fail it.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from langchain_core.tools import tool

from agentloop import ModelOptions, create_tool_loop
from agentloop.testing import ScriptedChatModel, plan_reply
from agentloop.tools.results import UNREAD_TEXT_MARKER

ROW = '{"id": 7, "name": "row", "tags": ["a", "b"]},'
FIFTY_MB = "[" + ROW * (50_000_000 // len(ROW)) + '{"id": 0}]'
MAX_STALL_S = 1.0


@tool
async def get_export(n: int) -> str:
    """Export every row as one JSON document."""
    return FIFTY_MB


@tool
def get_sync_export(n: int) -> str:
    """Export every row as one JSON document (sync)."""
    return FIFTY_MB


async def heartbeat(stop: asyncio.Event, stalls: list[float]) -> None:
    """Beat every 10 ms; record how late each beat is."""
    last = time.perf_counter()
    while not stop.is_set():
        await asyncio.sleep(0.01)
        now = time.perf_counter()
        stalls.append(now - last - 0.01)
        last = now


async def test_a_fifty_megabyte_result_does_not_stall_the_event_loop(run_loop: Any) -> None:
    planner = ScriptedChatModel(
        [
            plan_reply(
                "execute",
                [
                    {"tool_name": "get_export", "tool_kwargs": {"n": 1}},
                    {"tool_name": "get_sync_export", "tool_kwargs": {"n": 2}},
                ],
            ),
            plan_reply("response"),
        ]
    )
    loop = create_tool_loop(
        planner,
        [get_export, get_sync_export],
        models=ModelOptions(answer_model=ScriptedChatModel(["done"])),
    )
    stop, stalls = asyncio.Event(), []
    beating = asyncio.create_task(heartbeat(stop, stalls))
    await asyncio.sleep(0.05)
    try:
        out = await run_loop(loop, {"user_input": "export"})
    finally:
        stop.set()
        await beating
    assert len(stalls) > 3
    assert max(stalls) < MAX_STALL_S, f"the event loop stalled {max(stalls):.2f}s"
    for record in out["tool_logs"]:
        assert record["success"] and record["truncated"]
        assert len(record["result"]) <= 20_000
        rows = json.loads(record["result"])
        assert rows[0] == {"id": 7, "name": "row", "tags": ["a", "b"]}
        assert rows[-1] == UNREAD_TEXT_MARKER.format(read=160_000, total=len(FIFTY_MB))
    assert out["answer"] == "done"
