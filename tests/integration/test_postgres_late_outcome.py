"""The late outcome of a timed-out write lands in the ledger on the real PostgreSQL saver."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from typing import Any

import pytest
from langchain_core.tools import tool
from postgres import postgres_dsn

from agentloop import GovernanceOptions, ModelOptions, ToolPolicy, create_tool_loop
from agentloop.durability import LedgerKey, LedgerOp, ledger_for
from agentloop.governance.late import LATE_NOTE
from agentloop.testing import ScriptedChatModel, plan_reply

pytestmark = pytest.mark.integration


def _loop(saver: Any, release: threading.Event) -> Any:
    @tool
    def send_payment(account: str) -> str:
        """Pay an account (side effect), slowly."""
        release.wait(10)
        return f"paid {account}"

    planner = ScriptedChatModel(
        [
            plan_reply("execute", [{"tool_name": "send_payment", "tool_kwargs": {"account": "a"}}]),
            plan_reply("response"),
        ]
    )
    return create_tool_loop(
        planner,
        [send_payment],
        models=ModelOptions(answer_model=ScriptedChatModel(["checked"])),
        governance=GovernanceOptions(policies={"send_payment": ToolPolicy(timeout_s=0.3)}),
        checkpointer=saver,
    )


def _late_outcome(entry: Any) -> dict[str, Any] | None:
    if entry is not None and entry.outcome and LATE_NOTE in entry.outcome.get("notes", []):
        outcome: dict[str, Any] = entry.outcome
        return outcome
    return None


def test_late_outcome_on_postgres_sync() -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    release = threading.Event()
    with PostgresSaver.from_conn_string(postgres_dsn()) as saver:
        saver.setup()
        thread_id = uuid.uuid4().hex
        out = _loop(saver, release).invoke(
            {"user_input": "pay a"}, {"configurable": {"thread_id": thread_id}}
        )
        [record] = out["tool_logs"]
        assert record["error_type"] == "unknown_outcome"
        key = LedgerKey(thread_id, "", record["position_key"])
        assert ledger_for(saver).get(key).outcome["error_type"] == "unknown_outcome"
        release.set()
        for _ in range(400):
            if (late := _late_outcome(ledger_for(saver).get(key))) is not None:
                break
            time.sleep(0.05)
        assert late is not None and late["success"] and late["result"] == "paid a"


def test_late_outcome_on_postgres_async() -> None:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    async def scenario() -> None:
        release = threading.Event()
        async with AsyncPostgresSaver.from_conn_string(postgres_dsn()) as saver:
            await saver.setup()
            thread_id = uuid.uuid4().hex
            out = await _loop(saver, release).ainvoke(
                {"user_input": "pay a"}, {"configurable": {"thread_id": thread_id}}
            )
            [record] = out["tool_logs"]
            assert record["error_type"] == "unknown_outcome"
            key = LedgerKey(thread_id, "", record["position_key"])
            release.set()
            late = None
            for _ in range(400):
                entry = await ledger_for(saver).operation(LedgerOp("get", key))
                late = _late_outcome(entry)
                if late is not None:
                    break
                await asyncio.sleep(0.05)
            assert late is not None and late["success"] and late["result"] == "paid a"

    asyncio.run(scenario())
