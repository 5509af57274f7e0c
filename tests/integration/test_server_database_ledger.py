"""The ledger in the LangGraph server's PostgreSQL database (`POSTGRES_URI`), on a real one.

LangGraph Server's own checkpointer only runs inside the licensed server; a saver of the
same shape stands in for it (a subclass of `InMemorySaver` from a `langgraph_runtime_*`
module). The loop is run as the server runs it: a copy of the compiled graph with the
server's checkpointer, `POSTGRES_URI` in the environment.
"""

from __future__ import annotations

import os
import threading
import uuid
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from agentloop import GovernanceOptions, ModelOptions, ToolPolicy, create_tool_loop
from agentloop.durability import LedgerKey, PostgresUriLedger, ledger_for
from agentloop.testing import ScriptedChatModel, plan_reply, planning_round

pytestmark = pytest.mark.integration

POSTGRES_DSN = os.environ.get("AGENTLOOP_TEST_POSTGRES_DSN", "")

ServerSaver: type[InMemorySaver] = type(
    "Checkpointer", (InMemorySaver,), {"__module__": "langgraph_runtime_postgres.checkpoint"}
)


@pytest.fixture
def dsn() -> str:
    reason = ""
    if not POSTGRES_DSN:
        reason = (
            "AGENTLOOP_TEST_POSTGRES_DSN is not set (.ci/run sets it after starting PostgreSQL)"
        )
    else:
        try:
            import psycopg

            psycopg.connect(POSTGRES_DSN, connect_timeout=5).close()
        except Exception as error:  # the reason is shown in the skip message
            reason = f"PostgreSQL at AGENTLOOP_TEST_POSTGRES_DSN is not reachable: {error}"
    if reason:
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return POSTGRES_DSN


def payments_loop(effects: list[str]) -> Any:
    @tool
    def send_payment(amount: int) -> str:
        """Send a payment (side effect)."""
        effects.append(f"payment:{amount}")
        return f"paid {amount}"

    def planner(messages: list[Any]) -> str:
        if planning_round(messages) == 0:
            command = {"tool_name": "send_payment", "tool_kwargs": {"amount": 5}}
            return str(plan_reply("execute", [command]))
        return str(plan_reply("response"))

    return create_tool_loop(
        ScriptedChatModel(responder=planner),
        [send_payment],
        models=ModelOptions(answer_model=ScriptedChatModel(responder=lambda messages: "paid")),
        governance=GovernanceOptions(policies={"send_payment": ToolPolicy(idempotent=False)}),
        interrupt_before=["execute"],
    )


def test_claims_through_the_uri_are_atomic_across_connections(dsn: str) -> None:
    key = LedgerKey(uuid.uuid4().hex, "", "call-1")
    barrier = threading.Barrier(6)
    won: list[bool] = []

    def claim(n: int) -> None:
        ledger = PostgresUriLedger(dsn)  # each its own connections, as separate workers
        barrier.wait()
        won.append(ledger.claim(key, f"worker-{n}") is None)

    threads = [threading.Thread(target=claim, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(won) == [False] * 5 + [True]


async def test_a_replay_after_a_restart_reads_the_servers_database(
    run_loop: Any, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POSTGRES_URI", dsn)
    effects: list[str] = []
    before = ServerSaver()
    assert isinstance(ledger_for(before), PostgresUriLedger)
    graph = payments_loop(effects).copy(update={"checkpointer": before})
    config = {"configurable": {"thread_id": uuid.uuid4().hex}}
    await run_loop(graph, {"user_input": "pay"}, config)
    paused = graph.get_state(config).config
    out = await run_loop(graph, None, config)
    assert effects == ["payment:5"] and not out["tool_logs"][0].get("replayed")

    after = ServerSaver()  # a new server process reloads the checkpoints
    after.storage, after.writes, after.blobs = before.storage, before.writes, before.blobs
    restarted = payments_loop(effects).copy(update={"checkpointer": after})
    out = await run_loop(restarted, None, paused)
    assert effects == ["payment:5"]
    assert out["tool_logs"][0]["replayed"] is True and out["answer"] == "paid"
