"""A loop as a user deploys it: `langgraph dev` serves `graph`, compiled without a checkpointer.

Copied as `app.py` into a temporary app folder beside a `langgraph.json` by
`test_server_durability.py`. `send_payment` appends each payment it makes to the file
named by `AGENTLOOP_TEST_EFFECTS` (with fsync), so the test counts side effects across
server processes; with `AGENTLOOP_TEST_HOLD=N` the N-th payment of the process holds
its run right after its effect, until the server is killed or the run cancelled;
`AGENTLOOP_TEST_PAY_SECONDS` makes each payment take that long before its effect. With
`AGENTLOOP_TEST_GO` naming a file, a turn first calls `wait_for_go` (read-only), which
waits until that file exists, and pays in its next round. With `AGENTLOOP_TEST_SWEEP`
set, the ledger keeps nothing of a deleted thread, and every run's start sweeps it.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from langchain_core.tools import tool

from agentloop import GovernanceOptions, ModelOptions, ToolPolicy, create_tool_loop
from agentloop.durability import LedgerRetention
from agentloop.testing import ScriptedChatModel, plan_reply, planning_round

EFFECTS = Path(os.environ["AGENTLOOP_TEST_EFFECTS"])
HOLD = int(os.environ.get("AGENTLOOP_TEST_HOLD") or 0)
PAY_SECONDS = float(os.environ.get("AGENTLOOP_TEST_PAY_SECONDS", "0"))
GO = Path(os.environ["AGENTLOOP_TEST_GO"]) if os.environ.get("AGENTLOOP_TEST_GO") else None
SWEEP = (
    LedgerRetention(grace_s=0, keys_s=0, every_s=0)
    if os.environ.get("AGENTLOOP_TEST_SWEEP")
    else LedgerRetention()
)
paid: list[str] = []


def _append(line: str) -> None:
    with EFFECTS.open("a", encoding="utf-8") as handle:
        handle.write(line + "\n")
        handle.flush()
        os.fsync(handle.fileno())


@tool
async def send_payment(amount: int) -> str:
    """Send a payment (side effect)."""
    await asyncio.sleep(PAY_SECONDS)  # a provider taking its time
    await asyncio.to_thread(_append, f"payment:{amount}")
    paid.append(f"payment:{amount}")
    if len(paid) == HOLD:
        await asyncio.Event().wait()  # until the server is killed or the run cancelled
    return f"paid {amount}"


@tool
async def wait_for_go() -> str:
    """Wait until the test says go (no side effect)."""
    while GO is not None and not await asyncio.to_thread(GO.exists):
        await asyncio.sleep(0.05)
    return "go"


def planner(messages: list[Any]) -> str:
    payment = {"tool_name": "send_payment", "tool_kwargs": {"amount": 5}}
    if planning_round(messages) == 0:
        first = {"tool_name": "wait_for_go", "tool_kwargs": {}} if GO else payment
        return str(plan_reply("execute", [first]))
    if GO and planning_round(messages) == 1:
        return str(plan_reply("execute", [payment]))
    return str(plan_reply("response"))


graph = create_tool_loop(
    ScriptedChatModel(responder=planner),
    [send_payment, wait_for_go],
    models=ModelOptions(
        answer_model=ScriptedChatModel(responder=lambda messages: "payment handled")
    ),
    governance=GovernanceOptions(
        policies={
            "send_payment": ToolPolicy(idempotent=False, timeout_s=600),
            "wait_for_go": ToolPolicy(idempotent=True, timeout_s=600),
        },
        ledger_retention=SWEEP,
    ),
    name="payments",
)
