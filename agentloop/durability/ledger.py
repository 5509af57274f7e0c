"""The side-effect ledger: what each call of a thread started and how it ended.

A ledger maps a call's stable identity (thread, checkpoint namespace, call key) to an
entry: who claimed it, when, and the record it finished with. It is written durably
before a call with side effects starts (an atomic insert-if-absent, so of two workers
running the same call exactly one wins) and when any call finishes, and it is read
before every call. It is independent of checkpoint ids, so it holds across crashes,
LangGraph's default asynchronous durability, replays and forks.

`MemoryLedger` serves in-memory checkpointers (one process); `agentloop.durability.sql`
keeps a small table in an SQLite or PostgreSQL checkpointer's own database, and
`agentloop.durability.store` keeps entries in a LangGraph store (the LangGraph server's).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from agentloop.base.sync import pause, run_blocking

__all__ = [
    "OWNER",
    "LedgerEntry",
    "LedgerKey",
    "LedgerOp",
    "MemoryLedger",
    "OpName",
    "SideEffectLedger",
    "in_flight",
    "mark_running",
    "owner_is_gone",
    "unmark_running",
]


def _start_ticks(pid: int) -> str:
    """The start time of a process in clock ticks since boot ("" when unknown)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]


_HAS_PROC = Path("/proc/self/stat").exists()
_PROCESS_TOKEN = uuid.uuid4().hex[:12]
_HOST = socket.gethostname()

OWNER = f"{_HOST}|{os.getpid()}|{_start_ticks(os.getpid())}|{_PROCESS_TOKEN}"
"""Who claims calls from this process: host, pid, process start time, a random token."""


@dataclass(frozen=True)
class LedgerKey:
    """Where a call's entry lives."""

    thread_id: str
    """The thread of the run."""
    namespace: str
    """The loop's checkpoint namespace, node names only (`""` at the top level)."""
    call_key: str
    """The call's stable identity (see `agentloop.durability.identity.call_key`)."""


@dataclass(frozen=True)
class LedgerEntry:
    """A call as the ledger knows it."""

    owner: str
    """The process that claimed or finished it (`OWNER` of that process)."""
    started_at: float
    """When it was claimed (seconds since the epoch)."""
    outcome: dict[str, Any] | None = None
    """The record it finished with; None while it runs, or when its worker died."""


OpName = Literal[
    "get", "claim", "finish", "release", "take_over", "forget_thread", "stale_threads", "call_keys"
]


@dataclass(frozen=True)
class LedgerOp:
    """One operation on the ledger.

    - `get`: the entry of `key`, or None.
    - `claim`: claim `key` for `owner`: None when this owner won, else the entry that
      was there.
    - `finish`: store `outcome` as the call's (inserting the entry when it was not claimed).
    - `release`: remove `owner`'s claim of an unfinished call (it stopped before acting).
    - `take_over`: make `owner` the claimant and clear the outcome (a forced re-run).
    - `forget_thread`: drop every entry of `thread_id`.
    - `stale_threads`: the threads whose newest entry started before `before` and after
      `after`, oldest first, at most `limit`: `[(thread_id, newest started_at), ...]`.
    - `call_keys`: the call keys of `thread_id`'s entries that start with `prefix`.

    The two listings return None from a ledger that cannot list (`StoreLedger`).
    """

    name: OpName
    key: LedgerKey | None = None
    owner: str = ""
    outcome: dict[str, Any] | None = None
    thread_id: str = ""
    before: float = 0.0
    after: float = 0.0
    limit: int = 0
    prefix: str = ""

    @property
    def entry_key(self) -> LedgerKey:
        """The key of the entry the operation is about."""
        if self.key is None:
            msg = f"the ledger operation {self.name!r} needs a key"
            raise ValueError(msg)
        return self.key


class SideEffectLedger(ABC):
    """Where calls are claimed and their outcomes kept.

    A backend writes each operation once, as a coroutine (`operation`) that takes each
    step of I/O (a statement, a store read) in the form the caller runs in
    (`agentloop.base.sync.by_mode`): awaited with an event loop in the thread, blocking
    without one. `await ledger.operation(op)` performs it from async code, `perform(op)`
    from sync code. The sync methods (`get`, `claim`, `finish`, `release`, `take_over`,
    `forget_thread`) are shorthands for `perform`.

    `claim` is atomic: of several workers claiming one key, exactly one gets None back
    and runs the call; the others get the winner's entry. `cross_process` tells whether
    that holds across processes (a shared database) or within one process only;
    `durable` whether entries outlive this process (a restart of the server finds them).
    """

    cross_process: bool = False
    durable: bool = False

    @property
    def identity(self) -> int:
        """Which entries this object reaches, for telling which calls run in this process.

        Two ledger objects over the same entries (a store lent to each run) say the same.
        """
        return id(self)

    @abstractmethod
    async def operation(self, op: LedgerOp) -> Any:
        """Do one operation; it must not suspend when no event loop runs (`by_mode`)."""

    def perform(self, op: LedgerOp) -> Any:
        """Do one operation from sync code."""
        return run_blocking(self.operation(op))

    def get(self, key: LedgerKey) -> LedgerEntry | None:
        """Return the entry of a call, or None."""
        entry: LedgerEntry | None = self.perform(LedgerOp("get", key))
        return entry

    def claim(self, key: LedgerKey, owner: str) -> LedgerEntry | None:
        """Claim a call: None when this owner won, else the entry that was there."""
        entry: LedgerEntry | None = self.perform(LedgerOp("claim", key, owner))
        return entry

    def finish(self, key: LedgerKey, owner: str, outcome: dict[str, Any]) -> None:
        """Store a call's outcome (inserting the entry when the call was not claimed)."""
        self.perform(LedgerOp("finish", key, owner, outcome))

    def release(self, key: LedgerKey, owner: str) -> None:
        """Remove this owner's claim of an unfinished call (it stopped before acting)."""
        self.perform(LedgerOp("release", key, owner))

    def take_over(self, key: LedgerKey, owner: str) -> None:
        """Make `owner` the claimant of a call and clear its outcome (forced re-run)."""
        self.perform(LedgerOp("take_over", key, owner))

    def forget_thread(self, thread_id: str) -> None:
        """Drop every entry of a thread (after deleting the thread, say)."""
        self.perform(LedgerOp("forget_thread", thread_id=thread_id))


class MemoryLedger(SideEffectLedger):
    """A ledger in this process's memory, for in-memory checkpointers.

    Claims are atomic between the threads and event loops of this process.
    """

    cross_process = False

    def __init__(self) -> None:
        self._entries: dict[LedgerKey, LedgerEntry] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    async def operation(self, op: LedgerOp) -> Any:
        """Do one operation in memory (it never suspends)."""
        with self._lock:
            return self._apply(op)

    def _apply(self, op: LedgerOp) -> Any:
        if op.name == "forget_thread":
            for key in [k for k in self._entries if k.thread_id == op.thread_id]:
                del self._entries[key]
            return None
        if op.name == "stale_threads":
            newest: dict[str, float] = {}
            for key, entry in self._entries.items():
                newest[key.thread_id] = max(newest.get(key.thread_id, 0.0), entry.started_at)
            stale = sorted((at, t) for t, at in newest.items() if op.after < at < op.before)
            return [(thread, at) for at, thread in stale[: op.limit]]
        if op.name == "call_keys":
            return [
                k.call_key
                for k in self._entries
                if k.thread_id == op.thread_id and k.call_key.startswith(op.prefix)
            ]
        key = op.entry_key
        existing = self._entries.get(key)
        if op.name == "get":
            return existing
        if op.name == "claim":
            if existing is None:
                self._entries[key] = LedgerEntry(op.owner, time.time())
            return existing
        if op.name == "finish":
            started = existing.started_at if existing is not None else time.time()
            self._entries[key] = LedgerEntry(op.owner, started, op.outcome)
        elif op.name == "release":
            if existing is not None and existing.owner == op.owner and existing.outcome is None:
                del self._entries[key]
        else:  # take_over
            self._entries[key] = LedgerEntry(op.owner, time.time())
        return None


# --- who is running a claimed call ---------------------------------------------------

_in_flight: dict[tuple[int, LedgerKey], int] = {}
"""How many workers of this process run (or are claiming) a call, by ledger and key."""
_in_flight_lock = threading.Lock()


def mark_running(ledger: SideEffectLedger, key: LedgerKey) -> None:
    """Note that this process runs (or is claiming) a call; `unmark_running` undoes it once."""
    item = (ledger.identity, key)
    with _in_flight_lock:
        _in_flight[item] = _in_flight.get(item, 0) + 1


def unmark_running(ledger: SideEffectLedger, key: LedgerKey) -> None:
    """Undo one `mark_running`."""
    item = (ledger.identity, key)
    with _in_flight_lock:
        left = _in_flight.get(item, 0) - 1
        if left > 0:
            _in_flight[item] = left
        else:
            _in_flight.pop(item, None)


@contextlib.contextmanager
def in_flight(ledger: SideEffectLedger, key: LedgerKey) -> Iterator[None]:
    """Mark a call as running in this process while the block runs."""
    mark_running(ledger, key)
    try:
        yield
    finally:
        unmark_running(ledger, key)


def _running_here(ledger: SideEffectLedger, key: LedgerKey) -> bool:
    with _in_flight_lock:
        return (ledger.identity, key) in _in_flight


def owner_is_gone(ledger: SideEffectLedger, key: LedgerKey, owner: str) -> bool | None:
    """Tell whether the worker that claimed a call can still finish it.

    Returns:
        True when it is gone (this process no longer runs the call, or the claiming
        process on this host has exited), False when it is still running, None when
        that cannot be known (another host).
    """
    if owner == OWNER:
        return not _running_here(ledger, key)
    parts = owner.split("|")
    if len(parts) != 4 or parts[0] != _HOST:
        return None
    try:
        pid = int(parts[1])
    except ValueError:
        return None
    if _HAS_PROC:
        return _start_ticks(pid) != parts[2]  # exited, or its pid now names another process
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


async def pause_a_little(attempt: int) -> None:
    """Back off between two looks at a claimed call (50 ms growing to 500 ms)."""
    await pause(min(0.05 * (2**attempt), 0.5))
