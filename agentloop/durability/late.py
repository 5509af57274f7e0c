"""Writing the late outcome of a call to the ledger, once the call's own record is there.

A call with side effects that timed out and could not be stopped is recorded as
`unknown_outcome`; when its work finishes later, its real record replaces that entry,
so a replay of the call returns what really happened. The late record may arrive before
the `unknown_outcome` record is written (a race between the tool's thread and the call
task): it is then held back until `ready`.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any

from agentloop.durability.ledger import OWNER, LedgerKey, LedgerOp, SideEffectLedger

__all__ = ["LateLedgerWriter"]

logger = logging.getLogger(__name__)

Record = dict[str, Any]

_writes: set[asyncio.Task[Any]] = set()
"""Ledger writes scheduled on an event loop (kept until done)."""


class LateLedgerWriter:
    """Records a call's late outcome in the ledger (a `LateOutcome` callback).

    Args:
        ledger: The run's ledger.
        key: The call's entry.
        prepare: Applied to the record first (redaction, checkpoint safety).
    """

    def __init__(
        self, ledger: SideEffectLedger, key: LedgerKey, prepare: Callable[[Any], Any]
    ) -> None:
        self.ledger = ledger
        self.key = key
        self.prepare = prepare
        self._lock = threading.Lock()
        self._ready = False
        self._held: Record | None = None

    def __call__(self, record: Any) -> None:
        """Write a late record now, or once the call's own record is written."""
        with self._lock:
            if not self._ready:
                self._held = record
                return
        self._write(record)

    def ready(self) -> None:
        """The call's own record is in the ledger: a late record may replace it now."""
        with self._lock:
            self._ready = True
            held, self._held = self._held, None
        if held is not None:
            self._write(held)

    def _write(self, record: Any) -> None:
        outcome: Record = dict(self.prepare(record))
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        try:
            if loop is None:
                self.ledger.finish(self.key, OWNER, outcome)
                return
            finish = LedgerOp("finish", self.key, OWNER, outcome)
            task = loop.create_task(self.ledger.operation(finish))
        except Exception:
            logger.exception("the late outcome of %s could not be recorded", self.key.call_key)
            return
        _writes.add(task)
        task.add_done_callback(_written)


def _written(task: asyncio.Task[Any]) -> None:
    _writes.discard(task)
    if not task.cancelled() and task.exception() is not None:
        logger.error("a late outcome could not be recorded: %s", task.exception())
