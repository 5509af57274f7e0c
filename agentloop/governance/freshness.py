"""Read after write: which earlier reads a call with side effects makes stale.

Duplicate detection and the result cache answer a read from an earlier one only while
nothing may have changed what it read. Each tool reads or writes one *state*
(`ToolPolicy(state_scope=...)`; by default every local tool shares one state and each
MCP server has its own), optionally narrowed by arguments (`ToolPolicy(state_keys=...)`,
for example `("account",)`). A call of a tool that may write is a write: once it ran (or
may have), every earlier read of the same state is stale, unless both name a state key
and disagree on it. A stale read asked again runs again, and its record names the write
(`after_write`). Every tool may write unless it is known to only read (declared
`read_only=True`, a name `reads_by_name` accepts such as `get_weather`, or MCP's
`readOnlyHint`): an undeclared tool may change what the reads saw.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from agentloop.errors import NOT_RUN_ERRORS
from agentloop.governance.policy import ResolvedPolicy
from agentloop.state import ToolExecutionRecord

__all__ = [
    "ReadTracker",
    "StateTouch",
    "reads_so_far",
    "replay_records",
    "state_touch",
]


@dataclass(frozen=True, slots=True)
class StateTouch:
    """The part of a state a call reads or writes.

    Attributes:
        scope: The state (`ResolvedPolicy.state_scope`).
        keys: `(argument, canonical JSON value)` of the tool's state keys the call gave.
    """

    scope: str
    keys: tuple[tuple[str, str], ...] = ()

    def overlaps(self, other: StateTouch) -> bool:
        """Whether the two may touch the same data: same scope, no state key in conflict."""
        if self.scope != other.scope:
            return False
        mine = dict(self.keys)
        return all(mine.get(name, value) == value for name, value in other.keys)


def state_touch(policy: ResolvedPolicy, arguments: Mapping[str, Any] | None) -> StateTouch:
    """Return what a call with these arguments touches (no arguments: the whole scope)."""
    if not policy.state_keys or arguments is None:
        return StateTouch(policy.state_scope)
    keys = tuple(
        (name, json.dumps(arguments[name], sort_keys=True, default=str))
        for name in sorted(policy.state_keys)
        if name in arguments
    )
    return StateTouch(policy.state_scope, keys)


class ReadTracker:
    """The reads that are still fresh, as calls happen in order.

    `read` notes a query that ran; `write` makes the reads it overlaps stale; `ran_in`
    tells whether a query's earlier result may still be used, `stale_after` which write
    made it stale.
    """

    def __init__(self) -> None:
        self._fresh: dict[str, tuple[int, StateTouch]] = {}
        self._stale: dict[str, str] = {}
        self._placed: list[tuple[int, StateTouch, bool]] = []
        """The round's calls noted so far: position, touch, whether it may write."""

    def copy(self) -> ReadTracker:
        """A tracker with the same reads and calls placed, changed independently."""
        twin = ReadTracker()
        twin._fresh = dict(self._fresh)
        twin._stale = dict(self._stale)
        twin._placed = list(self._placed)
        return twin

    def read(self, query_key: str, round_index: int, touch: StateTouch) -> None:
        """Note a query that ran (the first fresh run of it is kept)."""
        if query_key not in self._fresh:
            self._fresh[query_key] = (round_index, touch)
        self._stale.pop(query_key, None)

    def place(self, position: int, touch: StateTouch, *, writes: bool) -> list[int]:
        """Place a call of the round being prepared; return the earlier ones it must follow.

        A call that may write follows the round's earlier reads it overlaps (they must
        see the state before it), and a read follows the earlier writes it overlaps.
        Calls of the same kind stay free to run side by side.
        """
        follows = [
            earlier
            for earlier, other, other_writes in self._placed
            if other_writes != writes and other.overlaps(touch)
        ]
        self._placed.append((position, touch, writes))
        return follows

    def write(self, touch: StateTouch, tool_name: str) -> None:
        """Note a write: every fresh read it overlaps becomes stale."""
        for query_key, (_, read) in list(self._fresh.items()):
            if read.overlaps(touch):
                del self._fresh[query_key]
                self._stale[query_key] = tool_name

    def ran_in(self, query_key: str) -> int | None:
        """The round of the query's fresh earlier run, or None."""
        found = self._fresh.get(query_key)
        return None if found is None else found[0]

    def stale_after(self, query_key: str) -> str:
        """The tool whose call made the query's earlier result stale ("" if none did)."""
        return self._stale.get(query_key, "")


def reads_so_far(
    records: Iterable[ToolExecutionRecord],
    policy_of: Callable[[str], ResolvedPolicy | None],
) -> ReadTracker:
    """Replay the records of a run, oldest first, into a tracker of its fresh reads.

    A successful, unflagged record of an idempotent tool is a read of its query; a
    record of a tool that may write (`writes_state`) whose call ran (or may have) is a
    write, before its own read.
    Records of tools the loop no longer has are skipped.

    Args:
        records: The run's records in the order they happened (`done_plans`, with the
            records of rolled-back rounds before their round's).
        policy_of: The current policy of a tool, by name.
    """
    return replay_records(ReadTracker(), records, policy_of)


def replay_records(
    tracker: ReadTracker,
    records: Iterable[ToolExecutionRecord],
    policy_of: Callable[[str], ResolvedPolicy | None],
) -> ReadTracker:
    """Replay more records of a run into `tracker` (as `reads_so_far`); return it."""
    for record in records:
        policy = policy_of(record["tool_name"])
        if policy is None:
            continue
        arguments = record.get("kwargs")
        plain = type(arguments) is dict or isinstance(arguments, Mapping)  # a dict: no ABC
        touch = state_touch(policy, arguments if plain else None)
        if policy.writes_state and record.get("error_type") not in NOT_RUN_ERRORS:
            tracker.write(touch, record["tool_name"])
        key = record.get("query_key")
        usable = record["success"] and not record.get("flagged")
        if isinstance(key, str) and usable and policy.idempotent:
            tracker.read(key, int(record.get("round_index", 0)), touch)
    return tracker
