"""The ledger's rules around one call: replay a recorded outcome, claim, wait, or run.

- A call is looked up by its key, then by its aliases (its other names: see
  `agentloop.durability.identity`); the first entry found is the call's.
- A call whose entry holds an outcome is not run again: the outcome is returned and
  marked replayed (unless the run asks to re-execute).
- A call with side effects is claimed before it runs. A call whose entry holds a claim
  is guarded like one, whatever its tool's policy says now: the code that claimed it
  knew it had side effects, and a deploy since may have declared it read-only. When
  another worker holds the claim, this one waits (bounded by the call's timeout) for
  its outcome; when the claimant is gone without an outcome, the call may or may not
  have happened: `unknown_outcome`. A resumable call (a sub-agent, whose own calls are
  guarded) is entered again instead.
- Every call's outcome is recorded when it finishes, with the invocation that ran it
  (`SUBMISSION_FIELD`).
- A failure is not an outcome to replay to another submission: a call whose recorded
  outcome is a failure (`status` `failed`) that another invocation of the run recorded
  (a request submitted again, with its idempotency key or on its thread) runs again.
  Its new attempt is an entry of its own (`retry_key`), claimed like any call, so of
  several submissions at once exactly one runs it. A resume, replay or fork of the run
  that recorded the failure (the same invocation) replays it.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Coroutine
from dataclasses import dataclass
from typing import Any, Literal

from langgraph.errors import GraphBubbleUp

from agentloop.durability.ledger import (
    OWNER,
    LedgerEntry,
    LedgerKey,
    LedgerOp,
    OpName,
    SideEffectLedger,
    mark_running,
    owner_is_gone,
    pause_a_little,
    unmark_running,
)

__all__ = [
    "STARTED_BEFORE_STOP",
    "STARTED_ELSEWHERE",
    "SUBMISSION_FIELD",
    "CallGuard",
    "Settled",
    "retry_key",
]

STARTED_BEFORE_STOP = "it was started before the run stopped and did not report back"
STARTED_ELSEWHERE = "another worker started it and did not report back in time"

GRACE_S = 2.0
"""Extra wait for a live claimant beyond the call's timeout."""
SUBMISSION_FIELD = "submission"
"""The field of a recorded outcome naming the invocation that ran the call (stripped
from the record a replay returns)."""

Record = dict[str, Any]


@dataclass(frozen=True)
class Settled:
    """A call decided without running it."""

    kind: Literal["replayed", "unknown_outcome"]
    outcome: Record | None = None
    """The recorded outcome (for `replayed`)."""
    reason: str = ""
    """Why the outcome is unknown (for `unknown_outcome`)."""


_Step = Literal["replay", "wait", "unknown", "take_over"]


def retry_key(key: LedgerKey, failed_by: str) -> LedgerKey:
    """Where the next attempt of a call lives, after the attempt `failed_by` ran failed."""
    return LedgerKey(key.thread_id, key.namespace, f"{key.call_key}~{failed_by[:32]}")


@dataclass
class CallGuard:
    """Applies the ledger's rules to one call.

    Args:
        ledger: The run's ledger.
        key: Where the call's entry lives.
        side_effects: Whether the call is claimed before it runs (not idempotent).
        aliases: Where an entry of the call may live too (looked up when `key` holds
            none; the guard then works on the entry it found).
        resumable: Whether a call whose claimant is gone is entered again.
        timeout_s: The call's time limit; bounds the wait for a live claimant.
        reexecute: Run the call even when its outcome is recorded.
        submission: The invocation the call serves (`RunBook.invocation`): recorded with
            its outcome; another's recorded failure runs the call again ("": never).
    """

    ledger: SideEffectLedger
    key: LedgerKey
    side_effects: bool
    aliases: tuple[LedgerKey, ...] = ()
    resumable: bool = False
    timeout_s: float = 30.0
    reexecute: bool = False
    submission: str = ""
    claimed: bool = False
    running: bool = False
    """This process is marked as running the call (from before its claim to its outcome)."""

    # -- decisions -------------------------------------------------------------------------

    def _recorded(self, entry: LedgerEntry | None) -> Settled | None:
        if entry is not None and entry.outcome is not None and not self.reexecute:
            return Settled("replayed", entry.outcome)
        return None

    def _failed_elsewhere(self, entry: LedgerEntry) -> str:
        """The invocation whose recorded failure this submission runs again ("": none).

        An outcome recorded without its invocation (by an earlier version) is replayed.
        """
        outcome = entry.outcome
        if not self.submission or outcome is None or outcome.get("status") != "failed":
            return ""
        failed_by = outcome.get(SUBMISSION_FIELD)
        if not isinstance(failed_by, str) or failed_by == self.submission:
            return ""
        return failed_by

    def _step(self, entry: LedgerEntry, deadline: float) -> _Step:
        if entry.outcome is not None:
            return "replay"
        gone = owner_is_gone(self.ledger, self.key, entry.owner)
        if gone:
            return "take_over" if self.resumable else "unknown"
        if time.time() > deadline:
            return "unknown"
        return "wait"

    def _deadline(self, entry: LedgerEntry) -> float:
        return entry.started_at + self.timeout_s + GRACE_S

    def _unknown(self, entry: LedgerEntry) -> Settled:
        gone = owner_is_gone(self.ledger, self.key, entry.owner)
        return Settled("unknown_outcome", reason=STARTED_BEFORE_STOP if gone else STARTED_ELSEWHERE)

    # -- the rules, as coroutines that block under `run_blocking` (`agentloop.base.sync`) ------

    def _ledger(self, name: OpName, outcome: Record | None = None) -> Coroutine[Any, Any, Any]:
        return self.ledger.operation(LedgerOp(name, self.key, OWNER, outcome))

    async def find(self) -> LedgerEntry | None:
        """The call's entry: under its key, else under the first alias that holds one.

        The guard then works on the key the entry was found under.
        """
        entry: LedgerEntry | None = await self._ledger("get")
        for alias in self.aliases:
            if entry is not None:
                break
            entry = await self.ledger.operation(LedgerOp("get", alias, OWNER))
            if entry is not None:
                self.key = alias
        while entry is not None and (failed_by := self._failed_elsewhere(entry)):
            self.key = retry_key(self.key, failed_by)  # its next attempt
            entry = await self._ledger("get")
        return entry

    async def decide(self) -> Settled | None:
        """Decide before running: a settled call, or None to run it (claimed if needed).

        Written once for both entry points: awaited from async code, run with
        `run_blocking(guard.decide())` from sync code (the ledger's I/O and the waits
        while another worker holds the claim then block).
        """
        entry = await self.find()
        settled = self._recorded(entry)
        if settled is not None:
            return settled
        claimed_before = entry is not None and entry.outcome is None
        if not (self.side_effects or claimed_before):
            return None
        if entry is not None and self.reexecute:
            await self._ledger("take_over")
            self._mark_running()
            self.claimed = True
            return None
        lost = await self._claim()
        attempt = 0
        while lost is not None:
            step = self._step(lost, self._deadline(lost))
            failed_by = self._failed_elsewhere(lost) if step == "replay" else ""
            if failed_by:  # another submission's attempt failed while this one waited
                self.key = retry_key(self.key, failed_by)
                lost, attempt = await self._claim(), 0
                continue
            if step == "replay":
                return Settled("replayed", lost.outcome)
            if step == "unknown":
                return self._unknown(lost)
            if step == "take_over":
                await self._ledger("take_over")
                self._mark_running()
                break
            await pause_a_little(attempt)
            attempt += 1
            lost = (await self._ledger("get")) or lost
        self.claimed = True
        return None

    def _mark_running(self) -> None:
        if not self.running:
            mark_running(self.ledger, self.key)
            self.running = True

    def _unmark_running(self) -> None:
        if self.running:
            unmark_running(self.ledger, self.key)
            self.running = False

    async def _claim(self) -> LedgerEntry | None:
        """Claim the call, marked as running here from before the claim.

        Another worker of this process that finds the claim then sees its claimant alive
        (and waits for the outcome) even in the instant between the claim and the call.
        """
        self._mark_running()
        try:
            lost: LedgerEntry | None = await self._ledger("claim")
        except BaseException:
            self._unmark_running()
            raise
        if lost is not None:
            self._unmark_running()
        return lost

    async def record(self, run: Awaitable[Record]) -> Record:
        """Run a call that `decide` let through, and record its outcome.

        The call counts as running in this process until its outcome is recorded, so a
        worker waiting on its claim sees an outcome or a live claimant, never a gap.

        Args:
            run: The coroutine that runs the call; its result is the call's record. An
                interrupt it raises removes the claim (the tool asks first, then acts
                on resume) and propagates.
        """
        self._mark_running()
        try:
            try:
                record = await run
            except GraphBubbleUp:
                if self.claimed:
                    await self._ledger("release")
                    self.claimed = False
                raise
            recorded = {**record, SUBMISSION_FIELD: self.submission} if self.submission else record
            await self._ledger("finish", recorded)
        finally:
            self._unmark_running()
        return record
