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
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, Literal

from langgraph.errors import GraphBubbleUp

from agentloop.durability.ledger import (
    OWNER,
    LedgerEntry,
    LedgerKey,
    SideEffectLedger,
    in_flight,
    owner_is_gone,
    pause_a_little,
    wait_a_little,
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
_Op = tuple[Any, ...]
"""A ledger operation `_decide` asks its driver for."""


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

    # -- the decision, as a sequence of ledger operations --------------------------------

    def _decide(self) -> Generator[_Op, Any, Settled | None]:
        """Decide before running: a settled call, or None to run it (claimed if needed).

        Written once for both drivers: it yields the ledger operations to perform
        (`("get",)`, `("claim",)`, `("take_over",)`, `("pause", attempt)`) and receives
        their results, so `before` and `abefore` only differ in how they perform them.
        """
        entry = yield ("get",)
        settled = self._recorded(entry)
        if settled is not None or not self.side_effects:
            return settled
        if entry is not None and self.reexecute:
            yield ("take_over",)
            self.claimed = True
            return None
        lost = yield ("claim",)
        attempt = 0
        while lost is not None:
            step = self._step(lost, self._deadline(lost))
            if step == "replay":
                return Settled("replayed", lost.outcome)
            if step == "unknown":
                return self._unknown(lost)
            if step == "take_over":
                yield ("take_over",)
                break
            yield ("pause", attempt)
            attempt += 1
            lost = (yield ("get",)) or lost
        self.claimed = True
        return None

    # -- sync ------------------------------------------------------------------------------

    def before(self) -> Settled | None:
        """Decide before running (see `_decide`), performing the ledger operations."""
        decision = self._decide()
        result: Any = None
        try:
            while True:
                op = decision.send(result)
                if op[0] == "get":
                    result = self.ledger.get(self.key)
                elif op[0] == "claim":
                    result = self.ledger.claim(self.key, OWNER)
                elif op[0] == "take_over":
                    self.ledger.take_over(self.key, OWNER)
                    result = None
                else:
                    pause_a_little(op[1])
                    result = None
        except StopIteration as done:
            settled: Settled | None = done.value
            return settled

    def run(self, call: Callable[[], Record]) -> Record:
        """Run a call that `before` let through, and record its outcome."""
        with in_flight(self.ledger, self.key):
            try:
                record = call()
            except GraphBubbleUp:  # an interrupt: the tool asks first, then acts on resume
                self.abandon()
                raise
        self.ledger.finish(self.key, OWNER, record)
        return record

    def abandon(self) -> None:
        """Remove the claim of a call stopped before it acted (an interrupt)."""
        if self.claimed:
            self.ledger.release(self.key, OWNER)
            self.claimed = False

    # -- async -----------------------------------------------------------------------------

    async def abefore(self) -> Settled | None:
        """Async `before`."""
        decision = self._decide()
        result: Any = None
        try:
            while True:
                op = decision.send(result)
                if op[0] == "get":
                    result = await self.ledger.aget(self.key)
                elif op[0] == "claim":
                    result = await self.ledger.aclaim(self.key, OWNER)
                elif op[0] == "take_over":
                    await self.ledger.atake_over(self.key, OWNER)
                    result = None
                else:
                    await wait_a_little(op[1])
                    result = None
        except StopIteration as done:
            settled: Settled | None = done.value
            return settled

    async def arun(self, call: Callable[[], Awaitable[Record]]) -> Record:
        """Async `run`."""
        with in_flight(self.ledger, self.key):
            try:
                record = await call()
            except GraphBubbleUp:
                await self.aabandon()
                raise
        await self.ledger.afinish(self.key, OWNER, record)
        return record

    async def aabandon(self) -> None:
        """Async `abandon`."""
        if self.claimed:
            await self.ledger.arelease(self.key, OWNER)
            self.claimed = False
