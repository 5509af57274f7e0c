"""The run's reads and writes so far, as `execute` and streaming dispatch see them.

Both prepare a round's calls in command order against the same history: the records of
the run (rolled-back rounds included) replayed into a `ReadTracker`
(`agentloop.governance.freshness`), then each call of the round noted as it is placed, so a
repeated read is a duplicate only while no write came between, and a read and a possible
write of the same state keep their order.

The replay is kept per run by the loop (`RunReplays`, `LoopParts.replays`): the plan
node's streaming dispatch (once per reply) and `execute` prepare against the same
history, and each round adds only its own records, so a history that extends the one
replayed last replays just the new records.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from agentloop.base.checkpoint_safe import decode_arguments
from agentloop.governance.freshness import ReadTracker, replay_records, state_touch
from agentloop.governance.policy import ResolvedPolicy
from agentloop.governance.registry import ToolRegistry
from agentloop.state import (
    LoopState,
    PreparedCall,
    ToolExecutionRecord,
    empty_round_state,
    invocation_of,
)

__all__ = ["RunReplays", "mark_after_write", "note_call", "run_history", "run_reads"]


def run_history(state: LoopState) -> list[ToolExecutionRecord]:
    """Every record of the run so far in the order the calls happened.

    The records of a rolled-back round come before the records of the round that
    replaced it.
    """
    round_state = state.get("round_state") or empty_round_state()
    rollbacks = state.get("rollbacks")
    if not rollbacks:
        return list(round_state["done_plans"])
    rolled_back: dict[int, list[ToolExecutionRecord]] = {}
    for rollback in rollbacks:
        rolled_back.setdefault(int(rollback["round_index"]), []).extend(rollback["records"])
    history: list[ToolExecutionRecord] = []
    for record in round_state["done_plans"]:
        history.extend(rolled_back.pop(int(record.get("round_index", 0)), []))
        history.append(record)
    for index in sorted(rolled_back):
        history.extend(rolled_back[index])
    return history


RecordKey = tuple[Any, ...]
"""What replaying a record reads of it: its values of `_REPLAYED_FIELDS`."""


@dataclass(frozen=True, slots=True)
class _Replayed:
    """A run's history as last replayed: the registry, each record's key, the tracker."""

    registry: ToolRegistry
    keys: list[RecordKey]
    tracker: ReadTracker


class RunReplays:
    """The last replay of a loop's recent runs, by run id (`LoopParts.replays`).

    A run in flight is among the recent ones (each of its rounds keeps its replay anew,
    as the newest); beyond `runs`, the run kept longest ago is dropped. Each compiled
    loop holds its own.

    Args:
        runs: How many runs it remembers.
    """

    def __init__(self, runs: int = 256) -> None:
        self._runs = runs
        self._replayed: dict[str, _Replayed] = {}
        self._lock = threading.Lock()  # writers only: a dict read is atomic

    def __len__(self) -> int:
        """How many runs it remembers now."""
        return len(self._replayed)

    def get(self, run_id: str) -> _Replayed | None:
        """A run's last replay, if it is still kept."""
        try:
            return self._replayed[run_id]
        except KeyError:
            return None

    def keep(self, run_id: str, replayed: _Replayed) -> None:
        """Keep a run's replay (it replaces the run's earlier one)."""
        with self._lock:
            self._replayed.pop(run_id, None)
            while self._replayed and len(self._replayed) >= self._runs:
                del self._replayed[next(iter(self._replayed))]
            self._replayed[run_id] = replayed


_REPLAYED_FIELDS = (
    "tool_name", "kwargs", "error_type", "query_key", "success", "flagged", "round_index",
)  # fmt: skip
"""The fields of a record that replaying it reads (`replay_records`): two records with the
same values of them replay alike."""


def run_reads(registry: ToolRegistry, replays: RunReplays, state: LoopState) -> ReadTracker:
    """The reads of the run so far that no later write made stale.

    Each call returns a tracker of its own. The records are replayed once: a history
    that starts with the one this run replayed last (with the same tools) replays only
    its new records; any other (a fork, an edited state) is replayed whole.
    """
    history = run_history(state)
    keys = [tuple(map(record.get, _REPLAYED_FIELDS)) for record in history]
    run_id = invocation_of(state)
    last = replays.get(run_id)
    done = 0
    if last is not None and last.registry is registry and keys[: len(last.keys)] == last.keys:
        done = len(last.keys)
        tracker = last.tracker.copy()
    else:
        tracker = ReadTracker()
    if done < len(keys) or last is None:
        replay_records(tracker, history[done:], registry.policy_or_none)
        replays.keep(run_id, _Replayed(registry, keys, tracker.copy()))
    return tracker


def note_call(registry: ToolRegistry, reads: ReadTracker, call: PreparedCall) -> list[int]:
    """Note a call of the round that will run: a write makes overlapping reads stale.

    A call whose arguments wait for other commands' results touches its whole state.

    Returns:
        The positions of the round's earlier calls it must run after, even when both
        are concurrency-safe: for a read, the calls that may write what it reads; for a
        call that may write, the reads of what it may change.
    """
    spec = registry.spec(call["tool_name"])
    if spec is None:
        return []
    policy = spec.policy
    # without state keys (most tools) a call touches its whole scope, whatever its arguments
    waits = not policy.state_keys or call.get("depends_on")
    touch = state_touch(policy, None if waits else _state_arguments(call, policy))
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
