"""Run a loop whose async tools ignore their cancellation; print its records as JSON.

    python stubborn_tool_worker.py invoke|ainvoke

Run by `test_stubborn_tools.py` in a subprocess with a watchdog: a loop that waits for
such a tool forever hangs this process, not the test run.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from agentloop import GovernanceOptions, ModelOptions, ToolPolicy, ToolRetry, create_tool_loop
from agentloop.durability import LedgerKey, ledger_for
from agentloop.governance.late import LATE_NOTE
from agentloop.governance.threads import ToolThreads
from agentloop.testing import ScriptedChatModel, plan_reply

effects: list[str] = []


async def stubborn(what: str) -> str:
    """Work for 5 s, ignoring every cancellation."""
    deadline = asyncio.get_running_loop().time() + 5.0
    while asyncio.get_running_loop().time() < deadline:
        try:
            await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            continue
    effects.append(what)
    return f"{what} done"


@tool
async def get_report(n: int) -> str:
    """Build a report (read-only), ignoring cancellation."""
    return await stubborn(f"report:{n}")


@tool
async def send_order(item: str) -> str:
    """Send an order (side effect), ignoring cancellation."""
    return await stubborn(f"order:{item}")


SAVER = InMemorySaver()


def late_outcome(position_key: str) -> dict[str, Any] | None:
    entry = ledger_for(SAVER).get(LedgerKey("stubborn", "", position_key))
    if entry is not None and entry.outcome and LATE_NOTE in entry.outcome.get("notes", []):
        return entry.outcome
    return None


def build() -> Any:
    once = ToolPolicy(timeout_s=0.3, retry=ToolRetry(max_attempts=1))
    planner = ScriptedChatModel(
        [
            plan_reply(
                "execute",
                [
                    {"tool_name": "get_report", "tool_kwargs": {"n": 1}},
                    {"tool_name": "send_order", "tool_kwargs": {"item": "book"}},
                ],
            ),
            plan_reply("execute", [{"tool_name": "get_report", "tool_kwargs": {"n": 2}}]),
            plan_reply("response"),
        ]
    )
    return create_tool_loop(
        planner,
        [get_report, send_order],
        models=ModelOptions(answer_model=ScriptedChatModel(["the run went on"])),
        governance=GovernanceOptions(
            policies={"get_report": once, "send_order": once},
            tool_threads=ToolThreads(max_abandoned=1, cancel_grace_s=0.2),
        ),
        checkpointer=SAVER,
    )


def main() -> None:
    entry = sys.argv[1]
    events: list[dict[str, Any]] = []
    loop = build()
    config = {"configurable": {"thread_id": "stubborn"}}
    payload = {"user_input": "report and order"}
    final: dict[str, Any] = {}
    if entry == "invoke":
        for mode, chunk in loop.stream(payload, config, stream_mode=["custom", "values"]):
            if mode == "custom":
                events.append(chunk)
            else:
                final = chunk
    else:

        async def run() -> dict[str, Any]:
            last: dict[str, Any] = {}
            async for mode, chunk in loop.astream(
                payload, config, stream_mode=["custom", "values"]
            ):
                if mode == "custom":
                    events.append(chunk)
                else:
                    last = chunk
            order = last["tool_logs"][1]["position_key"]
            for _ in range(200):  # the abandoned call runs on, on this event loop
                if late_outcome(order) is not None:
                    break
                await asyncio.sleep(0.05)
            return last

        final = asyncio.run(run())
    order_key = final["tool_logs"][1]["position_key"]
    for _ in range(200):  # under invoke, on the event loop its call task left running
        if late_outcome(order_key) is not None:
            break
        time.sleep(0.05)
    print(
        json.dumps(
            {
                "answer": final.get("answer"),
                "records": [
                    {key: record.get(key) for key in ("tool_name", "error_type", "error")}
                    for record in final.get("tool_logs", [])
                ],
                "abandoned": [e for e in events if e["type"] == "tool_abandoned"],
                "late": late_outcome(order_key),
                "effects": effects,
            }
        )
    )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
