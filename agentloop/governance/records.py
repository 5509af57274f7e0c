"""The execution record of a call, and the event of a call settled without running."""

from __future__ import annotations

from agentloop.base.call_shapes import status_of
from agentloop.base.checkpoint_safe import decode_arguments
from agentloop.governance.call_id import tool_call_id
from agentloop.governance.outcome import ToolOutcome
from agentloop.governance.policy import DEFAULT_MAX_RESULT_CHARS
from agentloop.governance.results import truncate_result
from agentloop.observability.events import Emit, ToolFailed
from agentloop.state import PreparedCall, ToolExecutionRecord

__all__ = ["emit_settled", "make_record"]


def make_record(
    call: PreparedCall,
    outcome: ToolOutcome,
    *,
    duration_ms: float = 0.0,
    truncated: bool = False,
    flagged: bool = False,
    duplicate: bool = False,
) -> ToolExecutionRecord:
    """Build the execution record of a call from its outcome.

    The arguments of a call that referred to other results are recorded within the
    result budget (the tool got them whole).
    """
    kwargs = decode_arguments(call["arguments"]) or call["kwargs"]
    if call.get("depends_on"):
        kwargs = truncate_result(kwargs, DEFAULT_MAX_RESULT_CHARS).value
    record: ToolExecutionRecord = {
        "purpose": call["purpose"],
        "tool_name": call["tool_name"],
        "kwargs": kwargs,
        "todo_suggestion": call["todo_suggestion"],
        "next": call["todo_suggestion"],
        "success": outcome.success,
        "result": outcome.value,
        "error": "" if outcome.success else outcome.error,
        "call_id": call["call_id"],
        "tool_call_id": tool_call_id(call),
        "call_key": call["call_key"],
        "round_index": call["round_index"],
        "index": call["index"],
        "error_type": outcome.error_type,
        "duration_ms": round(duration_ms, 3),
        "attempts": outcome.attempts,
        "from_cache": outcome.from_cache,
        "fallback": outcome.fallback,
        "duplicate": duplicate,
        "truncated": truncated or bool(call.get("cut_references")),
        "flagged": flagged,
        "query_key": call["query_key"],
    }
    if outcome.state_update:
        record["state_update"] = outcome.state_update
    if call.get("position_key"):
        record["position_key"] = call["position_key"]
    if call.get("after_write"):
        record["after_write"] = call["after_write"]
    if outcome.notes or call["notes"]:
        record["notes"] = [*call["notes"], *outcome.notes]
    if outcome.stale_age_s is not None:
        record["stale"] = True
        record["stale_age_s"] = round(outcome.stale_age_s, 3)
    record["status"] = status_of(
        outcome.success, outcome.error_type, outcome.from_cache, outcome.fallback
    )
    return record


def emit_settled(emit: Emit, record: ToolExecutionRecord) -> None:
    """Report a call that was settled without running (bad call, duplicate, unknown outcome)."""
    emit(
        ToolFailed(
            call_id=record.get("call_id", ""),
            tool_name=record["tool_name"],
            index=record.get("index", 0),
            error=record["error"],
            error_type=record.get("error_type", ""),
            success=False,
            duration_ms=0.0,
        )
    )
