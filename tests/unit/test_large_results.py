"""A 50 MB result never blocks the event loop: a heartbeat beside the run keeps beating.

The bench suite reports the real figure (`python -m bench --only stall`); this test only
checks a generous bound, so that a slow shared machine does not fail it.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from langchain_core.tools import StructuredTool, tool

from agentloop import ModelOptions, create_tool_loop
from agentloop.governance.results import UNREAD_TEXT_MARKER
from agentloop.testing import ScriptedChatModel, plan_reply

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


WIDE_STALL_S = 0.5
"""Generous: on a quiet machine the worst beat is late by 10-40 ms (100 ms is the target,
`python -m bench --only stall`); walking these results on the event loop took 1-3 s."""


def wide_loop(values: dict[str, Any]) -> Any:
    def wide_tool(name: str, value: Any) -> Any:
        async def run(n: int) -> Any:
            return value

        return StructuredTool.from_function(
            coroutine=run, name=name, description=f"Read {name} (every row)."
        )

    commands = [{"tool_name": name, "tool_kwargs": {"n": 1}} for name in values]
    return create_tool_loop(
        ScriptedChatModel([plan_reply("execute", commands), plan_reply("response")]),
        [wide_tool(name, value) for name, value in values.items()],
        models=ModelOptions(answer_model=ScriptedChatModel(["done"])),
    )


async def test_a_million_item_result_does_not_stall_the_event_loop(run_loop: Any) -> None:
    wide = {
        "get_wide_dict": {f"key-{n}": n for n in range(1_000_000)},
        "get_wide_list": [{"id": n} for n in range(1_000_000)],
    }
    await run_loop(wide_loop({"get_warm_up": {"a": 1}}), {"user_input": "warm up"})
    for name, value in wide.items():
        worst: list[float] = []
        # the quietest of up to 3 runs: a loop that walks the result stalls in every one
        # (1-3 s); a pause of a loaded machine (a full garbage collection of these
        # millions of objects, another process's burst) in one at most
        for _ in range(3):
            stop, stalls = asyncio.Event(), []
            beating = asyncio.create_task(heartbeat(stop, stalls))
            await asyncio.sleep(0.05)
            try:
                out = await run_loop(wide_loop({name: value}), {"user_input": "export"})
            finally:
                stop.set()
                await beating
            [record] = out["tool_logs"]
            assert record["success"] and record["truncated"], record
            assert len(json.dumps(record["result"])) <= 20_100
            assert len(stalls) > 3
            worst.append(max(stalls))
            if worst[-1] < WIDE_STALL_S:
                break
        assert min(worst) < WIDE_STALL_S, f"{name}: the event loop stalled {worst}s"
