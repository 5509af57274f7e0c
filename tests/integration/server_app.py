"""A loop as a user deploys it: `langgraph dev` serves `graph`, compiled without a checkpointer.

Copied as `app.py` into a temporary app folder beside a `langgraph.json` by
`test_server_durability.py`. `send_payment` appends each payment it makes to the file
named by `AGENTLOOP_TEST_EFFECTS` (with fsync), so the test counts side effects across
server processes; with `AGENTLOOP_TEST_HOLD=1` the first payment of the process holds
its run right after its effect, until the server is killed or the run cancelled;
`AGENTLOOP_TEST_PAY_SECONDS` makes each payment take that long before its effect.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from langchain_core.tools import tool

from agentloop import GovernanceOptions, ModelOptions, ToolPolicy, create_tool_loop
from agentloop.testing import ScriptedChatModel, plan_reply

EFFECTS = Path(os.environ["AGENTLOOP_TEST_EFFECTS"])
HOLD = os.environ.get("AGENTLOOP_TEST_HOLD") == "1"
PAY_SECONDS = float(os.environ.get("AGENTLOOP_TEST_PAY_SECONDS", "0"))
held: list[str] = []


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
    if HOLD and not held:
        held.append(f"payment:{amount}")
        await asyncio.Event().wait()  # until the server is killed or the run cancelled
    return f"paid {amount}"


def planner(messages: list[Any]) -> str:
    if "round_index: 0" in str(messages[-1].content):
        command = {"tool_name": "send_payment", "tool_kwargs": {"amount": 5}}
        return str(plan_reply("execute", [command]))
    return str(plan_reply("response"))


graph = create_tool_loop(
    ScriptedChatModel(responder=planner),
    [send_payment],
    models=ModelOptions(
        answer_model=ScriptedChatModel(responder=lambda messages: "payment handled")
    ),
    governance=GovernanceOptions(
        policies={"send_payment": ToolPolicy(idempotent=False, timeout_s=600)}
    ),
    name="payments",
)
