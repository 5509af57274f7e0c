"""An idempotency key on a run, on PostgreSQL: the same request submitted twice pays once.

`PostgresSaver` under `invoke`, `AsyncPostgresSaver` under `ainvoke`, on the server named
by AGENTLOOP_TEST_POSTGRES_DSN; the ledger is a table of the same database.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from langchain_core.tools import tool
from postgres import postgres_dsn

from agentloop import GovernanceOptions, ModelOptions, ToolPolicy, create_tool_loop
from agentloop.testing import ScriptedChatModel, plan_reply, planning_round

pytestmark = pytest.mark.integration


def planner(messages: list[Any]) -> str:
    if planning_round(messages) != 0:
        return str(plan_reply("response"))
    command = {"tool_name": "send_payment", "tool_kwargs": {"to": "bob", "amount": 10}}
    return str(plan_reply("execute", [command]))


def payment_loop(sent: list[str], saver: Any, seconds: float = 0.0) -> Any:
    lock = threading.Lock()

    @tool
    def send_payment(to: str, amount: int) -> str:
        """Send a payment (a side effect)."""
        time.sleep(seconds)
        with lock:
            sent.append(f"{to}:{amount}")
        return f"paid {amount} to {to}"

    return create_tool_loop(
        ScriptedChatModel(responder=planner),
        [send_payment],
        models=ModelOptions(answer_model=ScriptedChatModel(responder=lambda messages: "paid")),
        governance=GovernanceOptions(policies={"send_payment": ToolPolicy(idempotent=False)}),
        checkpointer=saver,
    )


@asynccontextmanager
async def postgres_saver(entry: str) -> AsyncIterator[Any]:
    """`PostgresSaver` for `invoke`, `AsyncPostgresSaver` for `ainvoke`."""
    dsn = postgres_dsn()
    if entry == "invoke":
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(dsn) as saver:
            saver.setup()
            yield saver
    else:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        async with AsyncPostgresSaver.from_conn_string(dsn) as asaver:
            await asaver.setup()
            yield asaver


def thread() -> dict[str, Any]:
    return {"configurable": {"thread_id": uuid.uuid4().hex}}


def payment_records(out: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in out["tool_logs"] if r["tool_name"] == "send_payment"]


async def test_the_same_key_twice_in_sequence_pays_once(run_loop: Any) -> None:
    sent: list[str] = []
    request = {"user_input": "pay bob 10", "idempotency_key": f"order-{uuid.uuid4()}"}
    async with postgres_saver(run_loop.entry) as saver:
        graph = payment_loop(sent, saver)
        first = await run_loop(graph, request, thread())
        second = await run_loop(graph, request, thread())
    assert sent == ["bob:10"]
    assert not payment_records(first)[0].get("replayed")
    [replayed] = payment_records(second)
    assert replayed["replayed"] is True and replayed["result"] == "paid 10 to bob"


async def test_the_same_key_twice_at_once_pays_once(run_loop: Any) -> None:
    sent: list[str] = []
    request = {"user_input": "pay bob 10", "idempotency_key": f"order-{uuid.uuid4()}"}
    async with postgres_saver(run_loop.entry) as saver:
        graph = payment_loop(sent, saver, seconds=0.5)
        outs = await asyncio.gather(*(run_loop(graph, request, thread()) for _ in range(2)))
    assert sent == ["bob:10"]
    records = [record for out in outs for record in payment_records(out)]
    assert sum(not r.get("replayed") for r in records) == 1
    assert all(r["success"] and r["result"] == "paid 10 to bob" for r in records)


async def test_different_keys_pay_twice(run_loop: Any) -> None:
    sent: list[str] = []
    async with postgres_saver(run_loop.entry) as saver:
        graph = payment_loop(sent, saver)
        for _ in range(2):
            request = {"user_input": "pay bob 10", "idempotency_key": f"order-{uuid.uuid4()}"}
            await run_loop(graph, request, thread())
    assert sent == ["bob:10", "bob:10"]
