"""How long the side-effect ledger keeps entries, and the sweep that deletes the rest.

The ledger keeps one entry per call (and one per run the LangGraph server names), and a
replay of any checkpoint of a thread needs them, so a live thread's entries are kept as
long as the thread. Nothing tells the loop when a thread is deleted (`threads.delete`
of the LangGraph server, its TTL sweeps, `checkpointer.delete_thread`): the checkpoints
go, the entries stay. So a sweep deletes the entries of threads the checkpointer no
longer holds, once their newest entry is older than `LedgerRetention.grace_s` (a run's
entries may be written before its first checkpoint is: under `durability="exit"`, or
while an asynchronous write is on its way).

The entries of runs submitted with an idempotency key live under the key
(`ledger_thread`), which no checkpointer holds: each such run also writes a holder entry
there naming its thread (`key_holder`), and the sweep deletes a key's entries once no
thread that holds it lives and its newest entry is older than `LedgerRetention.keys_s`.
A key submitted again after that is a new request.

So the ledger holds the entries of live threads, of keys a live thread holds or that
were used within `keys_s`, and of deleted threads for at most `grace_s` plus the time to
the next sweep. A loop sweeps at the start of a run (`prepare`), at most once every
`every_s` per ledger, looking at `threads` threads at most each time (one page, from
where its last page stopped: live threads it looked at do not hold up the others);
`sweep_ledger` looks at them all. A ledger given
with `GovernanceOptions(ledger=...)` may serve other checkpointers, so it is swept only
by a call of `sweep_ledger` with the checkpointer that holds all its threads.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from functools import partial
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from agentloop.base.sync import by_mode
from agentloop.durability.identity import KEY_THREAD_PREFIX
from agentloop.durability.ledger import OWNER, LedgerKey, LedgerOp, SideEffectLedger
from agentloop.errors import ConfigurationError

__all__ = [
    "KEY_HOLDER_PREFIX",
    "LedgerRetention",
    "LedgerSweeps",
    "SweptPage",
    "hold_key",
    "key_holder",
    "sweep_ledger",
    "sweep_page",
]

KEY_HOLDER_PREFIX = "thread:"
"""The call key of a holder entry under an idempotency key: `thread:<thread id>`."""
DAY_S = 86400.0


@dataclass(frozen=True)
class LedgerRetention:
    """How long the ledger keeps the entries of deleted threads and of idempotency keys.

    Attributes:
        grace_s: A thread the checkpointer no longer holds loses its entries once its
            newest one is older than this (longer than any run goes without its first
            checkpoint).
        keys_s: An idempotency key no live thread holds loses its entries once its
            newest one is older than this: a submission of the key after that is a new
            request.
        every_s: A loop sweeps at most once this often per ledger, at the start of a run.
        threads: The most threads one sweep looks at (the stalest first).
    """

    grace_s: float = DAY_S
    keys_s: float = 7 * DAY_S
    every_s: float = 3600.0
    threads: int = 100

    def __post_init__(self) -> None:
        """Reject values that cannot work."""
        for name in ("grace_s", "keys_s", "every_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                msg = f"LedgerRetention.{name} must be a number of seconds >= 0, got {value!r}"
                raise ConfigurationError(msg)
        if isinstance(self.threads, bool) or not isinstance(self.threads, int) or self.threads < 1:
            msg = f"LedgerRetention.threads must be a positive integer, got {self.threads!r}"
            raise ConfigurationError(msg)


def key_holder(thread_id: str) -> str:
    """The call key of the entry that says `thread_id` holds an idempotency key."""
    return f"{KEY_HOLDER_PREFIX}{thread_id}"


async def hold_key(
    ledger: SideEffectLedger, key_thread: str, namespace: str, thread_id: str
) -> None:
    """Note under an idempotency key (`key_thread`) that `thread_id` ran a request with it."""
    holder = LedgerKey(key_thread, namespace, key_holder(thread_id))
    await ledger.operation(LedgerOp("finish", holder, OWNER, {}))


async def _lives(saver: BaseCheckpointSaver[Any], thread_id: str) -> bool:
    """Whether the checkpointer holds a checkpoint of the thread."""
    if isinstance(saver, InMemorySaver):  # its `get_tuple` would add an empty thread
        return any(saver.storage.get(thread_id, {}).values())
    config: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    found = await by_mode(partial(saver.get_tuple, config), partial(saver.aget_tuple, config))
    return found is not None


async def _key_held(ledger: SideEffectLedger, saver: BaseCheckpointSaver[Any], key: str) -> bool:
    """Whether a live thread holds the idempotency key kept as thread `key` (True: unknown)."""
    holders = await ledger.operation(LedgerOp("call_keys", thread_id=key, prefix=KEY_HOLDER_PREFIX))
    if holders is None:
        return True
    for holder in holders:
        if await _lives(saver, holder.removeprefix(KEY_HOLDER_PREFIX)):
            return True
    return False


@dataclass(frozen=True)
class SweptPage:
    """What one page of a sweep did."""

    forgotten: list[str]
    """The threads (and `idempotency:` keys) whose entries were deleted."""
    after: float | None
    """Where the next page starts (the newest entry's time it looked at); None: it was the last."""


async def sweep_page(
    ledger: SideEffectLedger,
    checkpointer: BaseCheckpointSaver[Any],
    retention: LedgerRetention,
    *,
    now: float,
    after: float = 0.0,
) -> SweptPage:
    """Sweep the `retention.threads` stalest threads whose newest entry is newer than `after`."""
    before = now - min(retention.grace_s, retention.keys_s)
    listing = LedgerOp("stale_threads", before=before, after=after, limit=retention.threads)
    stale = await ledger.operation(listing)
    if stale is None:
        return SweptPage([], None)  # a ledger that cannot list its threads
    forgotten: list[str] = []
    for thread_id, newest in stale:
        if thread_id.startswith(KEY_THREAD_PREFIX):
            if newest >= now - retention.keys_s or await _key_held(ledger, checkpointer, thread_id):
                continue
        elif newest >= now - retention.grace_s or await _lives(checkpointer, thread_id):
            continue
        await ledger.operation(LedgerOp("forget_thread", thread_id=thread_id))
        forgotten.append(thread_id)
    last = len(stale) < retention.threads
    return SweptPage(forgotten, None if last else stale[-1][1])


async def sweep_ledger(
    ledger: SideEffectLedger,
    checkpointer: BaseCheckpointSaver[Any],
    retention: LedgerRetention | None = None,
    *,
    now: float | None = None,
) -> list[str]:
    """Delete the entries of threads `checkpointer` no longer holds, and of unheld keys.

    Looks at every thread whose newest entry is old enough, `retention.threads` at a time
    (a loop's own sweep looks at one such page per `every_s`, going on where it stopped).
    Awaited from async code; run with `run_blocking` from sync code (`agentloop.base.sync`).

    Args:
        ledger: The ledger; it must keep only threads of `checkpointer`.
        checkpointer: The checkpointer whose threads the ledger keeps.
        retention: How long entries are kept (default: `LedgerRetention()`).
        now: The time to count ages from (default: now).

    Returns:
        The threads (and `idempotency:` keys) whose entries were deleted; [] from a
        ledger that cannot list its threads (`StoreLedger`).
    """
    retention = retention or LedgerRetention()
    now = time.time() if now is None else now
    forgotten: list[str] = []
    after: float | None = 0.0
    while after is not None:
        page = await sweep_page(ledger, checkpointer, retention, now=now, after=after)
        forgotten += page.forgotten
        after = page.after
    return forgotten


class LedgerSweeps:
    """When one loop last swept each ledger, and where its next page starts (`LoopParts.sweeps`)."""

    def __init__(self) -> None:
        self._last: dict[int, float] = {}
        self._after: dict[int, float] = {}
        self._lock = threading.Lock()

    def due(self, ledger: SideEffectLedger, every_s: float) -> float | None:
        """Where a sweep of `ledger` that is due starts (noted as started now), else None."""
        now = time.monotonic()
        with self._lock:
            last = self._last.get(ledger.identity)
            if last is not None and now - last < every_s:
                return None
            self._last[ledger.identity] = now
            return self._after.get(ledger.identity, 0.0)

    def went_to(self, ledger: SideEffectLedger, after: float | None) -> None:
        """Note where the next sweep of `ledger` starts (None: from the stalest again)."""
        with self._lock:
            self._after[ledger.identity] = after or 0.0
