"""A 50 MB result never blocks the event loop: it is converted while the loop runs on.

A probe inside the result proves it: converting it asks the event loop for an answer,
which a loop that is not blocked gives at once; a conversion on the loop would hold the
answer back, and the probe says so. The bench suite reports how late a heartbeat beside
the run gets (`python -m bench --only stall`); the tests read no clock.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

from langchain_core.tools import StructuredTool, tool

from agentloop import ModelOptions, create_tool_loop
from agentloop.governance.results import UNREAD_TEXT_MARKER
from agentloop.testing import ScriptedChatModel, plan_reply

ROW = '{"id": 7, "name": "row", "tags": ["a", "b"]},'
FIFTY_MB = "[" + ROW * (50_000_000 // len(ROW)) + '{"id": 0}]'
ANSWER_GUARD_S = 20.0
"""How long a probe waits for the event loop: only a loop blocked by the conversion (or
a hang) leaves it unanswered that long."""


class LoopProbe:
    """A member of a result whose conversion waits for an answer from the event loop.

    Nothing converts it but its `repr` (the last resort for an unknown object), which
    asks and waits; `answer_probes`, a task on the test's event loop, answers. Converted
    in a thread, the probe is answered at once, however slow the machine; converted on the
    event loop, it cannot be answered until the conversion ends, and it records `stalled`.
    """

    __slots__ = ("answered", "asked", "stalled")

    def __init__(self) -> None:
        self.asked = threading.Event()
        self.answered = threading.Event()
        self.stalled = False

    def __repr__(self) -> str:
        if not self.asked.is_set():
            self.asked.set()
            self.stalled = not self.answered.wait(ANSWER_GUARD_S)
        return "<probe>"

    def __deepcopy__(self, memo: dict[int, Any]) -> LoopProbe:
        return self


async def answer_probes(probes: list[LoopProbe], stop: asyncio.Event) -> None:
    """On the test's event loop: answer each probe that asks, until `stop`."""
    while not stop.is_set():
        for probe in probes:
            if probe.asked.is_set():
                probe.answered.set()
        await asyncio.sleep(0.001)


async def run_answering(run_loop: Any, graph: Any, probes: list[LoopProbe]) -> Any:
    """Run the graph with the probes answered beside it; check each was converted in time."""
    stop = asyncio.Event()
    answering = asyncio.create_task(answer_probes(probes, stop))
    try:
        out = await run_loop(graph, {"user_input": "export"})
    finally:
        stop.set()
        await answering
    assert all(probe.asked.is_set() for probe in probes), "a probe was never converted"
    assert not any(probe.stalled for probe in probes), "the conversion blocked the event loop"
    return out


@tool
async def get_export(n: int) -> str:
    """Export every row as one JSON document."""
    return FIFTY_MB


@tool
def get_sync_export(n: int) -> str:
    """Export every row as one JSON document (sync)."""
    return FIFTY_MB


async def test_a_fifty_megabyte_result_does_not_stall_the_event_loop(run_loop: Any) -> None:
    probe = LoopProbe()

    @tool
    async def get_probed_export(n: int) -> Any:
        """Export every row, with the export's own marker."""
        return {"probe": probe, "export": FIFTY_MB}

    planner = ScriptedChatModel(
        [
            plan_reply(
                "execute",
                [
                    {"tool_name": "get_export", "tool_kwargs": {"n": 1}},
                    {"tool_name": "get_sync_export", "tool_kwargs": {"n": 2}},
                    {"tool_name": "get_probed_export", "tool_kwargs": {"n": 3}},
                ],
            ),
            plan_reply("response"),
        ]
    )
    loop = create_tool_loop(
        planner,
        [get_export, get_sync_export, get_probed_export],
        models=ModelOptions(answer_model=ScriptedChatModel(["done"])),
    )
    out = await run_answering(run_loop, loop, [probe])
    *exports, probed = out["tool_logs"]
    for record in exports:
        assert record["success"] and record["truncated"]
        assert len(record["result"]) <= 20_000
        rows = json.loads(record["result"])
        assert rows[0] == {"id": 7, "name": "row", "tags": ["a", "b"]}
        assert rows[-1] == UNREAD_TEXT_MARKER.format(read=160_000, total=len(FIFTY_MB))
    assert probed["success"] and probed["truncated"]
    assert probed["result"]["probe"] == "<probe>"
    assert out["answer"] == "done"


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
    probes = [LoopProbe(), LoopProbe()]
    wide = {
        "get_wide_dict": {"probe": probes[0], **{f"key-{n}": n for n in range(1_000_000)}},
        "get_wide_list": [probes[1], *({"id": n} for n in range(1_000_000))],
    }
    out = await run_answering(run_loop, wide_loop(wide), probes)
    for record in out["tool_logs"]:
        assert record["success"] and record["truncated"], record
        assert len(json.dumps(record["result"])) <= 20_100
    wide_dict, wide_list = (record["result"] for record in out["tool_logs"])
    assert wide_dict["probe"] == "<probe>" and wide_list[0] == "<probe>"
