"""The ledger's rules around one call: replay a recorded outcome, claim, wait, or run.

- A call whose entry holds an outcome is not run again: the outcome is returned and
  marked replayed (unless the run asks to re-execute).
- A call with side effects is claimed before it runs. When another worker holds the
  claim, this one waits (bounded by the call's timeout) for its outcome; when the
  claimant is gone without an outcome, the call may or may not have happened:
  `unknown_outcome`. A resumable call (a sub-agent, whose own calls are guarded)
  is entered again instead.
- Every call's outcome is recorded when it finishes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Literal

from langgraph.errors import GraphBubbleUp

from agentloop._effects import Core
from agentloop.durability.ledger import (
    OWNER,
    LedgerEntry,
    LedgerKey,
    LedgerOp,
    OpName,
    SideEffectLedger,
    in_flight,
    owner_is_gone,
    pause_a_little,
)

__all__ = ["CallGuard", "Settled"]

GRACE_S = 2.0
"""Extra wait for a live claimant beyond the call's timeout."""

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


@dataclass
class CallGuard:
    """Applies the ledger's rules to one call.

    Args:
        ledger: The run's ledger.
        key: Where the call's entry lives.
        side_effects: Whether the call is claimed before it runs (not idempotent).
        resumable: Whether a call whose claimant is gone is entered again.
        timeout_s: The call's time limit; bounds the wait for a live claimant.
        reexecute: Run the call even when its outcome is recorded.
    """

    ledger: SideEffectLedger
    key: LedgerKey
    side_effects: bool
    resumable: bool = False
    timeout_s: float = 30.0
    reexecute: bool = False
    claimed: bool = False

    # -- decisions -------------------------------------------------------------------------

    def _recorded(self, entry: LedgerEntry | None) -> Settled | None:
        if entry is not None and entry.outcome is not None and not self.reexecute:
            return Settled("replayed", entry.outcome)
        return None

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
        if owner_is_gone(self.ledger, self.key, entry.owner):
            reason = "it was started before the run stopped and did not report back"
        else:
            reason = "another worker started it and did not report back in time"
        return Settled("unknown_outcome", reason=reason)

    # -- the rules, as cores (see `agentloop._effects`) ------------------------------------

    def _ledger(self, name: OpName, outcome: Record | None = None) -> Core[Any]:
        return self.ledger.operation(LedgerOp(name, self.key, OWNER, outcome))

    def decide(self) -> Core[Settled | None]:
        """Decide before running: a settled call, or None to run it (claimed if needed).

        Written once for every driver: it yields the ledger's effects (and sleeps while
        another worker holds the claim); `drive(guard.decide())` performs them from sync
        code, `await adrive(guard.decide())` from async code (`agentloop._effects`).
        """
        entry = yield from self._ledger("get")
        settled = self._recorded(entry)
        if settled is not None or not self.side_effects:
            return settled
        if entry is not None and self.reexecute:
            yield from self._ledger("take_over")
            self.claimed = True
            return None
        lost = yield from self._ledger("claim")
        attempt = 0
        while lost is not None:
            step = self._step(lost, self._deadline(lost))
            if step == "replay":
                return Settled("replayed", lost.outcome)
            if step == "unknown":
                return self._unknown(lost)
            if step == "take_over":
                yield from self._ledger("take_over")
                break
            yield from pause_a_little(attempt)
            attempt += 1
            lost = (yield from self._ledger("get")) or lost
        self.claimed = True
        return None

    def record(self, run: Core[Record]) -> Core[Record]:
        """Run a call that `decide` let through, and record its outcome.

        Args:
            run: The core that runs the call; its result is the call's record. An
                interrupt it raises removes the claim (the tool asks first, then acts
                on resume) and propagates.
        """
        with in_flight(self.ledger, self.key):
            try:
                record = yield from run
            except GraphBubbleUp:
                if self.claimed:
                    yield from self._ledger("release")
                    self.claimed = False
                raise
        yield from self._ledger("finish", record)
        return record
