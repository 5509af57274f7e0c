"""Idempotency keys: one key names one request of one user, for a day.

A run submitted with an idempotency key names its calls by the key instead of its own
run (`settle_idempotency_key` gives the name), so a later submission of the same request
finds the first one's calls in the ledger. What a key names:

- **Whose.** A key is scoped by the loop's namespace and by who asked (the run's
  `context` and user configuration: `agentloop.governance.cache_scope.run_identity` without
  the thread, the LangGraph server's authenticated user among them), so the same key
  from another user is another key and never returns your calls' results.
- **Which request.** The first submission claims the key with a digest of its request
  (an atomic insert-if-absent in the ledger, so of two submissions at once exactly one
  claims it). A later submission of the key with another request is refused
  (`IdempotencyConflictError`) before anything runs: it is never paid twice.
- **How long.** A key holds for `IDEMPOTENCY_KEY_TTL_S` from its first submission; a
  submission after that is a new request (its calls run), and so is a submission after
  the ledger forgot the key's entries.

A submission after a failure runs the failed call again (once, however many submissions
arrive at the same time): see `agentloop.durability.guard`.
"""

from __future__ import annotations

import hashlib
import time
import uuid

from agentloop.durability.identity import ledger_thread, name_digest
from agentloop.durability.ledger import LedgerEntry, LedgerKey, LedgerOp, SideEffectLedger
from agentloop.errors import IdempotencyConflictError

__all__ = [
    "IDEMPOTENCY_KEY_TTL_S",
    "idempotency_scope",
    "settle_idempotency_key",
]

IDEMPOTENCY_KEY_TTL_S = 24 * 3600.0
"""How long a key names its first submission's request (from that submission)."""

REQUEST_ENTRY = "request"
"""The ledger entry of a key that holds its request's digest (in its `owner`)."""
_CLAIM_PREFIX = "request|"


def idempotency_scope(namespace: str, owner: str, key: str) -> str:
    """Name an idempotency key: the same for every submission of it by one user to one loop.

    Args:
        namespace: The loop's namespace (`loop_namespace`).
        owner: Who asked (`run_identity(..., thread=False)`).
        key: The run's idempotency key (validated: see `agentloop.state`).

    Returns:
        A 16-character id.
    """
    return name_digest("idempotency", namespace, owner, key)


def request_digest(request: str) -> str:
    """A digest of a run's request, which a key's later submissions must match."""
    return hashlib.sha256(request.encode("utf-8", "surrogatepass")).hexdigest()[:32]


async def settle_idempotency_key(
    ledger: SideEffectLedger | None, namespace: str, owner: str, key: str, request: str
) -> str:
    """Name the calls of a run submitted with an idempotency key (`RunBook.idempotency_scope`).

    The first submission claims the key in the ledger with its request's digest; a later
    one within `IDEMPOTENCY_KEY_TTL_S` with the same request gets the same name, so it
    finds the first one's calls.

    Args:
        ledger: The run's ledger (None without a checkpointer: the key then names the
            calls of this run only, as nothing is kept between runs).
        namespace: The loop's namespace (`loop_namespace`).
        owner: Who asked (`run_identity(..., thread=False)`).
        key: The run's idempotency key.
        request: The run's request.

    Returns:
        The name of the run's calls in place of its run id; the ledger keeps them under
        `ledger_thread` of it.

    Raises:
        IdempotencyConflictError: The key was submitted by this user within the last
            `IDEMPOTENCY_KEY_TTL_S` with another request.
    """
    scope = idempotency_scope(namespace, owner, key)
    if ledger is None:
        return scope
    entry = LedgerKey(ledger_thread(scope), namespace, REQUEST_ENTRY)
    digest = request_digest(request)
    mine = f"{_CLAIM_PREFIX}{digest}|{uuid.uuid4().hex[:16]}"
    held: LedgerEntry | None = None
    for _ in range(3):
        held = await ledger.operation(LedgerOp("claim", entry, mine))
        if held is None:
            return name_digest(scope, mine)
        if time.time() - held.started_at <= IDEMPOTENCY_KEY_TTL_S:
            break
        # expired: the next submission claims it anew (one of several at once wins)
        await ledger.operation(LedgerOp("release", entry, held.owner))
    assert held is not None  # the loop claims, or finds the claim, at least once
    claimed_for = held.owner.removeprefix(_CLAIM_PREFIX).split("|", 1)[0]
    if claimed_for != digest:
        msg = (
            f"the idempotency key {key!r} was submitted before with another request: a "
            "key names one request. Submit this request with a new key, or the first "
            "request again with this one."
        )
        raise IdempotencyConflictError(msg)
    return name_digest(scope, held.owner)
