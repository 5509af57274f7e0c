"""A call keeps its identity when the loop's code changes between a stop and the resume.

In one process, on one `InMemorySaver` (and so one ledger): v1 sends an invoice and is
stopped right after it (Ctrl-C inside the tool: its claim stays, its outcome is never
recorded), or finishes; v2, with the argument renamed, the tool renamed, declared
read-only or removed, resumes or replays the thread under invoke and ainvoke. The
invoice goes out once and the thread finishes. The guard's rules behind it are checked
directly too: an entry is found under a call's second name, and a claim found guards a
call whatever its policy says now.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver

from agentloop import GovernanceOptions, ModelOptions, ToolPolicy, create_tool_loop
from agentloop.base.sync import run_blocking
from agentloop.durability import CallGuard, LedgerKey, MemoryLedger, Settled, position_key
from agentloop.durability.ledger import OWNER
from agentloop.testing import ScriptedChatModel, plan_reply, planning_round

WRITE = ToolPolicy(read_only=False, idempotent=False, concurrency_safe=False)
READ_ONLY = ToolPolicy(read_only=True)
CHANGES = ("renamed_argument", "renamed_tool", "read_only", "removed")
GONE = "send_invoice is no longer one of the loop's tools"


class App:
    """Every version of the app, on one checkpointer; `stop` makes v1 stop after the effect."""

    def __init__(self) -> None:
        self.saver = InMemorySaver()
        self.effects: Counter[str] = Counter()
        self.stop = False

    def send(self, invoice: str) -> str:
        self.effects[f"invoice:{invoice}"] += 1
        if self.stop:
            raise KeyboardInterrupt  # the process stops: the outcome is never recorded
        return f"invoice {invoice} sent"

    def tools(self, version: str) -> tuple[list[BaseTool], dict[str, ToolPolicy]]:
        @tool
        def get_customer(customer: str) -> str:
            """Read a customer's billing details."""
            self.effects[f"read:{customer}"] += 1
            return f"{customer}: billed monthly"

        @tool("send_invoice")
        def send_invoice(invoice_id: str) -> str:
            """Send an invoice (side effect)."""
            return self.send(invoice_id)

        @tool("send_invoice")
        def send_invoice_renamed(invoice_number: str) -> str:
            """Send an invoice (side effect)."""
            return self.send(invoice_number)

        @tool
        def issue_invoice(invoice_id: str) -> str:
            """Send an invoice (side effect)."""
            return self.send(invoice_id)

        aliased = WRITE.model_copy(update={"arg_aliases": {"invoice_number": ("invoice_id",)}})
        versions: dict[str, tuple[list[BaseTool], dict[str, ToolPolicy]]] = {
            "v1": ([get_customer, send_invoice], {"send_invoice": WRITE}),
            "renamed_argument": ([get_customer, send_invoice_renamed], {"send_invoice": aliased}),
            "renamed_tool": ([get_customer, issue_invoice], {"issue_invoice": WRITE}),
            "read_only": (
                [get_customer, send_invoice],
                {"send_invoice": ToolPolicy(read_only=True)},
            ),
            "removed": ([get_customer], {}),
        }
        return versions[version]

    def loop(self, version: str) -> Any:
        def planner(messages: list[Any]) -> str:
            if planning_round(messages) != 0:
                return str(plan_reply("response"))
            commands = [
                {"tool_name": "get_customer", "tool_kwargs": {"customer": "acme"}},
                {"tool_name": "send_invoice", "tool_kwargs": {"invoice_id": "INV-7"}},
            ]
            return str(plan_reply("execute", commands))

        tools, policies = self.tools(version)
        return create_tool_loop(
            ScriptedChatModel(responder=planner),
            tools,
            models=ModelOptions(answer_model=ScriptedChatModel(responder=lambda _: "done")),
            governance=GovernanceOptions(policies=policies),
            checkpointer=self.saver,
        )


async def run(graph: Any, payload: Any, config: Any, entry: str) -> dict[str, Any]:
    if entry == "invoke":
        out: dict[str, Any] = await asyncio.to_thread(graph.invoke, payload, config)
        return out
    out = await graph.ainvoke(payload, config)
    return out


def invoice_of(out: dict[str, Any]) -> dict[str, Any]:
    assert out["answer"] == "done", out
    customer, invoice = out["tool_logs"]
    assert customer["success"] and invoice["tool_name"] == "send_invoice", out["tool_logs"]
    return dict(invoice)


@pytest.mark.parametrize("entry", ["invoke", "ainvoke"])
@pytest.mark.parametrize("change", CHANGES)
async def test_new_code_resuming_a_stopped_call_never_repeats_it(change: str, entry: str) -> None:
    app = App()
    config: Any = {"configurable": {"thread_id": "billing"}}
    app.stop = True
    with pytest.raises(KeyboardInterrupt):
        app.loop("v1").invoke({"user_input": "invoice acme"}, config)
    app.stop = False
    assert app.effects["invoice:INV-7"] == 1
    out = await run(app.loop(change), None, config, entry)
    assert app.effects["invoice:INV-7"] == 1, app.effects
    invoice = invoice_of(out)
    assert invoice["error_type"] == "unknown_outcome", invoice
    if change in ("renamed_tool", "removed"):
        assert GONE in invoice["error"], invoice


@pytest.mark.parametrize("entry", ["invoke", "ainvoke"])
@pytest.mark.parametrize("change", CHANGES)
async def test_new_code_replaying_a_finished_call_returns_its_outcome(
    change: str, entry: str
) -> None:
    """Replayed from the checkpoint where the calls were about to run (the saved `Send`s)."""
    app = App()
    config: Any = {"configurable": {"thread_id": "billing"}}
    first = await run(app.loop("v1"), {"user_input": "invoice acme"}, config, entry)
    assert invoice_of(first)["success"] is True
    v2 = app.loop(change)
    history = list(v2.get_state_history(config))
    before_calls = next(s for s in history if s.next and set(s.next) == {"call_tool"})
    out = await run(v2, None, before_calls.config, entry)
    assert app.effects == Counter({"read:acme": 1, "invoice:INV-7": 1}), app.effects
    invoice = invoice_of(out)
    assert invoice["replayed"] is True and invoice["result"] == "invoice INV-7 sent", invoice


def test_position_key_names_the_place_and_the_command_as_planned() -> None:
    first = position_key("run", "0", 1, "send_invoice", {"invoice_id": "INV-7", "note": "x"})
    assert first == position_key(
        "run", "0", 1, "send_invoice", {"note": "x", "invoice_id": "INV-7"}
    )
    others = {
        position_key("run", "0", 2, "send_invoice", {"invoice_id": "INV-7", "note": "x"}),
        position_key("run", "1", 1, "send_invoice", {"invoice_id": "INV-7", "note": "x"}),
        position_key("run", "0", 1, "send_invoice", {"invoice_id": "INV-8", "note": "x"}),
        position_key("run", "0", 1, "issue_invoice", {"invoice_id": "INV-7", "note": "x"}),
        position_key("other", "0", 1, "send_invoice", {"invoice_id": "INV-7", "note": "x"}),
    }
    assert first not in others and len(others) == 5


PLACE = LedgerKey("thread", "", "position")
CONTENT = LedgerKey("thread", "", "content")


def test_an_entry_under_a_calls_second_name_is_the_calls() -> None:
    ledger = MemoryLedger()
    ledger.finish(CONTENT, OWNER, {"success": True, "result": "sent"})
    guard = CallGuard(ledger, PLACE, side_effects=True, aliases=(CONTENT,))
    assert run_blocking(guard.decide()) == Settled("replayed", {"success": True, "result": "sent"})
    assert guard.key == CONTENT and ledger.get(PLACE) is None


def test_a_claim_found_guards_a_call_whatever_its_policy_says_now() -> None:
    ledger = MemoryLedger()
    assert ledger.claim(PLACE, OWNER) is None  # claimed by code that knew it writes
    now_read_only = CallGuard(ledger, PLACE, side_effects=False, timeout_s=0.1)
    settled = run_blocking(now_read_only.decide())
    assert settled is not None and settled.kind == "unknown_outcome"
    nothing_there = CallGuard(MemoryLedger(), PLACE, side_effects=False)
    assert run_blocking(nothing_there.decide()) is None  # a read with no entry just runs


@pytest.mark.parametrize("entry", ["invoke", "ainvoke"])
async def test_a_repeated_request_on_a_thread_without_its_run_book_is_a_new_run(
    entry: str,
) -> None:
    """A thread checkpointed by a version that kept no `run_book` lost its run count.

    The same request at the same turn number would then name the earlier run, and the
    ledger would replay that run's invoice instead of sending the new one. The thread's
    earlier requests in `messages` count instead.
    """
    from langgraph.types import Overwrite

    app = App()
    config: Any = {"configurable": {"thread_id": "billing"}}
    graph = app.loop("v1")
    first = await run(graph, {"user_input": "invoice acme"}, config, entry)
    assert invoice_of(first)["success"] and app.effects["invoice:INV-7"] == 1
    graph.update_state(config, {"run_book": Overwrite({})})  # as an older version left it
    second = await run(graph, {"user_input": "invoice acme"}, config, entry)
    invoice = invoice_of(second)
    assert invoice["success"] and not invoice.get("replayed"), invoice
    assert app.effects["invoice:INV-7"] == 2  # asked again: sent again
    assert graph.get_state(config).values["run_book"]["run_count"] == 2


def test_a_threads_first_run_is_its_first_whether_asked_in_user_input_or_messages() -> None:
    from langchain_core.messages import HumanMessage

    from agentloop.nodes.prepare import runs_before

    asked = HumanMessage("invoice acme", id="h-1")
    assert runs_before({}) == 0  # type: ignore[typeddict-item]
    assert runs_before({"messages": [asked]}, asked) == 0  # type: ignore[typeddict-item]
    earlier = [HumanMessage("hi", id="h-0"), asked]
    assert runs_before({"messages": earlier}, asked) == 1  # type: ignore[typeddict-item]
    counted = {"messages": earlier, "run_book": {"run_count": 5}}
    assert runs_before(counted, asked) == 5  # type: ignore[arg-type]


def test_every_part_names_a_run_without_its_run_book_the_same_way() -> None:
    from agentloop.state import DEFAULT_RUN_ID, run_id_of

    # calls, held work and MCP sessions all read the run's id here: one default for all
    assert run_id_of({}) == run_id_of({"run_book": {}}) == DEFAULT_RUN_ID
    assert run_id_of({"run_book": {"run_id": ""}}) == DEFAULT_RUN_ID
    assert run_id_of({"run_book": {"run_id": "turn:2:ab12"}}) == "turn:2:ab12"
