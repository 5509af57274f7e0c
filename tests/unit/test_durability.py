"""The side-effect ledger, call identities and the guard rules, directly and through the loop."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphInterrupt

from agentloop import GovernanceOptions, ModelOptions, ToolPolicy, as_tool, create_tool_loop
from agentloop.base.sync import run_blocking
from agentloop.durability import (
    CallGuard,
    LedgerKey,
    MemoryLedger,
    Settled,
    call_key,
    loop_namespace,
    run_identity,
)
from agentloop.durability.ledger import (
    OWNER,
    in_flight,
    mark_running,
    owner_is_gone,
    unmark_running,
)
from agentloop.governance.registry import ToolRegistry
from agentloop.testing import ScriptedChatModel, plan_reply, planning_round

KEY = LedgerKey("thread", "", "call-1")
DEAD_OWNER = f"{OWNER.split('|')[0]}|999999999|1|deadbeef"
OTHER_HOST = "elsewhere|1|1|cafe"


def test_loop_namespace_drops_task_ids() -> None:
    assert loop_namespace("") == ""
    assert loop_namespace("agent:1f0e-9a|call_tool:77") == "agent|call_tool"


def test_call_key_is_stable_and_tells_calls_apart() -> None:
    first = call_key("run", "0", "pay", {"amount": 5, "to": "bob"}, 0)
    assert first == call_key("run", "0", "pay", {"to": "bob", "amount": 5}, 0)
    others = {
        call_key("run", "0", "pay", {"amount": 5, "to": "bob"}, 1),
        call_key("run", "1", "pay", {"amount": 5, "to": "bob"}, 0),
        call_key("run", "0.1", "pay", {"amount": 5, "to": "bob"}, 0),
        call_key("run", "0", "pay", {"amount": 6, "to": "bob"}, 0),
        call_key("other", "0", "pay", {"amount": 5, "to": "bob"}, 0),
        call_key("run", "0", "refund", {"amount": 5, "to": "bob"}, 0),
    }
    assert first not in others and len(others) == 6


def test_run_identity_needs_a_thread_to_be_stable() -> None:
    assert run_identity("t", "", "turn:0") == run_identity("t", "", "turn:0")
    assert run_identity("t", "", "turn:0") != run_identity("t", "", "turn:1")
    assert run_identity(None, "", "turn:0") != run_identity(None, "", "turn:0")


def test_memory_ledger_claims_once_across_threads() -> None:
    ledger = MemoryLedger()
    barrier = threading.Barrier(8)
    won: list[bool] = []

    def claim() -> None:
        barrier.wait()
        won.append(ledger.claim(KEY, OWNER) is None)

    threads = [threading.Thread(target=claim) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(won) == [False] * 7 + [True]


def test_owner_is_gone() -> None:
    ledger = MemoryLedger()
    assert owner_is_gone(ledger, KEY, OWNER) is True  # this process does not run it
    with in_flight(ledger, KEY):
        assert owner_is_gone(ledger, KEY, OWNER) is False
    assert owner_is_gone(ledger, KEY, DEAD_OWNER) is True
    assert owner_is_gone(ledger, KEY, OTHER_HOST) is None


def test_running_marks_are_counted() -> None:
    """A worker that stops (a lost claim) never unmarks another still running the call."""
    ledger = MemoryLedger()
    mark_running(ledger, KEY)
    with in_flight(ledger, KEY):
        assert owner_is_gone(ledger, KEY, OWNER) is False
    assert owner_is_gone(ledger, KEY, OWNER) is False
    unmark_running(ledger, KEY)
    assert owner_is_gone(ledger, KEY, OWNER) is True


def guard(ledger: MemoryLedger, **options: Any) -> CallGuard:
    return CallGuard(ledger, KEY, side_effects=True, timeout_s=1.0, **options)


def before(checked: CallGuard) -> Settled | None:
    """Decide before running, from sync code."""
    return run_blocking(checked.decide())


async def abefore(checked: CallGuard) -> Settled | None:
    """Decide before running, from async code."""
    return await checked.decide()


def run_call(checked: CallGuard, call: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run a call the guard let through, from sync code (a memory ledger needs no I/O)."""
    return run_blocking(checked.record(_called(call)))


async def _called(call: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    return call()


def test_a_claimant_counts_as_running_from_its_claim_to_its_outcome() -> None:
    """Between its claim and its call, and its call and its record, it is not taken for dead."""
    ledger = MemoryLedger()
    first = guard(ledger)
    assert before(first) is None and first.claimed
    assert owner_is_gone(ledger, KEY, OWNER) is False  # claimed, not started yet

    def pay() -> dict[str, Any]:
        assert owner_is_gone(ledger, KEY, OWNER) is False
        return {"result": "paid"}

    assert run_call(first, pay) == {"result": "paid"}
    assert owner_is_gone(ledger, KEY, OWNER) is True
    settled = before(guard(ledger))
    assert settled is not None and settled.kind == "replayed"


def test_a_recorded_outcome_is_replayed() -> None:
    ledger = MemoryLedger()
    ledger.finish(KEY, DEAD_OWNER, {"result": "paid"})
    settled = before(guard(ledger))
    assert settled is not None and settled.kind == "replayed"
    assert settled.outcome == {"result": "paid"}


def test_a_claim_whose_worker_is_gone_is_an_unknown_outcome() -> None:
    ledger = MemoryLedger()
    assert ledger.claim(KEY, DEAD_OWNER) is None
    settled = before(guard(ledger))
    assert settled is not None and settled.kind == "unknown_outcome"
    assert "did not report back" in settled.reason


def test_a_resumable_call_is_entered_again() -> None:
    ledger = MemoryLedger()
    ledger.claim(KEY, DEAD_OWNER)
    checked = guard(ledger, resumable=True)
    assert before(checked) is None
    assert run_call(checked, lambda: {"result": "again"}) == {"result": "again"}
    entry = ledger.get(KEY)
    assert entry is not None and entry.owner == OWNER and entry.outcome == {"result": "again"}


def test_a_live_claimant_is_waited_for() -> None:
    ledger = MemoryLedger()
    ledger.claim(KEY, OWNER)

    running = threading.Event()

    def finish_later() -> None:
        with in_flight(ledger, KEY):
            running.set()
            time.sleep(0.3)  # most likely still running when the guard looks
            ledger.finish(KEY, OWNER, {"result": "by the other worker"})

    worker = threading.Thread(target=finish_later)
    worker.start()
    assert running.wait(30)
    # waits as long as the claimant runs (the 30 s limit only bounds a hang)
    settled = before(CallGuard(ledger, KEY, side_effects=True, timeout_s=30))
    worker.join()
    assert settled is not None and settled.kind == "replayed"
    assert settled.outcome == {"result": "by the other worker"}


async def test_a_live_claimant_on_another_host_is_waited_for_then_unknown() -> None:
    ledger = MemoryLedger()
    ledger.claim(KEY, OTHER_HOST)
    # with an hour to wait, the guard waits for the other host's outcome ...
    waiting = asyncio.create_task(
        abefore(CallGuard(ledger, KEY, side_effects=True, timeout_s=3600))
    )
    await asyncio.sleep(0.2)  # room for a guard that did not wait to show
    assert not waiting.done()
    ledger.finish(KEY, OTHER_HOST, {"result": "by the other host"})
    settled = await asyncio.wait_for(waiting, 30)  # 30 s only bound a hang
    assert settled is not None and settled.kind == "replayed"
    assert settled.outcome == {"result": "by the other host"}
    # ... and when its wait ends first, the outcome is unknown
    ledger = MemoryLedger()
    ledger.claim(KEY, OTHER_HOST)
    settled = await abefore(CallGuard(ledger, KEY, side_effects=True, timeout_s=0.2))
    assert settled is not None and settled.kind == "unknown_outcome"
    assert "another worker" in settled.reason


def test_reexecute_runs_a_recorded_call_again() -> None:
    ledger = MemoryLedger()
    ledger.finish(KEY, DEAD_OWNER, {"result": "first"})
    checked = guard(ledger, reexecute=True)
    assert before(checked) is None
    run_call(checked, lambda: {"result": "second"})
    entry = ledger.get(KEY)
    assert entry is not None and entry.outcome == {"result": "second"}


async def test_an_interrupt_releases_the_claim() -> None:
    ledger = MemoryLedger()
    checked = guard(ledger)
    assert await abefore(checked) is None

    def ask_first() -> dict[str, Any]:
        raise GraphInterrupt(())

    with pytest.raises(GraphInterrupt):
        await checked.record(_called(ask_first))
    assert ledger.get(KEY) is None  # on resume the tool asks again, then acts


# --- through the loop ----------------------------------------------------------------------


class Effects:
    """Counts what tools did."""

    def __init__(self) -> None:
        self.done: list[str] = []
        self.lock = threading.Lock()

    def add(self, what: str) -> None:
        with self.lock:
            self.done.append(what)


def side_effect_tools(effects: Effects, readers: int = 1) -> list[Any]:
    """`send_invoice` and `get_balance`; a balance read waits for `readers` reads to start.

    Runs whose reads meet are in the same round at the same time, however the machine
    schedules them (30 s only bound a run that never comes).
    """
    arrived: list[str] = []
    all_in = asyncio.Event()

    @tool
    def send_invoice(customer: str) -> str:
        """Send an invoice (side effect)."""
        effects.add(f"invoice:{customer}")
        return f"invoice sent to {customer}"

    @tool
    async def get_balance(customer: str) -> str:
        """Read a balance."""
        effects.add(f"balance:{customer}")
        arrived.append(customer)
        if len(arrived) >= readers:
            all_in.set()
        await asyncio.wait_for(all_in.wait(), 30)
        return f"{customer} owes 5"

    return [send_invoice, get_balance]


def invoicing_planner(messages: list[Any]) -> str:
    if planning_round(messages) != 0:
        return str(plan_reply("response"))
    commands = [
        {"tool_name": "get_balance", "tool_kwargs": {"customer": "bob"}},
        {"tool_name": "send_invoice", "tool_kwargs": {"customer": "bob"}},
    ]
    return str(plan_reply("execute", commands))


def invoicing_loop(effects: Effects, readers: int = 1, **options: Any) -> Any:
    return create_tool_loop(
        ScriptedChatModel(responder=invoicing_planner),
        side_effect_tools(effects, readers),
        models=ModelOptions(answer_model=ScriptedChatModel(responder=lambda messages: "invoiced")),
        governance=GovernanceOptions(
            policies={"send_invoice": ToolPolicy(idempotent=False, concurrency_safe=False)}
        ),
        **options,
    )


async def test_two_workers_resuming_one_paused_thread_send_one_invoice(
    run_loop: Any, planning_for: Callable[..., dict[str, Any]]
) -> None:
    effects = Effects()
    # the two resumes meet in the round's balance read: both are in the round before
    # either sends the invoice
    graph = invoicing_loop(
        effects, readers=2, checkpointer=InMemorySaver(), interrupt_before=["execute"],
        **planning_for(),
    )  # fmt: skip
    config = {"configurable": {"thread_id": "approval"}}
    await run_loop(graph, {"user_input": "invoice bob"}, config)
    assert effects.done == []  # paused before the round
    outs = await asyncio.gather(*(run_loop(graph, None, config) for _ in range(2)))
    assert effects.done.count("invoice:bob") == 1
    assert effects.done.count("balance:bob") == 2  # each resume read, and they met
    assert all(out["answer"] == "invoiced" for out in outs)
    invoices = [r for out in outs for r in out["tool_logs"] if r["tool_name"] == "send_invoice"]
    assert [r["success"] for r in invoices] == [True, True]
    assert sum(bool(r.get("replayed")) for r in invoices) == 1


async def test_exit_durability_warns_once(
    run_loop: Any, caplog: pytest.LogCaptureFixture, planning_for: Callable[..., dict[str, Any]]
) -> None:
    effects = Effects()
    graph = invoicing_loop(effects, checkpointer=InMemorySaver(), **planning_for())
    events: list[dict[str, Any]] = []
    with caplog.at_level(logging.WARNING, logger="agentloop"):
        for thread in ("a", "b"):
            config = {"configurable": {"thread_id": thread}}
            if run_loop.entry == "invoke":
                stream = graph.stream(
                    {"user_input": "x"}, config, stream_mode="custom", durability="exit"
                )
                events += list(stream)
            else:
                async for event in graph.astream(
                    {"user_input": "x"}, config, stream_mode="custom", durability="exit"
                ):
                    events.append(event)
    warnings = [e for e in events if e["type"] == "durability_warning"]
    assert len(warnings) == 2 and "crash loses the run" in warnings[0]["message"]
    assert sum("durability='exit'" in r.getMessage() for r in caplog.records) == 1


async def test_no_warning_with_the_default_durability(
    run_loop: Any, planning_for: Callable[..., dict[str, Any]]
) -> None:
    graph = invoicing_loop(Effects(), checkpointer=InMemorySaver(), **planning_for())
    config = {"configurable": {"thread_id": "t"}}
    events = [e async for e in graph.astream({"user_input": "x"}, config, stream_mode="custom")]
    assert not [e for e in events if e["type"] == "durability_warning"]


# --- sub-agents ----------------------------------------------------------------------------


def test_a_sub_agent_has_side_effects_unless_declared() -> None:
    child = invoicing_loop(Effects())
    registry = ToolRegistry(
        [
            as_tool(child, name="clerk", description="Invoices."),
            as_tool(child, name="reader", description="Reads.", idempotent=True,
                    concurrency_safe=True),
        ]
    )  # fmt: skip
    clerk, reader = registry.policy("clerk"), registry.policy("reader")
    assert (clerk.idempotent, clerk.concurrency_safe, clerk.retryable) == (False, False, False)
    assert clerk.resumable
    assert (reader.idempotent, reader.concurrency_safe) == (True, True)


async def test_a_timed_out_sub_agent_with_side_effects_is_not_retried(
    run_loop: Any, planning_for: Callable[..., dict[str, Any]]
) -> None:
    effects = Effects()
    parent_done = threading.Event()  # the invoice is sent once the parent run has returned
    child_over = threading.Event()  # the abandoned sub-agent run ended: cancelled or answered

    @tool
    async def send_invoice(customer: str) -> str:
        """Send an invoice (side effect), slowly: it outlasts its 0.3 s timeout."""
        effects.add(f"invoice:{customer}")
        try:
            await asyncio.to_thread(parent_done.wait, 10)
        except asyncio.CancelledError:
            child_over.set()
            raise
        return "sent"

    def child_answer(messages: list[Any]) -> str:
        child_over.set()
        return "child done"

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
            answer_model=ScriptedChatModel(responder=child_answer)
        ),
        governance=GovernanceOptions(policies={"send_invoice": ToolPolicy(idempotent=False)}),
        **planning_for(),
    )  # fmt: skip
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
        checkpointer=InMemorySaver(),
        **planning_for(),
    )  # fmt: skip
    out = await run_loop(parent, {"user_input": "go"}, {"configurable": {"thread_id": "t"}})
    [record] = out["tool_logs"]
    # it may have taken effect (it had): never a clean timeout, never repeated blindly
    assert record["error_type"] == "unknown_outcome" and record["attempts"] == 1
    assert "must not be repeated blindly" in record["error"]
    parent_done.set()
    assert await asyncio.to_thread(child_over.wait, 10)  # the abandoned run is over
    assert effects.done == ["invoice:bob"]


async def test_a_sub_agent_runs_with_the_parents_checkpointer(
    run_loop: Any, planning_for: Callable[..., dict[str, Any]]
) -> None:
    effects = Effects()
    saver = InMemorySaver()
    parent = create_tool_loop(
        ScriptedChatModel(
            [
                plan_reply("execute", [{"tool_name": "clerk",
                                        "tool_kwargs": {"user_input": "invoice bob"}}]),
                plan_reply("response"),
            ]
        ),
        [as_tool(invoicing_loop(effects, name="clerk_loop", **planning_for()), name="clerk",
                 description="Bills.")],
        models=ModelOptions(answer_model=ScriptedChatModel(["parent done"])),
        checkpointer=saver,
        name="boss",
        **planning_for(),
    )  # fmt: skip
    out = await run_loop(parent, {"user_input": "go"}, {"configurable": {"thread_id": "t"}})
    assert out["tool_logs"][0]["result"] == "invoiced"
    assert sorted(out["usage"]) == ["boss", "clerk_loop"]  # the artifact carried the usage
    namespaces = {ns for ns in saver.storage["t"] if ns}
    assert any(ns.startswith("call_tool:") for ns in namespaces), namespaces
    assert effects.done == ["balance:bob", "invoice:bob"]


def test_a_ledger_of_the_apps_own_runs_its_operation_both_ways_and_a_generator_is_refused() -> None:
    """A ledger of one's own: `async def operation` taking its I/O through `by_mode`."""
    from agentloop.durability import LedgerEntry, LedgerOp, SideEffectLedger, by_mode
    from agentloop.errors import ConfigurationError

    class DictLedger(SideEffectLedger):
        def __init__(self) -> None:
            self.entries: dict[Any, LedgerEntry] = {}
            self.forms: list[str] = []

        def _get(self, key: Any) -> LedgerEntry | None:
            self.forms.append("blocking")
            return self.entries.get(key)

        async def _aget(self, key: Any) -> LedgerEntry | None:
            self.forms.append("awaited")
            return self.entries.get(key)

        async def operation(self, op: LedgerOp) -> Any:
            if op.name == "finish":
                self.entries[op.entry_key] = LedgerEntry(op.owner, 0.0, op.outcome)
                return None
            return await by_mode(lambda: self._get(op.entry_key), lambda: self._aget(op.entry_key))

    ledger = DictLedger()
    GovernanceOptions(ledger=ledger)  # accepted
    ledger.finish(KEY, OWNER, {"result": "paid"})
    assert ledger.get(KEY) == LedgerEntry(OWNER, 0.0, {"result": "paid"})  # from sync code
    entry = asyncio.run(ledger.operation(LedgerOp("get", KEY)))  # from async code
    assert entry is not None and entry.outcome == {"result": "paid"}
    assert ledger.forms == ["blocking", "awaited"]

    class GeneratorLedger(DictLedger):
        def operation(self, op: LedgerOp) -> Any:  # type: ignore[override]
            yield op  # the old generator form

    with pytest.raises(ConfigurationError, match="must be an `async def`"):
        GovernanceOptions(ledger=GeneratorLedger())
