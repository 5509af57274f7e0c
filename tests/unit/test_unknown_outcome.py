"""A timed-out call with side effects whose work may still complete is `unknown_outcome`,
never a clean failure; the ledger records its late outcome when it arrives."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from agentloop import GovernanceOptions, ModelOptions, ToolPolicy, as_tool, create_tool_loop
from agentloop.durability import LedgerKey, ledger_for
from agentloop.governance.late import LATE_NOTE
from agentloop.testing import ScriptedChatModel, plan_reply, planning_round


def config() -> dict[str, Any]:
    return {"configurable": {"thread_id": f"t-{time.monotonic_ns()}"}}


async def late_entry(saver: Any, thread_id: str, position_key: str) -> dict[str, Any]:
    """Wait (bounded) for the ledger entry of a call to hold its late outcome."""
    key = LedgerKey(thread_id, "", position_key)
    for _ in range(400):
        entry = ledger_for(saver).get(key)
        if entry is not None and entry.outcome and LATE_NOTE in entry.outcome.get("notes", []):
            return entry.outcome
        await asyncio.sleep(0.05)
    entry = ledger_for(saver).get(key)
    raise AssertionError(f"no late outcome in the ledger: {entry}")


async def test_a_timed_out_sync_write_is_unknown_and_its_late_outcome_recorded(
    run_loop: Any, planning_for: Callable[..., dict[str, Any]]
) -> None:
    paid: list[str] = []
    release = threading.Event()

    @tool
    def send_payment(account: str) -> str:
        """Pay an account (side effect), slowly."""
        release.wait(5)
        paid.append(account)
        return f"paid {account}"

    planner = ScriptedChatModel(
        [
            plan_reply("execute", [{"tool_name": "send_payment", "tool_kwargs": {"account": "a"}}]),
            plan_reply("response"),
        ]
    )
    saver = InMemorySaver()
    loop = create_tool_loop(
        planner,
        [send_payment],
        models=ModelOptions(answer_model=ScriptedChatModel(["checked"])),
        governance=GovernanceOptions(policies={"send_payment": ToolPolicy(timeout_s=0.2)}),
        checkpointer=saver,
        **planning_for(),
    )
    run_config = config()
    out = await run_loop(loop, {"user_input": "pay a"}, run_config)
    [record] = out["tool_logs"]
    assert not record["success"] and record["error_type"] == "unknown_outcome"
    assert "may still take effect" in record["error"]
    assert "must not be repeated blindly" in record["error"]
    assert record["result"]["suggestion"].startswith("The call may or may not have taken effect")
    second_plan = "\n".join(str(m.content) for m in planner.requests[1])
    assert "must not be repeated blindly" in str(second_plan)  # the planner is told
    assert paid == []
    release.set()
    late = await late_entry(saver, run_config["configurable"]["thread_id"], record["position_key"])
    assert paid == ["a"]
    assert late["success"] and late["result"] == "paid a" and late["error_type"] == ""


async def test_a_timed_out_sub_agent_runs_to_its_end_and_records_its_late_outcome(
    run_loop: Any, planning_for: Callable[..., dict[str, Any]]
) -> None:
    invoiced: list[str] = []
    release = threading.Event()

    @tool
    def send_invoice(customer: str) -> str:
        """Send an invoice (side effect), slowly."""
        release.wait(5)
        invoiced.append(customer)
        return "sent"

    child = create_tool_loop(
        ScriptedChatModel(
            responder=lambda messages: str(
                plan_reply("execute", [{"tool_name": "send_invoice",
                                        "tool_kwargs": {"customer": "bob"}}])
                if planning_round(messages) == 0
                else plan_reply("response")
            )
        ),
        [send_invoice],
        models=ModelOptions(
            answer_model=ScriptedChatModel(responder=lambda messages: "invoice sent")
        ),
        governance=GovernanceOptions(policies={"send_invoice": ToolPolicy(idempotent=False)}),
        **planning_for(),
    )  # fmt: skip
    saver = InMemorySaver()
    parent = create_tool_loop(
        ScriptedChatModel(
            [
                plan_reply("execute", [{"tool_name": "clerk",
                                        "tool_kwargs": {"user_input": "invoice bob"}}]),
                plan_reply("response"),
            ]
        ),
        [as_tool(child, name="clerk", description="Invoices.")],
        models=ModelOptions(answer_model=ScriptedChatModel(["parent done"])),
        governance=GovernanceOptions(policies={"clerk": ToolPolicy(timeout_s=0.3)}),
        checkpointer=saver,
        **planning_for(),
    )  # fmt: skip
    run_config = config()
    out = await run_loop(parent, {"user_input": "go"}, run_config)
    [record] = out["tool_logs"]
    assert record["error_type"] == "unknown_outcome" and invoiced == []
    assert "runs on" in record["error"]
    release.set()
    late = await late_entry(saver, run_config["configurable"]["thread_id"], record["position_key"])
    assert invoiced == ["bob"]
    assert late["success"] and late["result"] == "invoice sent"


async def test_a_cancelled_async_write_is_unknown_and_a_read_a_plain_timeout(
    run_loop: Any, planning_for: Callable[..., dict[str, Any]]
) -> None:
    started: list[str] = []

    @tool
    async def transfer_funds(account: str) -> str:
        """Move money (side effect): it starts at once, then waits for the bank."""
        started.append(account)
        await asyncio.sleep(5)
        return "moved"

    @tool
    async def get_balance(account: str) -> str:
        """Read a balance, slowly."""
        await asyncio.sleep(5)
        return "100"

    planner = ScriptedChatModel(
        [
            plan_reply(
                "execute",
                [
                    {"tool_name": "transfer_funds", "tool_kwargs": {"account": "a"}},
                    {"tool_name": "get_balance", "tool_kwargs": {"account": "a"}},
                ],
            ),
            plan_reply("response"),
        ]
    )
    write = ToolPolicy(read_only=False, idempotent=False, timeout_s=0.2, retry=None)
    read = ToolPolicy(read_only=True, idempotent=True, timeout_s=0.2, retry=None)
    loop = create_tool_loop(
        planner,
        [transfer_funds, get_balance],
        models=ModelOptions(answer_model=ScriptedChatModel(["checked"])),
        governance=GovernanceOptions(policies={"transfer_funds": write, "get_balance": read}),
        checkpointer=InMemorySaver(),
        **planning_for(),
    )
    out = await run_loop(loop, {"user_input": "move and read"}, config())
    transfer, balance = out["tool_logs"]
    # the write was cancelled at its timeout: it stopped, but it may have taken effect
    assert not transfer["success"] and transfer["error_type"] == "unknown_outcome"
    assert "did not finish within 0.2s and was cancelled" in transfer["error"]
    assert "may have taken effect before it stopped" in transfer["error"]
    assert "must not be repeated blindly" in transfer["error"]
    assert transfer["attempts"] == 1 and started == ["a"]
    assert "must not be repeated blindly" in "\n".join(str(m.content) for m in planner.requests[1])
    # a read that timed out is a plain timeout
    assert balance["error_type"] == "timeout"
    assert "did not finish within 0.2s and was cancelled" in balance["error"]
