"""A run the server retries keeps the identity its first attempt had.

The LangGraph server (`langgraph dev`, LangGraph Server) names each run it starts
(`configurable["run_id"]`) and retries a run left running by a crashed process under
the same name, counting attempts (`metadata["run_attempt"]`; `langgraph dev` counts
again from 1 after a restart, so its count cannot tell a retry). The retried attempt
starts again from the thread's checkpoints, which may be older than what the first
attempt did (`langgraph dev` writes them about every 10 s, and not at all for a while
once a client has read the thread's state), so the turn it counts from them, or the id
of a message its input adds again, may name the run differently.

So the first attempt writes the run's identity in the ledger, before any call of the
run, under the server's name for the run (`run_record_key`); a later attempt of the same
run reads it back and names its calls as the first attempt did, so it finds the claims
that attempt made. The run's bookkeeping keeps that name too (`RunBook.server_run`),
and so does each call the run prepares.

A ledger that lacks the record cannot tell what an earlier attempt did. Only evidence
that an earlier attempt may have started a call makes that a warning:

- `RUN_RECORD_LOST`: a call with side effects is about to run, and the record its run
  committed before its first call (the checkpoint says so: the call names the run) is
  gone: the ledger lost entries (its file deleted, or older than the checkpoints), and a
  call an earlier attempt started may be made again. A retry `langgraph dev` resumes
  past the run's first step meets this, whatever attempt the server counts.
- `RETRY_WITHOUT_RECORD`: the server retries a run (attempt 2 or more), the thread holds
  a checkpoint the run wrote in an earlier attempt (`started_before`), and the record is
  missing. A retry of a run whose first attempt never reached the graph (a worker that
  took it and died) has no such checkpoint, and nothing to warn about: the record is
  committed before any call.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver

from agentloop.base.sync import by_mode
from agentloop.durability.ledger import OWNER, LedgerKey, LedgerOp, SideEffectLedger

__all__ = [
    "RETRY_WITHOUT_RECORD",
    "RUN_RECORD_LOST",
    "RunAttempt",
    "RunRecords",
    "run_attempt",
    "run_record_key",
    "settle_run_identity",
    "started_before",
]

RUN_KEY_PREFIX = "server-run:"
"""The ledger keeps a run's identity under `server-run:<the server's run id>`."""

RETRY_WITHOUT_RECORD = (
    "the server retries run {run} (attempt {attempt}), which wrote checkpoints in an "
    "earlier attempt, but the side-effect ledger ({ledger}) holds no record of it: a call "
    "with side effects that attempt started may be made again. Keep the ledger with the "
    "checkpoints (see docs/how-to/deploy.md)"
)
RUN_RECORD_LOST = (
    "run {run} recorded itself in the side-effect ledger ({ledger}) before its first "
    "call, as its checkpoints show, but the ledger holds no such record now: it lost "
    "entries (deleted, or older than the checkpoints), so a call with side effects an "
    "earlier attempt of the run started may be made again. Keep the ledger with the "
    "checkpoints (see docs/how-to/deploy.md)"
)
WALK_LIMIT = 1000
"""The most checkpoints `started_before` reads (a run writes a few per round)."""


@dataclass(frozen=True)
class RunAttempt:
    """A run as the server names it."""

    run_id: str
    """The server's id of the run, the same on every attempt."""
    attempt: int
    """1 for the first attempt, 2 for the first retry, and so on (as the server counts)."""


def run_attempt(config: Mapping[str, Any]) -> RunAttempt | None:
    """Return the server's run and attempt from a run's config, or None outside the server."""
    run_id = (config.get("configurable") or {}).get("run_id")
    if run_id is None or not str(run_id):
        return None
    attempt = (config.get("metadata") or {}).get("run_attempt")
    return RunAttempt(str(run_id), attempt if isinstance(attempt, int) else 1)


def run_record_key(thread_id: str, namespace: str, server_run: str) -> LedgerKey:
    """Where the ledger keeps the identity of the server's run `server_run`."""
    return LedgerKey(thread_id, namespace, f"{RUN_KEY_PREFIX}{server_run}")


async def settle_run_identity(
    ledger: SideEffectLedger, thread_id: str, namespace: str, run: RunAttempt, identity: str
) -> tuple[str, bool]:
    """Return the identity of a server run: the one its first attempt recorded, else `identity`.

    The first attempt to get here records `identity` (committed before the run's first
    call, like a claim).

    Args:
        ledger: The run's ledger.
        thread_id: The run's thread.
        namespace: The loop's namespace (`loop_namespace`).
        run: The server's run and attempt.
        identity: The identity counted from the checkpoints (`run_identity`).

    Returns:
        The identity, and whether the ledger held a record of the run already.
    """
    key = run_record_key(thread_id, namespace, run.run_id)
    entry = await ledger.operation(LedgerOp("get", key, OWNER))
    recorded = entry.outcome.get("run_id") if entry is not None and entry.outcome else None
    if isinstance(recorded, str) and recorded:
        return recorded, True
    await ledger.operation(LedgerOp("finish", key, OWNER, {"run_id": identity}))
    return identity, False


async def started_before(
    saver: BaseCheckpointSaver[Any], checkpoint: RunnableConfig, run: RunAttempt
) -> bool:
    """Tell whether the thread holds a checkpoint `run` wrote in an earlier attempt.

    Walks back from `checkpoint` through the checkpoints of the run (metadata `run_id`),
    newest first, for one whose `run_attempt` is lower than this attempt's.

    Args:
        saver: The run's checkpointer.
        checkpoint: The config of the checkpoint the asking task runs from.
        run: The server's run and attempt.
    """
    cursor: RunnableConfig | None = checkpoint
    for _ in range(WALK_LIMIT):
        if cursor is None:
            return False
        found = await by_mode(partial(saver.get_tuple, cursor), partial(saver.aget_tuple, cursor))
        if found is None or str(found.metadata.get("run_id")) != run.run_id:
            return False
        attempt = found.metadata.get("run_attempt")
        if isinstance(attempt, int) and attempt < run.attempt:
            return True
        cursor = found.parent_config
    return False


class RunRecords:
    """The run records one loop looked up in its ledger (`LoopParts.run_records`).

    A run's calls with side effects each ask whether the ledger still holds the record
    their run committed before its first call; the ledger is read once per run and
    process, the oldest runs forgotten first beyond `entries`.

    Args:
        entries: How many runs it remembers.
    """

    def __init__(self, entries: int = 1024) -> None:
        self._entries = entries
        self._seen: dict[tuple[int, LedgerKey], None] = {}
        self._lock = threading.Lock()

    async def lost(self, ledger: SideEffectLedger, key: LedgerKey) -> bool:
        """Tell whether the ledger lacks the record at `key`: True once, on the first look."""
        item = (ledger.identity, key)
        with self._lock:
            if item in self._seen:
                return False
            while self._seen and len(self._seen) >= self._entries:
                del self._seen[next(iter(self._seen))]
            self._seen[item] = None
        entry = await ledger.operation(LedgerOp("get", key, OWNER))
        return entry is None
