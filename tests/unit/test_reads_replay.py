"""The run's reads are replayed once: each record of a run once, a fork in full.

Streaming dispatch (for a planner reply that may start a call early) and `execute`
prepare a round's calls against the run's earlier reads; the records behind them are
replayed into a tracker once per run, each round adding only its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, cast

import pytest
from langchain_core.tools import tool

from agentloop import ModelOptions, create_tool_loop
from agentloop.governance.freshness import ReadTracker, reads_so_far
from agentloop.governance.registry import ToolRegistry
from agentloop.nodes import reads
from agentloop.state import LoopState, ToolExecutionRecord
from agentloop.testing import ScriptedChatModel, plan_reply


@tool
def get_item(n: int) -> str:
    """Read an item."""
    return f"item {n}"


@tool
def set_item(n: int) -> str:
    """Change an item."""
    return f"set {n}"


def _round(*numbers: int) -> Any:
    commands = [{"tool_name": "get_item", "tool_kwargs": {"n": n}} for n in numbers]
    return plan_reply("execute", commands)


async def test_each_record_is_replayed_once(
    run_loop: Any, planning_for: Callable[..., dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    replayed: list[str] = []
    replay = reads.replay_records

    def counting(
        tracker: ReadTracker, records: Iterable[ToolExecutionRecord], policy_of: Any
    ) -> ReadTracker:
        records = list(records)
        replayed.extend(record["call_id"] for record in records)
        return replay(tracker, records, policy_of)

    monkeypatch.setattr(reads, "replay_records", counting)
    plans = [_round(1, 2), _round(3, 4), _round(5, 6), _round(1, 7), plan_reply("response")]
    graph = create_tool_loop(
        ScriptedChatModel(plans, chunk_size=9),
        [get_item],
        models=ModelOptions(answer_model=ScriptedChatModel(replies=["done"])),
        **planning_for(),
    )
    out = await run_loop(graph, {"user_input": "read the items"})
    records = out["round_state"]["done_plans"]
    assert len(records) == 8
    assert [r["error_type"] for r in records].count("duplicate") == 1  # item 1 again
    assert len(replayed) == len(set(replayed))  # none twice
    # each record a later round's calls were prepared against: the last round's are
    # followed by the answer, which prepares nothing, so they need no replay
    last_round = max(r["round_index"] for r in records)
    earlier = [r["call_id"] for r in records if r["round_index"] < last_round]
    assert sorted(replayed) == sorted(earlier)


def _record(tool_name: str, n: int, round_index: int) -> ToolExecutionRecord:
    record = {
        "call_id": f"r:{round_index}:{n}",
        "tool_name": tool_name,
        "kwargs": {"n": n},
        "query_key": f'{tool_name}{{"n":{n}}}',
        "success": True,
        "error_type": None,
        "flagged": False,
        "round_index": round_index,
    }
    return record  # type: ignore[return-value]


def _state(run_id: str, records: list[ToolExecutionRecord]) -> LoopState:
    round_index = max((r["round_index"] for r in records), default=0)
    round_state = {"done_plans": records, "last_round_records": [], "round_index": round_index}
    return {"run_book": {"run_id": run_id}, "round_state": round_state}  # type: ignore[typeddict-item]


def _fresh(tracker: ReadTracker, records: list[ToolExecutionRecord]) -> dict[str, Any]:
    return {
        r["query_key"]: (tracker.ran_in(r["query_key"]), tracker.stale_after(r["query_key"]))
        for r in records
    }


def test_a_history_that_does_not_extend_the_last_one_is_replayed_whole() -> None:
    registry = ToolRegistry([get_item, set_item])
    replays = reads.RunReplays()
    first = [_record("get_item", 1, 1), _record("get_item", 2, 1)]
    fork = [_record("get_item", 1, 1), _record("set_item", 2, 1), _record("get_item", 3, 2)]
    everything = [*first, *fork]

    assert _fresh(
        reads.run_reads(registry, replays, _state("fork-run", first)), everything
    ) == _fresh(reads_so_far(first, registry.policy_or_none), everything)
    forked = reads.run_reads(registry, replays, _state("fork-run", fork))
    assert _fresh(forked, everything) == _fresh(
        reads_so_far(fork, registry.policy_or_none), everything
    )
    assert forked.ran_in(first[0]["query_key"]) is None  # set_item wrote after it
    assert forked.stale_after(first[0]["query_key"]) == "set_item"


def test_each_caller_gets_a_tracker_of_its_own() -> None:
    registry = ToolRegistry([get_item])
    replays = reads.RunReplays()
    state = _state("own-run", [_record("get_item", 1, 1)])
    one = reads.run_reads(registry, replays, state)
    one.read("get_item-other", 2, reads.state_touch(registry.policy("get_item"), None))
    two = reads.run_reads(registry, replays, state)
    assert one.ran_in("get_item-other") == 2
    assert two.ran_in("get_item-other") is None


def test_an_equal_copy_of_the_history_is_not_replayed_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    replayed: list[str] = []
    replay = reads.replay_records

    def counting(
        tracker: ReadTracker, records: Iterable[ToolExecutionRecord], policy_of: Any
    ) -> ReadTracker:
        records = list(records)
        replayed.extend(record["call_id"] for record in records)
        return replay(tracker, records, policy_of)

    monkeypatch.setattr(reads, "replay_records", counting)
    registry = ToolRegistry([get_item, set_item])
    replays = reads.RunReplays()
    first = [_record("get_item", 1, 1), _record("set_item", 2, 1)]
    reads.run_reads(registry, replays, _state("copy-run", first))
    restored = [cast(ToolExecutionRecord, dict(record)) for record in first]  # a checkpoint's
    later = [*restored, _record("get_item", 3, 2)]
    tracker = reads.run_reads(registry, replays, _state("copy-run", later))
    assert replayed == ["r:1:1", "r:1:2", "r:2:3"]  # equal records are not replayed again
    assert _fresh(tracker, later) == _fresh(reads_so_far(later, registry.policy_or_none), later)
