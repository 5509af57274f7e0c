"""The ledger keeps a thread's entries while the thread lives, and sweeps the rest.

Through the public API, with a real SQLite checkpointer file (`SqliteSaver` under
`invoke`, `AsyncSqliteSaver` under `ainvoke`) whose database holds the ledger. The
retention is shortened to nothing (`grace_s=0`, `keys_s=0`) and the sweep made due at
every run's start (`every_s=0`), so each run's start sweeps what the last one left.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from savers import sqlite_saver

from agentloop import (
    ConfigurationError,
    GovernanceOptions,
    ModelOptions,
    ToolPolicy,
    create_tool_loop,
)
from agentloop.durability import LedgerRetention
from agentloop.testing import ScriptedChatModel, plan_reply

NOW = LedgerRetention(grace_s=0, keys_s=0, every_s=0)


def planner(messages: list[Any]) -> str:
    if "round_index: 0" not in str(messages[-1].content):
        return str(plan_reply("response"))
    return str(plan_reply("execute", [{"tool_name": "send_payment", "tool_kwargs": {}}]))


def payments_loop(paid: list[str], saver: Any, retention: LedgerRetention | None = NOW) -> Any:
    @tool
    def send_payment() -> str:
        """Send a payment (side effect)."""
        paid.append("payment")
        return "paid"

    return create_tool_loop(
        ScriptedChatModel(responder=planner),
        [send_payment],
        models=ModelOptions(answer_model=ScriptedChatModel(responder=lambda messages: "paid")),
        governance=GovernanceOptions(
            policies={"send_payment": ToolPolicy(idempotent=False)}, ledger_retention=retention
        ),
        checkpointer=saver,
    )


async def delete_thread(saver: Any, thread_id: str) -> None:
    if isinstance(saver, AsyncSqliteSaver):
        await saver.adelete_thread(thread_id)
    else:
        saver.delete_thread(thread_id)


def ledger_threads(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT DISTINCT thread_id FROM agentloop_ledger").fetchall()
    return {str(thread_id) for (thread_id,) in rows}


def config(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


async def test_a_deleted_threads_entries_go_at_the_next_runs_start(
    run_loop: Any, tmp_path: Path
) -> None:
    paid: list[str] = []
    path = tmp_path / "state.sqlite"
    async with sqlite_saver(path, run_loop.entry) as saver:
        graph = payments_loop(paid, saver)
        for thread_id in ("kept", "deleted"):
            await run_loop(graph, {"user_input": "pay"}, config(thread_id))
        assert ledger_threads(path) == {"kept", "deleted"}
        await delete_thread(saver, "deleted")
        await run_loop(graph, {"user_input": "pay"}, config("next"))
        assert ledger_threads(path) == {"kept", "next"}

        # the live thread keeps exactly-once: a replay of its first run pays nothing
        if run_loop.entry == "invoke":
            history = list(graph.get_state_history(config("kept")))
        else:
            history = [s async for s in graph.aget_state_history(config("kept"))]
        before_execute = next(s for s in history if s.next == ("execute",))
        replayed = await run_loop(graph, None, before_execute.config)
    assert paid == ["payment"] * 3
    [record] = replayed["tool_logs"]
    assert record["replayed"] is True


async def test_an_idempotency_key_is_kept_while_a_thread_that_holds_it_lives(
    run_loop: Any, tmp_path: Path
) -> None:
    paid: list[str] = []
    path = tmp_path / "state.sqlite"
    request = {"user_input": "pay", "idempotency_key": "order-17"}
    async with sqlite_saver(path, run_loop.entry) as saver:
        graph = payments_loop(paid, saver)
        await run_loop(graph, request, config("first"))
        keys = ledger_threads(path) - {"first"}  # the key's request, and its calls
        assert len(keys) == 2 and all(key.startswith("idempotency:") for key in keys)
        await run_loop(graph, {"user_input": "pay"}, config("other"))
        assert keys <= ledger_threads(path)  # "first" holds it: kept, whatever its age
        again = await run_loop(graph, request, config("again"))
        assert again["tool_logs"][0]["replayed"] is True and paid == ["payment"] * 2

        for thread_id in ("first", "again"):
            await delete_thread(saver, thread_id)
        await run_loop(graph, {"user_input": "pay"}, config("last"))
        assert ledger_threads(path) == {"other", "last"}  # no live holder, older than keys_s
        await run_loop(graph, request, config("after"))
    assert paid == ["payment"] * 4  # the key's entries are gone: a new request


async def test_each_sweep_goes_on_where_the_last_stopped(run_loop: Any, tmp_path: Path) -> None:
    """One thread per sweep: the live threads it looked at do not hold up a deleted one."""
    path = tmp_path / "state.sqlite"
    one_at_a_time = LedgerRetention(grace_s=0, keys_s=0, every_s=0, threads=1)
    async with sqlite_saver(path, run_loop.entry) as saver:
        unswept = payments_loop([], saver, retention=None)
        for thread_id in ("live-1", "live-2", "deleted"):  # stalest first
            await run_loop(unswept, {"user_input": "pay"}, config(thread_id))
        await delete_thread(saver, "deleted")
        graph = payments_loop([], saver, one_at_a_time)
        for turn in range(3):  # each run's start looks at one more thread
            assert "deleted" in ledger_threads(path)
            await run_loop(graph, {"user_input": "pay"}, config(f"next-{turn}"))
        assert "deleted" not in ledger_threads(path)
        assert {"live-1", "live-2"} <= ledger_threads(path)


async def test_without_a_retention_nothing_is_swept(run_loop: Any, tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    async with sqlite_saver(path, run_loop.entry) as saver:
        graph = payments_loop([], saver, retention=None)
        await run_loop(graph, {"user_input": "pay"}, config("deleted"))
        await delete_thread(saver, "deleted")
        await run_loop(graph, {"user_input": "pay"}, config("next"))
        assert ledger_threads(path) == {"deleted", "next"}


@pytest.mark.parametrize(
    "options",
    [{"grace_s": -1}, {"keys_s": "a day"}, {"every_s": True}, {"threads": 0}],
)
def test_a_retention_that_cannot_work_is_refused(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError, match="LedgerRetention"):
        LedgerRetention(**options)
