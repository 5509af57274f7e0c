"""The run's reads and writes so far, as `execute` and streaming dispatch see them.

Both prepare a round's calls in command order against the same history: the records of
the run (rolled-back rounds included) replayed into a `ReadTracker`
(`agentloop.tools.freshness`), then each call of the round noted as it is placed, so a
repeated read is a duplicate only while no write came between, and a read and a possible
write of the same state keep their order.
"""

from __future__ import annotations

from typing import Any

from agentloop.checkpoint_safe import decode_arguments
from agentloop.nodes.parts import LoopParts
from agentloop.state import LoopState, PreparedCall, ToolExecutionRecord, empty_round_state
from agentloop.tools.freshness import ReadTracker, reads_so_far, state_touch
from agentloop.tools.policy import ResolvedPolicy

__all__ = ["mark_after_write", "note_call", "run_history", "run_reads"]


def run_history(state: LoopState) -> list[ToolExecutionRecord]:
    """Every record of the run so far in the order the calls happened.

    The records of a rolled-back round come before the records of the round that
    replaced it.
    """
    round_state = state.get("round_state") or empty_round_state()
    rolled_back: dict[int, list[ToolExecutionRecord]] = {}
    for rollback in state.get("rollbacks") or []:
        rolled_back.setdefault(int(rollback["round_index"]), []).extend(rollback["records"])
    history: list[ToolExecutionRecord] = []
    for record in round_state["done_plans"]:
        history.extend(rolled_back.pop(int(record.get("round_index", 0)), []))
        history.append(record)
    for index in sorted(rolled_back):
        history.extend(rolled_back[index])
    return history


def run_reads(parts: LoopParts, state: LoopState) -> ReadTracker:
    """The reads of the run so far that no later write made stale."""
    return reads_so_far(run_history(state), parts.registry.policy_or_none)


def note_call(parts: LoopParts, reads: ReadTracker, call: PreparedCall) -> list[int]:
    """Note a call of the round that will run: a write makes overlapping reads stale.

    A call whose arguments wait for other commands' results touches its whole state.

    Returns:
        The positions of the round's earlier calls it must run after, even when both
        are concurrency-safe: for a read, the calls that may write what it reads; for a
        call that may write, the reads of what it may change.
    """
    spec = parts.registry.spec(call["tool_name"])
    if spec is None:
        return []
    policy = spec.policy
    touch = state_touch(policy, None if call.get("depends_on") else _state_arguments(call, policy))
    follows = reads.place(call["index"], touch, writes=policy.writes_state)
    if policy.writes_state:
        reads.write(touch, call["tool_name"])
    if policy.idempotent:
        reads.read(call["query_key"], call["round_index"], touch)
    return follows


def _state_arguments(call: PreparedCall, policy: ResolvedPolicy) -> dict[str, Any]:
    """The arguments `state_touch` reads: the tool's state keys only, decoded."""
    encoded = call["arguments"]
    keys = [name for name in policy.state_keys if name in encoded]
    return decode_arguments({name: encoded[name] for name in keys}) if keys else {}


def mark_after_write(call: PreparedCall, write: str) -> None:
    """Mark a read that runs again because a write made its earlier result stale."""
    call["after_write"] = write
    call["notes"] = [
        *call["notes"],
        f"ran again: {write} ran after the earlier call and may have changed its result",
    ]
