"""Calls whose arguments refer to other commands' results, completed once those are known.

`execute` gives such a call the positions it depends on (`ToolRunner.defer`) and a batch
after theirs; `next_batch` attaches the referenced outcomes (`referenced_outcome`) when
it sends the call; the call task resolves the references and validates the resolved
arguments like any others (`complete_call`), or settles the call without running it
when a command it refers to failed or did not run (`reference_failed_record`).
"""

from __future__ import annotations

from agentloop.planning.references import REFERENCE_FAILED_TEMPLATE, resolve_references
from agentloop.state import PreparedCall, ReferencedOutcome, ToolExecutionRecord
from agentloop.tools.outcome import ToolOutcome
from agentloop.tools.pipeline import ToolRunner, make_record

__all__ = ["complete_call", "reference_failed_record", "referenced_outcome"]


def referenced_outcome(index: int, record: ToolExecutionRecord | None) -> ReferencedOutcome:
    """What a referring call needs of the record of command `index` (None: no record)."""
    if record is None:
        return {
            "index": index,
            "tool_name": "unknown",
            "success": False,
            "result": None,
            "error": "it produced no record",
        }
    return {
        "index": index,
        "tool_name": record["tool_name"],
        "success": record["success"],
        "result": record["result"],
        "error": record["error"],
    }


def reference_failed_record(
    call: PreparedCall, referenced: ReferencedOutcome
) -> ToolExecutionRecord:
    """The record of a call not run because a command it refers to failed."""
    message = REFERENCE_FAILED_TEMPLATE.format(
        tool_name=call["tool_name"],
        number=referenced["index"] + 1,
        referenced_tool=referenced["tool_name"],
        error=referenced["error"] or "it gave no result",
    )
    return make_record(call, ToolOutcome.refused("reference_failed", call["tool_name"], message))


def complete_call(
    runner: ToolRunner, call: PreparedCall
) -> tuple[PreparedCall, ToolExecutionRecord | None]:
    """Resolve a call's references from the outcomes attached to it, then validate it.

    Args:
        runner: The loop's tool runner (its `validate`).
        call: A call as sent to run; one without `depends_on` is returned as it is.

    Returns:
        The call with its resolved and validated arguments, and a finished record when it
        must not run: a referenced command failed (`reference_failed`), or the resolved
        arguments are invalid.
    """
    depends_on = call.get("depends_on")
    if not depends_on:
        return call, None
    outcomes = {outcome["index"]: outcome for outcome in call.get("referenced") or []}
    results = {}
    for index in depends_on:
        outcome = outcomes.get(index) or referenced_outcome(index, None)
        if not outcome["success"]:
            return call, reference_failed_record(call, outcome)
        results[index + 1] = outcome["result"]
    return runner.validate(call, resolve_references(call["kwargs"], results))
