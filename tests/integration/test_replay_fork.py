"""Replaying and forking a thread from its history never repeats a call, unless asked to.

On a real SQLite file and in memory, through invoke and ainvoke: every snapshot of a
finished run is replayed, a fork that edits the request is run, a fork that edits a
call's arguments runs the new call only, and `LoopContext(reexecute=True)` runs again.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from agentloop import GovernanceOptions, LoopContext, ModelOptions, ToolPolicy, create_tool_loop
from agentloop.testing import ScriptedChatModel, plan_reply, planning_round

pytestmark = pytest.mark.integration


def planner(messages: list[Any]) -> str:
    if planning_round(messages) != 0:
        return str(plan_reply("response"))
    commands = [
        {"tool_name": "get_balance", "tool_kwargs": {"customer": "bob"}},
        {"tool_name": "send_invoice", "tool_kwargs": {"customer": "bob"}},
    ]
    return str(plan_reply("execute", commands))


class Thread:
    """A loop on one checkpointed thread, driven through invoke or ainvoke."""

    def __init__(self, checkpointer: Any, entry: str) -> None:
        self.effects: Counter[str] = Counter()
        self.entry = entry

        @tool
        def send_invoice(customer: str) -> str:
            """Send an invoice (side effect)."""
            self.effects[f"invoice:{customer}"] += 1
            return f"invoice sent to {customer}"

        @tool
        async def get_balance(customer: str) -> str:
            """Read a balance."""
            self.effects[f"balance:{customer}"] += 1
            return f"{customer} owes 5"

        self.graph = create_tool_loop(
            ScriptedChatModel(responder=planner),
            [send_invoice, get_balance],
            models=ModelOptions(
                answer_model=ScriptedChatModel(responder=lambda messages: "invoiced")
            ),
            governance=GovernanceOptions(
                policies={"send_invoice": ToolPolicy(idempotent=False, concurrency_safe=False)}
            ),
            checkpointer=checkpointer,
        )
        self.config: dict[str, Any] = {"configurable": {"thread_id": "billing"}}

    async def invoke(self, payload: Any, config: Any = None, **kwargs: Any) -> Any:
        config = config or self.config
        if self.entry == "invoke":
            return await asyncio.to_thread(self.graph.invoke, payload, config, **kwargs)
        return await self.graph.ainvoke(payload, config, **kwargs)

    async def history(self) -> list[Any]:
        if self.entry == "invoke":
            return list(self.graph.get_state_history(self.config))
        return [snapshot async for snapshot in self.graph.aget_state_history(self.config)]

    async def update(self, config: Any, values: dict[str, Any]) -> Any:
        if self.entry == "invoke":
            return self.graph.update_state(config, values)
        return await self.graph.aupdate_state(config, values)


@pytest.fixture(params=["invoke", "ainvoke"])
def entry(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=["memory", "sqlite"])
async def thread(
    request: pytest.FixtureRequest, entry: str, tmp_path: Path
) -> AsyncIterator[Thread]:
    if request.param == "memory":
        yield Thread(InMemorySaver(), entry)
        return
    path = str(tmp_path / "checkpoints.sqlite")
    if entry == "invoke":
        with SqliteSaver.from_conn_string(path) as saver:
            yield Thread(saver, entry)
        return
    async with AsyncSqliteSaver.from_conn_string(path) as saver:
        yield Thread(saver, entry)


FIRST_RUN = Counter({"balance:bob": 1, "invoice:bob": 1})


def snapshot_before(history: list[Any], node: str) -> Any:
    return next(snapshot for snapshot in history if snapshot.next == (node,))


async def test_replaying_every_snapshot_repeats_nothing(thread: Thread) -> None:
    out = await thread.invoke({"user_input": "invoice bob"})
    assert out["answer"] == "invoiced" and thread.effects == FIRST_RUN
    history = await thread.history()
    assert len(history) > 5
    replayed_records = 0
    for snapshot in history[1:]:  # every snapshot but the final one
        out = await thread.invoke(None, snapshot.config)
        assert out["answer"] == "invoiced"
        replayed_records += sum(bool(r.get("replayed")) for r in out["tool_logs"])
        assert all(r["success"] for r in out["tool_logs"])
    assert thread.effects == FIRST_RUN
    assert replayed_records >= 2  # replays from before the calls say so


async def test_a_fork_that_edits_the_request_repeats_nothing(thread: Thread) -> None:
    await thread.invoke({"user_input": "invoice bob"})
    before_execute = snapshot_before(await thread.history(), "execute")
    forked = await thread.update(before_execute.config, {"user_extra_requirement": "be brief"})
    out = await thread.invoke(None, forked)
    assert thread.effects == FIRST_RUN
    assert [r["replayed"] for r in out["tool_logs"]] == [True, True]


async def test_a_fork_that_edits_a_calls_arguments_runs_the_new_call(thread: Thread) -> None:
    await thread.invoke({"user_input": "invoice bob"})
    before_execute = snapshot_before(await thread.history(), "execute")
    decision = before_execute.values["decision"]
    decision["execution_commands"][1]["tool_kwargs"]["customer"] = "alice"
    forked = await thread.update(before_execute.config, {"decision": decision})
    out = await thread.invoke(None, forked)
    assert thread.effects == FIRST_RUN + Counter({"invoice:alice": 1})
    balance, invoice = out["tool_logs"]
    assert balance["replayed"] is True
    assert invoice.get("replayed") is not True and invoice["result"] == "invoice sent to alice"


async def test_reexecute_runs_the_calls_again_on_purpose(thread: Thread) -> None:
    await thread.invoke({"user_input": "invoice bob"})
    before_execute = snapshot_before(await thread.history(), "execute")
    out = await thread.invoke(None, before_execute.config, context=LoopContext(reexecute=True))
    assert thread.effects == FIRST_RUN + FIRST_RUN
    assert not any(r.get("replayed") for r in out["tool_logs"])


async def test_a_new_request_on_the_thread_runs_again(thread: Thread) -> None:
    await thread.invoke({"user_input": "invoice bob"})
    await thread.invoke({"user_input": "invoice bob"})
    assert thread.effects == FIRST_RUN + FIRST_RUN
