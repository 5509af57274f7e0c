"""Read after write: duplicate detection and the result cache never serve data from before a write.

check -> change -> check, with plain `@tool` functions, as a real task does it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from agentloop import (
    GovernanceOptions,
    ModelOptions,
    ToolPolicy,
    ToolRetry,
    create_tool_loop,
)
from agentloop.governance.freshness import ReadTracker, StateTouch
from agentloop.governance.policy import resolve_policy
from agentloop.testing import ScriptedChatModel, plan_reply


def cmd(tool_name: str, **kwargs: Any) -> dict[str, Any]:
    return {"tool_name": tool_name, "tool_kwargs": kwargs}


class Bank:
    """Accounts behind the tools; counts the calls that reached it."""

    def __init__(self) -> None:
        self.balances = {"c": 100, "d": 50}
        self.reads = 0
        self.fail_reads = False
        self.break_reads_after_write = False
        self.lock = threading.Lock()

    def tools(self) -> list[Any]:
        @tool
        def get_balance(account: str) -> str:
            """Read an account's balance."""
            with self.lock:
                self.reads += 1
                if self.fail_reads:
                    raise ConnectionError("the bank is unreachable")
                return f"{account}: {self.balances[account]}"

        @tool
        def transfer(account: str, amount: int) -> str:
            """Move money out of an account."""
            with self.lock:
                self.balances[account] -= amount
                self.fail_reads = self.break_reads_after_write
                return f"moved {amount} from {account}"

        return [get_balance, transfer]


Builder = Callable[..., Any]


@pytest.fixture
def loop(planning_for: Callable[..., dict[str, Any]]) -> Builder:
    """A loop of scripted models over a bank, in the test's plan mode."""

    def build(plans: list[Any], bank: Bank, **options: Any) -> Any:
        planner = ScriptedChatModel(plans, chunk_size=9)
        answerer = ScriptedChatModel(repeat_last=True, replies=["done"])
        options = {**planning_for(), **options}
        return create_tool_loop(
            planner, bank.tools(), models=ModelOptions(answer_model=answerer), **options
        )

    return build


def records_of(out: dict[str, Any]) -> list[dict[str, Any]]:
    return list(out["round_state"]["done_plans"])


async def test_check_change_check_reads_again(run_loop: Any, loop: Builder) -> None:
    bank = Bank()
    graph = loop(
        [
            plan_reply("execute", [cmd("get_balance", account="c")]),
            plan_reply("execute", [cmd("transfer", account="c", amount=30)]),
            plan_reply("execute", [cmd("get_balance", account="c")]),
            plan_reply("response"),
        ],
        bank,
    )
    out = await run_loop(graph, {"user_input": "check, move 30, check again"})
    first, _, third = records_of(out)
    assert first["result"] == "c: 100"
    assert third["success"] and not third.get("duplicate")
    assert third["result"] == "c: 70"
    assert third["after_write"] == "transfer"
    assert any("ran again" in note for note in third["notes"])
    assert bank.reads == 2


async def test_a_write_in_the_same_plan_makes_the_later_read_run(
    run_loop: Any, loop: Builder
) -> None:
    bank = Bank()
    graph = loop(
        [
            plan_reply(
                "execute",
                [
                    cmd("get_balance", account="c"),
                    cmd("transfer", account="c", amount=10),
                    cmd("get_balance", account="c"),
                ],
            ),
            plan_reply("response"),
        ],
        bank,
    )
    out = await run_loop(graph, {"user_input": "check, move 10, check"})
    results = [record["result"] for record in records_of(out)]
    assert results == ["c: 100", "moved 10 from c", "c: 90"]
    assert records_of(out)[2]["after_write"] == "transfer"


async def test_repeats_with_no_write_between_are_still_duplicates(
    run_loop: Any, loop: Builder
) -> None:
    bank = Bank()
    graph = loop(
        [
            plan_reply(
                "execute", [cmd("get_balance", account="c"), cmd("get_balance", account="c")]
            ),
            plan_reply(
                "execute", [cmd("get_balance", account="c"), cmd("get_balance", account="d")]
            ),
            plan_reply("response"),
        ],
        bank,
    )
    out = await run_loop(graph, {"user_input": "check twice"})
    records = out["tool_logs"]
    assert [bool(r.get("duplicate")) for r in records] == [False, True, True, False]
    assert bank.reads == 2


async def test_state_keys_narrow_what_a_write_makes_stale(run_loop: Any, loop: Builder) -> None:
    bank = Bank()
    keyed = ToolPolicy(state_keys=("account",))
    graph = loop(
        [
            plan_reply(
                "execute", [cmd("get_balance", account="c"), cmd("get_balance", account="d")]
            ),
            plan_reply("execute", [cmd("transfer", account="d", amount=5)]),
            plan_reply(
                "execute", [cmd("get_balance", account="c"), cmd("get_balance", account="d")]
            ),
            plan_reply("response"),
        ],
        bank,
        governance=GovernanceOptions(policies={"get_balance": keyed, "transfer": keyed}),
    )
    out = await run_loop(graph, {"user_input": "both, move from d, both again"})
    last_c, last_d = out["tool_logs"][-2:]
    assert last_c.get("duplicate") is True  # c was not written
    assert last_d["result"] == "d: 45" and last_d["after_write"] == "transfer"


async def test_the_cache_never_answers_with_data_from_before_a_write(
    run_loop: Any, loop: Builder
) -> None:
    bank = Bank()
    cached = ToolPolicy(read_only=True, cache_ttl_s=600)
    read = [plan_reply("execute", [cmd("get_balance", account="c")]), plan_reply("response")]
    write = [
        plan_reply("execute", [cmd("transfer", account="c", amount=1)]),
        plan_reply("response"),
    ]
    graph = loop(
        read + read + write + read,
        bank,
        governance=GovernanceOptions(policies={"get_balance": cached}),
        checkpointer=InMemorySaver(),
    )
    results = []
    for turn in range(4):
        out = await run_loop(  # one conversation: the cache serves the same user's thread
            graph, {"user_input": f"turn {turn}"}, {"configurable": {"thread_id": "t"}}
        )
        results.append(out["tool_logs"][0])
    assert results[1]["from_cache"] is True  # nothing changed in between
    assert results[3]["from_cache"] is False
    assert results[3]["result"] == "c: 99"
    assert bank.reads == 2


async def test_stale_fallback_is_dropped_by_a_write(run_loop: Any, loop: Builder) -> None:
    bank = Bank()
    bank.break_reads_after_write = True
    # retried at once: the backoff between attempts plays no part here
    retry = ToolRetry(max_attempts=3, initial_delay_s=0, jitter=False)
    fallback = ToolPolicy(read_only=True, stale_fallback_s=600, retry=retry)
    graph = loop(
        [
            plan_reply("execute", [cmd("get_balance", account="c")]),
            plan_reply("execute", [cmd("transfer", account="c", amount=1)]),
            plan_reply("execute", [cmd("get_balance", account="c")]),
            plan_reply("response"),
        ],
        bank,
        governance=GovernanceOptions(policies={"get_balance": fallback}),
    )
    out = await run_loop(graph, {"user_input": "check, move, check"})
    third = records_of(out)[2]
    assert third["success"] is False
    assert not third.get("stale") and third["fallback"] == ""
    assert "c: 100" not in str(third["result"])  # never the balance from before the transfer


def test_tracker_rules() -> None:
    reads = ReadTracker()
    whole = StateTouch("local")
    reads.read("get:c", 0, StateTouch("local", (("account", '"c"'),)))
    reads.read("get:d", 0, StateTouch("local", (("account", '"d"'),)))
    reads.read("other", 0, StateTouch("mcp:memory"))
    reads.write(StateTouch("local", (("account", '"d"'),)), "transfer")
    assert reads.ran_in("get:c") == 0
    assert reads.ran_in("get:d") is None and reads.stale_after("get:d") == "transfer"
    reads.write(whole, "reset")
    assert reads.ran_in("get:c") is None and reads.ran_in("other") == 0


def test_default_and_declared_state_scopes() -> None:
    get_balance, transfer = Bank().tools()
    assert resolve_policy(get_balance).state_scope == "local"
    declared = ToolPolicy(state_scope="bank", state_keys=["account"])
    assert resolve_policy(transfer, declared).state_scope == "bank"
    assert resolve_policy(transfer, declared).state_keys == ("account",)
    remote = get_balance.model_copy(update={"metadata": {"mcp_server": "memory"}})
    assert resolve_policy(remote).state_scope == "mcp:memory"


def test_a_round_orders_reads_and_possible_writes_of_one_state() -> None:
    reads = ReadTracker()
    c, d = StateTouch("local", (("account", '"c"'),)), StateTouch("local", (("account", '"d"'),))
    assert reads.place(0, c, writes=False) == []
    assert reads.place(1, d, writes=False) == []
    assert reads.place(2, c, writes=True) == [0]  # after the read of what it changes
    assert reads.place(3, StateTouch("local"), writes=True) == [0, 1]  # two writes: side by side
    assert reads.place(4, c, writes=False) == [2, 3]  # after both possible writes


async def test_a_read_after_a_write_that_waits_for_a_reference_is_not_started_early(
    run_loop: Any, planning_for: Callable[..., dict[str, Any]]
) -> None:
    bank = Bank()

    @tool
    def get_account(owner: str) -> str:
        """Find the account of an owner."""
        return "c"

    planner = ScriptedChatModel(
        [
            plan_reply(
                "execute",
                [
                    cmd("get_account", owner="ada"),
                    cmd("transfer", account="${1}", amount=5),
                    cmd("get_balance", account="c"),
                    cmd("get_account", owner="bob"),  # the read above completes mid-stream
                ],
            ),
            plan_reply("response"),
        ],
        chunk_size=9,
    )
    graph = create_tool_loop(
        planner,
        [get_account, *bank.tools()],
        models=ModelOptions(answer_model=ScriptedChatModel(["done"], repeat_last=True)),
        **planning_for(),
    )
    out = await run_loop(graph, {"user_input": "move 5 from ada's account, then check it"})
    _, moved, balance, _ = records_of(out)
    assert moved["result"] == "moved 5 from c"
    assert balance["result"] == "c: 95"  # read after the transfer, not before it
