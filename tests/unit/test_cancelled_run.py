"""A run cancelled while a call with side effects runs says so in its state.

LangGraph drops the output of a task whose run is cancelled; the loop leaves the call's
`unknown_outcome` record and the run's `cancelled` status as input to the task's step,
so a read of the thread shows them and a resume goes on from there without paying again.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from agentloop import GovernanceOptions, ModelOptions, ToolPolicy, create_tool_loop
from agentloop.testing import ScriptedChatModel, plan_reply


def payments(paid: list[int], paying: asyncio.Event) -> Any:
    @tool
    async def send_payment(amount: int) -> str:
        """Send a payment (side effect), then wait for the provider's answer."""
        paid.append(amount)
        paying.set()
        if len(paid) == 1:
            await asyncio.Event().wait()  # the first one hangs until its run is cancelled
        return f"paid {amount}"

    def planner(messages: list[Any]) -> str:
        if "round_index: 0" in str(messages[-1].content):
            command = {"tool_name": "send_payment", "tool_kwargs": {"amount": 5}}
            return str(plan_reply("execute", [command]))
        return str(plan_reply("response"))

    return create_tool_loop(
        ScriptedChatModel(responder=planner),
        [send_payment],
        models=ModelOptions(answer_model=ScriptedChatModel(responder=lambda messages: "done")),
        governance=GovernanceOptions(policies={"send_payment": ToolPolicy(idempotent=False)}),
        checkpointer=InMemorySaver(),
    )


@pytest.mark.parametrize("stream_mode", ["values", "custom"])
async def test_a_run_cancelled_during_a_payment_says_so_and_its_resume_does_not_pay_again(
    stream_mode: str,
) -> None:
    """`values` runs the call's task inline, `custom` beside a waiter: both are cancelled."""
    paid: list[int] = []
    paying = asyncio.Event()
    loop = payments(paid, paying)
    config: dict[str, Any] = {"configurable": {"thread_id": "t"}}

    async def run() -> None:
        async for _ in loop.astream({"user_input": "pay"}, config, stream_mode=stream_mode):
            pass

    task = asyncio.create_task(run())
    await paying.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    values = (await loop.aget_state(config)).values
    assert values["status"] == "cancelled"
    assert values["status_reason"] == "the run was cancelled while send_payment ran"
    [record] = values["call_results"].values()
    assert record["error_type"] == "unknown_outcome" and record["status"] == "unknown"
    assert "the run was cancelled while it ran" in record["error"]

    resumed = await loop.ainvoke(None, config)
    assert paid == [5]  # not made again
    assert resumed["status"] == "ok" and resumed["answer"] == "done"
    [logged] = resumed["tool_logs"]
    assert logged["error_type"] == "unknown_outcome" and not logged.get("replayed")
