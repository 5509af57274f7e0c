"""A run the server retries keeps the identity its first attempt had.

The LangGraph server (`langgraph dev`, LangGraph Server) names each run it starts
(`configurable["run_id"]`) and retries a run left running by a crashed process under
the same name, counting attempts (`metadata["run_attempt"]`). The retried attempt starts
again from the thread's checkpoints, which may be older than what the first attempt did
(`langgraph dev` writes them about every 10 s, and not at all for a while once a client
has read the thread's state), so the turn it counts from them, or the id of a message
its input adds again, may name the run differently.

So the first attempt writes the run's identity in the ledger, before any call of the
run, under the server's name for the run; a later attempt of the same run reads it back
and names its calls as the first attempt did, so it finds the claims that attempt made.
A later attempt that finds no such record (the ledger lost it: checkpoints that outlive
the ledger) cannot tell what the first attempt did: `RETRY_WITHOUT_RECORD` says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentloop.durability.ledger import OWNER, LedgerKey, LedgerOp, SideEffectLedger

__all__ = ["RETRY_WITHOUT_RECORD", "RunAttempt", "run_attempt", "settle_run_identity"]

RUN_KEY_PREFIX = "server-run:"
"""The ledger keeps a run's identity under `server-run:<the server's run id>`."""

RETRY_WITHOUT_RECORD = (
    "the server retries run {run} (attempt {attempt}), but the side-effect ledger "
    "({ledger}) holds no record of its earlier attempt: a call with side effects that "
    "attempt started may be made again. Keep the ledger with the checkpoints (see the "
    "README's Deployment section)"
)


@dataclass(frozen=True)
class RunAttempt:
    """A run as the server names it."""

    run_id: str
    """The server's id of the run, the same on every attempt."""
    attempt: int
    """1 for the first attempt, 2 for the first retry, and so on."""


def run_attempt(config: Mapping[str, Any]) -> RunAttempt | None:
    """Return the server's run and attempt from a run's config, or None outside the server."""
    run_id = (config.get("configurable") or {}).get("run_id")
    if run_id is None or not str(run_id):
        return None
    attempt = (config.get("metadata") or {}).get("run_attempt")
    return RunAttempt(str(run_id), attempt if isinstance(attempt, int) else 1)


async def settle_run_identity(
    ledger: SideEffectLedger, thread_id: str, namespace: str, run: RunAttempt, identity: str
) -> tuple[str, str | None]:
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
        The identity, and a warning when a retried attempt found no record of the first.
    """
    key = LedgerKey(thread_id, namespace, f"{RUN_KEY_PREFIX}{run.run_id}")
    entry = await ledger.operation(LedgerOp("get", key, OWNER))
    recorded = entry.outcome.get("run_id") if entry is not None and entry.outcome else None
    if isinstance(recorded, str) and recorded:
        return recorded, None
    await ledger.operation(LedgerOp("finish", key, OWNER, {"run_id": identity}))
    if run.attempt <= 1:
        return identity, None
    name = type(ledger).__name__
    return identity, RETRY_WITHOUT_RECORD.format(run=run.run_id, attempt=run.attempt, ledger=name)
