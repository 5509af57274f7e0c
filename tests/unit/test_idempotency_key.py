"""An idempotency key on a run: the same request submitted twice pays once.

Through the public API, with a real SQLite checkpointer file (`SqliteSaver` under
`invoke`, `AsyncSqliteSaver` under `ainvoke`), whose database holds the side-effect ledger.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore
from savers import sqlite_saver

from agentloop import (
    GovernanceOptions,
    IdempotencyConflictError,
    InputError,
    ModelOptions,
    ToolPolicy,
    create_tool_loop,
)
from agentloop.durability import StoreLedger
from agentloop.testing import ScriptedChatModel, plan_reply, planning_round


class Payments:
    """The payments that went out (a side effect to count)."""

    def __init__(self, seconds: float = 0.0) -> None:
        self.sent: list[str] = []
        self.steps: list[str] = []
        """What happened, in order: "sent" per payment, and what the test notes beside."""
        self.seconds = seconds
        self.lock = threading.Lock()

    def send(self, to: str, amount: int) -> str:
        time.sleep(self.seconds)  # a payment provider taking its time
        with self.lock:
            self.sent.append(f"{to}:{amount}")
            self.steps.append("sent")
        return f"paid {amount} to {to}"


def payment_planner(messages: list[Any]) -> str:
    if planning_round(messages) != 0:
        return str(plan_reply("response"))
    command = {"tool_name": "send_payment", "tool_kwargs": {"to": "bob", "amount": 10}}
    return str(plan_reply("execute", [command]))


def payment_loop(payments: Payments, checkpointer: Any, ledger: Any = None, **options: Any) -> Any:
    @tool
    def send_payment(to: str, amount: int) -> str:
        """Send a payment (a side effect)."""
        return payments.send(to, amount)

    return create_tool_loop(
        ScriptedChatModel(responder=payment_planner),
        [send_payment],
        models=ModelOptions(answer_model=ScriptedChatModel(responder=lambda messages: "paid")),
        governance=GovernanceOptions(
            policies={"send_payment": ToolPolicy(idempotent=False, concurrency_safe=False)},
            ledger=ledger,
        ),
        checkpointer=checkpointer,
        **options,
    )


def thread(name: str, **configurable: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": name, **configurable}}


def payment_records(out: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in out["tool_logs"] if r["tool_name"] == "send_payment"]


@pytest.mark.parametrize("retry_thread", ["same thread", "new thread"])
async def test_the_same_key_twice_in_sequence_pays_once(
    run_loop: Any, tmp_path: Path, planning_for: Callable[..., Any], retry_thread: str
) -> None:
    payments = Payments()
    async with sqlite_saver(tmp_path / "state.sqlite", run_loop.entry) as saver:
        graph = payment_loop(payments, saver, **planning_for())
        request = {"user_input": "pay bob 10", "idempotency_key": "order-17"}
        first = await run_loop(graph, request, thread("client-1"))
        again = "client-1" if retry_thread == "same thread" else "client-1-retry"
        second = await run_loop(graph, request, thread(again))
    assert payments.sent == ["bob:10"]
    [paid] = payment_records(first)
    [replayed] = payment_records(second)
    assert paid["success"] and not paid.get("replayed")
    assert replayed["success"] and replayed["replayed"] is True
    assert paid["status"] == replayed["status"] == "succeeded"  # how the call ended, once
    assert replayed["result"] == paid["result"] == "paid 10 to bob"
    assert any("replayed" in note for note in replayed["notes"])
    assert second["answer"] == "paid" and second["status"] == "ok"


async def test_the_same_key_in_the_config_pays_once(
    run_loop: Any, tmp_path: Path, planning_for: Callable[..., Any]
) -> None:
    payments = Payments()
    async with sqlite_saver(tmp_path / "state.sqlite", run_loop.entry) as saver:
        graph = payment_loop(payments, saver, **planning_for())
        request = {"user_input": "pay bob 10"}
        first = await run_loop(graph, request, thread("a", idempotency_key="order-17"))
        second = await run_loop(graph, request, thread("b", idempotency_key="order-17"))
    assert payments.sent == ["bob:10"]
    assert not payment_records(first)[0].get("replayed")
    assert payment_records(second)[0]["replayed"] is True


async def test_the_same_key_submitted_twice_at_once_pays_once(
    run_loop: Any, tmp_path: Path, planning_for: Callable[..., Any]
) -> None:
    """Two threads (`invoke`) or two asyncio tasks (`ainvoke`) at once, on two threads."""
    payments = Payments(seconds=0.5)  # the second finds the first's claim while it runs
    async with sqlite_saver(tmp_path / "state.sqlite", run_loop.entry) as saver:
        graph = payment_loop(payments, saver, **planning_for())
        request = {"user_input": "pay bob 10", "idempotency_key": "order-17"}

        async def submit(name: str) -> Any:
            with payments.lock:
                payments.steps.append(f"submitted {name}")
            return await run_loop(graph, request, thread(name))

        outs = await asyncio.gather(submit("client-1"), submit("client-2"))
    assert payments.sent == ["bob:10"]
    # both were in flight together: submitted before the payment went out
    assert payments.steps == ["submitted client-1", "submitted client-2", "sent"]
    records = [record for out in outs for record in payment_records(out)]
    assert len(records) == 2
    ran = [r for r in records if not r.get("replayed")]
    assert len(ran) == 1 and ran[0]["success"]
    [other] = [r for r in records if r.get("replayed")]
    assert other["success"] and other["result"] == ran[0]["result"]


async def test_a_store_ledger_pays_once_for_the_same_key_at_once(
    run_loop: Any, planning_for: Callable[..., Any]
) -> None:
    """The ledger `langgraph dev` keeps in its store (no insert-if-absent) claims once too."""
    payments = Payments(seconds=0.5)
    ledger = StoreLedger(InMemoryStore())
    graph = payment_loop(payments, InMemorySaver(), ledger, **planning_for())
    request = {"user_input": "pay bob 10", "idempotency_key": "order-17"}
    outs = await asyncio.gather(
        *(run_loop(graph, request, thread(f"client-{n}")) for n in range(3))
    )
    assert payments.sent == ["bob:10"]
    records = [record for out in outs for record in payment_records(out)]
    assert sum(not r.get("replayed") for r in records) == 1
    assert all(r["success"] for r in records)


async def test_different_keys_pay_twice(
    run_loop: Any, tmp_path: Path, planning_for: Callable[..., Any]
) -> None:
    payments = Payments()
    async with sqlite_saver(tmp_path / "state.sqlite", run_loop.entry) as saver:
        graph = payment_loop(payments, saver, **planning_for())
        for name, key in (("a", "order-17"), ("b", "order-18")):
            out = await run_loop(
                graph, {"user_input": "pay bob 10", "idempotency_key": key}, thread(name)
            )
            assert not payment_records(out)[0].get("replayed")
    assert payments.sent == ["bob:10", "bob:10"]


async def test_without_a_key_each_submission_pays(
    run_loop: Any, tmp_path: Path, planning_for: Callable[..., Any]
) -> None:
    """As before: two threads are two runs, and so is a second turn on one thread."""
    payments = Payments()
    async with sqlite_saver(tmp_path / "state.sqlite", run_loop.entry) as saver:
        graph = payment_loop(payments, saver, **planning_for())
        for name in ("a", "b", "b"):
            out = await run_loop(graph, {"user_input": "pay bob 10"}, thread(name))
            assert not payment_records(out)[0].get("replayed")
    assert payments.sent == ["bob:10"] * 3


async def test_a_key_names_only_the_run_it_came_with(
    run_loop: Any, tmp_path: Path, planning_for: Callable[..., Any]
) -> None:
    """The next turn on the thread, submitted without a key, is a new request: it pays."""
    payments = Payments()
    async with sqlite_saver(tmp_path / "state.sqlite", run_loop.entry) as saver:
        graph = payment_loop(payments, saver, **planning_for())
        keyed = {"user_input": "pay bob 10", "idempotency_key": "order-17"}
        await run_loop(graph, keyed, thread("a"))
        out = await run_loop(graph, {"user_input": "pay bob 10"}, thread("a"))
        state = (
            await asyncio.to_thread(graph.get_state, thread("a"))
            if run_loop.entry == "invoke"
            else await graph.aget_state(thread("a"))
        )
    assert payments.sent == ["bob:10", "bob:10"]
    assert not payment_records(out)[0].get("replayed")
    assert state.values.get("idempotency_key") == ""


@pytest.mark.parametrize(
    ("key", "says"),
    [
        ("", "non-empty string"),
        ("   ", "non-empty string"),
        (17, "got int"),
        ("k" * 257, "at most 256"),
    ],
)
@pytest.mark.parametrize("given_in", ["input", "config"])
async def test_an_invalid_key_is_an_input_error(
    run_loop: Any, tmp_path: Path, key: Any, says: str, given_in: str
) -> None:
    payments = Payments()
    async with sqlite_saver(tmp_path / "state.sqlite", run_loop.entry) as saver:
        graph = payment_loop(payments, saver)
        if given_in == "input":
            payload, config = {"user_input": "pay bob 10", "idempotency_key": key}, thread("a")
        else:
            payload, config = {"user_input": "pay bob 10"}, thread("a", idempotency_key=key)
        with pytest.raises(InputError, match="idempotency_key") as raised:
            await run_loop(graph, payload, config)
    assert says in str(raised.value)
    assert payments.sent == []


def test_studio_shows_the_key_as_optional_text() -> None:
    graph = payment_loop(Payments(), None)
    inputs = graph.get_input_jsonschema()
    assert inputs["properties"]["idempotency_key"]["type"] == "string"
    assert "idempotency_key" not in inputs.get("required", [])


class Bills:
    """Payments that name whom they were made for, and can be made to fail."""

    def __init__(self, failures: int = 0) -> None:
        self.sent: list[str] = []
        self.tries = 0
        self.failures = failures
        self.lock = threading.Lock()

    def send(self, to: str, amount: int, user: str) -> str:
        with self.lock:
            self.tries += 1
            if self.tries <= self.failures:
                msg = "card declined"
                raise ValueError(msg)
            self.sent.append(f"{user}:{to}:{amount}")
        return f"paid {amount} to {to} for {user}"


def bills_loop(bills: Bills, checkpointer: Any, planner: Any = payment_planner) -> Any:
    @tool
    def send_payment(to: str, amount: int, config: RunnableConfig) -> str:
        """Send a payment (a side effect)."""
        return bills.send(to, amount, config["configurable"].get("user_id", "nobody"))

    return create_tool_loop(
        ScriptedChatModel(responder=planner),
        [send_payment],
        models=ModelOptions(answer_model=ScriptedChatModel(responder=lambda messages: "done")),
        governance=GovernanceOptions(
            policies={"send_payment": ToolPolicy(idempotent=False, concurrency_safe=False)}
        ),
        checkpointer=checkpointer,
    )


async def test_another_users_key_is_another_key(run_loop: Any, tmp_path: Path) -> None:
    bills = Bills()
    async with sqlite_saver(tmp_path / "state.sqlite", run_loop.entry) as saver:
        graph = bills_loop(bills, saver)
        request = {"user_input": "pay bob 10", "idempotency_key": "order-17"}
        alice = await run_loop(graph, request, thread("t-alice", user_id="alice"))
        bob = await run_loop(graph, request, thread("t-bob", user_id="bob"))
        alice_again = await run_loop(graph, request, thread("t-alice-2", user_id="alice"))
    assert bills.sent == ["alice:bob:10", "bob:bob:10"]
    [bobs] = payment_records(bob)
    assert not bobs.get("replayed") and bobs["result"] == "paid 10 to bob for bob"
    assert "alice" not in str(bob["tool_logs"])
    [again] = payment_records(alice_again)
    assert again["replayed"] is True and again["result"] == "paid 10 to bob for alice"
    assert payment_records(alice)[0]["call_key"] != bobs["call_key"]


def amount_planner(messages: list[Any]) -> str:
    """Pays the amount the request names."""
    if planning_round(messages) != 0:
        return str(plan_reply("response"))
    amount = 99 if "pay bob 99" in str(messages) else 10
    command = {"tool_name": "send_payment", "tool_kwargs": {"to": "bob", "amount": amount}}
    return str(plan_reply("execute", [command]))


async def test_a_key_with_another_request_is_refused(run_loop: Any, tmp_path: Path) -> None:
    bills = Bills()
    async with sqlite_saver(tmp_path / "state.sqlite", run_loop.entry) as saver:
        graph = bills_loop(bills, saver, amount_planner)
        first = {"user_input": "pay bob 10", "idempotency_key": "order-17"}
        changed = {"user_input": "pay bob 99", "idempotency_key": "order-17"}
        await run_loop(graph, first, thread("t-1", user_id="alice"))
        for where in ("t-1", "t-2"):
            with pytest.raises(IdempotencyConflictError, match="another request") as refused:
                await run_loop(graph, changed, thread(where, user_id="alice"))
            assert refused.value.error_type == "idempotency_conflict"
            assert isinstance(refused.value, InputError)
        again = await run_loop(graph, first, thread("t-3", user_id="alice"))
        with_new_key = {"user_input": "pay bob 99", "idempotency_key": "order-18"}
        new = await run_loop(graph, with_new_key, thread("t-4", user_id="alice"))
        state = await asyncio.to_thread(graph.get_state, thread("t-1", user_id="alice"))
    assert bills.sent == ["alice:bob:10", "alice:bob:99"]
    assert payment_records(again)[0]["replayed"] is True
    assert payment_records(new)[0]["result"] == "paid 99 to bob for alice"
    if run_loop.entry == "invoke":  # the refused run changed nothing of the thread
        assert state.values["status"] == "ok" and len(state.values["messages"]) == 4


async def test_a_resubmission_runs_a_failed_call_again(run_loop: Any, tmp_path: Path) -> None:
    bills = Bills(failures=1)
    async with sqlite_saver(tmp_path / "state.sqlite", run_loop.entry) as saver:
        graph = bills_loop(bills, saver)
        request = {"user_input": "pay bob 10", "idempotency_key": "order-17"}
        failed = await run_loop(graph, request, thread("t-1", user_id="alice"))
        retried = await run_loop(graph, request, thread("t-2", user_id="alice"))
        replayed = await run_loop(graph, request, thread("t-3", user_id="alice"))
    assert payment_records(failed)[0]["status"] == "failed"
    assert "card declined" in payment_records(failed)[0]["error"]
    [paid] = payment_records(retried)
    assert paid["status"] == "succeeded" and not paid.get("replayed")
    [again] = payment_records(replayed)
    assert again["replayed"] is True and again["result"] == paid["result"]
    assert "submission" not in again
    assert bills.sent == ["alice:bob:10"] and bills.tries == 2


async def test_resubmissions_at_once_after_a_failure_run_it_once(
    run_loop: Any, tmp_path: Path
) -> None:
    bills = Bills(failures=1)
    async with sqlite_saver(tmp_path / "state.sqlite", run_loop.entry) as saver:
        graph = bills_loop(bills, saver)
        request = {"user_input": "pay bob 10", "idempotency_key": "order-17"}
        await run_loop(graph, request, thread("t-1", user_id="alice"))
        outs = await asyncio.gather(
            *(run_loop(graph, request, thread(f"t-{n}", user_id="alice")) for n in (2, 3, 4))
        )
    assert bills.sent == ["alice:bob:10"] and bills.tries == 2
    records = [payment_records(out)[0] for out in outs]
    assert all(r["status"] == "succeeded" for r in records)
    assert sorted(bool(r.get("replayed")) for r in records) == [False, True, True]


async def test_a_failed_call_is_replayed_to_its_own_run(tmp_path: Path) -> None:
    """A replay of the run that recorded the failure (the same invocation) replays it."""
    bills = Bills(failures=1)
    graph = bills_loop(bills, InMemorySaver())
    config = thread("t-1", user_id="alice")
    await graph.ainvoke({"user_input": "pay bob 10"}, config)
    history = [s async for s in graph.aget_state_history(config)]
    paused = next(s for s in history if s.next and "call_tool" in s.next[0])
    replay = await graph.ainvoke(None, paused.config)
    [record] = payment_records(replay)
    assert record["status"] == "failed" and record["replayed"] is True
    assert bills.tries == 1
