"""The late outcome of a call that timed out as `unknown_outcome` and finished anyway.

A sync tool's thread, or an async tool that ignored its cancellation, runs on after its
timeout. When it finishes, its result (or error) becomes the call's real record, handed
to a `LateOutcome` callback (the side-effect ledger records it, so a replay of the call
returns what really happened).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Callable
from typing import Any

from agentloop.errors import ToolCallError, classify_tool_error
from agentloop.governance.artifacts import unpack_output
from agentloop.governance.outcome import ToolOutcome, graceful_error
from agentloop.governance.output import bounded_json
from agentloop.state import ToolExecutionRecord

__all__ = ["LATE_NOTE", "LateOutcome", "watch_late_outcome"]

logger = logging.getLogger(__name__)

LateOutcome = Callable[[ToolExecutionRecord], None]
"""Called with the record of a call that finished after it was reported `unknown_outcome`."""

LATE_NOTE = "late outcome: the call finished after its timeout had been reported"


def _late_outcome(pending: Any, tool_name: str) -> ToolOutcome | None:
    """The outcome of a finished late call (None when it was cancelled)."""
    if pending.cancelled():
        return None
    error = pending.exception()
    if error is not None:
        message = str(error) or type(error).__name__
        error_type = classify_tool_error(error)
        return ToolOutcome(
            graceful_error(error_type, tool_name, message), False, message, error_type
        )
    value, _ = unpack_output(pending.result())
    return ToolOutcome(value=value)


def watch_late_outcome(
    pending: asyncio.Future[Any] | concurrent.futures.Future[Any],
    tool_name: str,
    max_chars: int,
    deliver: Callable[[ToolOutcome, bool], None],
) -> None:
    """Hand the outcome of a late call to `deliver` when `pending` completes.

    Args:
        pending: The call's running work (a thread's future, or a task).
        tool_name: The tool.
        max_chars: Its result budget.
        deliver: Called with the outcome (its value JSON data within the budget, a note
            saying it is late) and whether it was truncated; a failure there is logged,
            never raised. Not called when the work ends cancelled.
    """

    def finished(done: Any) -> None:
        try:
            outcome = _late_outcome(done, tool_name)
            if outcome is None:
                return
            try:
                bounded = bounded_json(outcome.value, max_chars, tool_name)
            except ToolCallError as error:
                outcome = ToolOutcome.failure(error.error_type, error.message)
                failed = graceful_error(error.error_type, tool_name, error.message)
                bounded = bounded_json(failed, max_chars)
            deliver(
                outcome.with_changes(value=bounded.value, notes=(LATE_NOTE,)), bounded.truncated
            )
        except Exception:
            logger.exception("the late outcome of %s could not be recorded", tool_name)

    pending.add_done_callback(finished)
