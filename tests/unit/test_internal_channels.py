"""Edits of the loop's internal channels are refused with a clear error, never ignored."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from agentloop import InputError, ModelOptions, create_tool_loop
from agentloop.testing import ScriptedChatModel, plan_reply


def loop(effects: list[str]) -> Any:
    @tool
    def send_invoice(customer: str) -> str:
        """Send an invoice."""
        effects.append(customer)
        return f"invoice sent to {customer}"

    command = {"tool_name": "send_invoice", "tool_kwargs": {"customer": "bob"}}
    return create_tool_loop(
        ScriptedChatModel([plan_reply("execute", [command]), plan_reply("response")]),
        [send_invoice],
        models=ModelOptions(answer_model=ScriptedChatModel(["invoiced"], repeat_last=True)),
        checkpointer=InMemorySaver(),
        interrupt_after=["execute"],
    )


async def test_editing_round_calls_is_refused_and_names_decision(run_loop: Any) -> None:
    effects: list[str] = []
    graph = loop(effects)
    config = {"configurable": {"thread_id": "t"}}
    await run_loop(graph, {"user_input": "invoice bob"}, config)
    snapshot = graph.get_state(config)
    assert snapshot.next == ("call_tool",)
    calls = snapshot.values["round_calls"]
    calls[0]["kwargs"] = {"customer": "alice"}
    with pytest.raises(InputError, match="edit `decision`"):
        if run_loop.entry == "invoke":
            graph.update_state(config, {"round_calls": calls})
        else:
            await graph.aupdate_state(config, {"round_calls": calls})
    out = await run_loop(graph, None, config)  # the thread goes on, unchanged
    assert out["answer"] == "invoiced"
    assert effects == ["bob"]
