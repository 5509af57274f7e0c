"""Calls whose arguments refer to other commands' results, completed once those are known.

`execute` gives such a call the positions it depends on (`ToolRunner.defer`) and a batch
after theirs; `next_batch` attaches the referenced outcomes (`referenced_outcome`) when
it sends the call; the call task resolves the references and validates the resolved
arguments like any others (`complete_call`), or settles the call without running it
when a command it refers to failed or did not run (`reference_failed_record`). A
reference stands for the whole result (`agentloop.governance.whole_results`), never a cut one
handed silently to a tool.
"""

from __future__ import annotations

from agentloop.governance.call_id import kept_under
from agentloop.governance.outcome import ToolOutcome
from agentloop.governance.pipeline import ToolRunner, make_record
from agentloop.planning.references import (
    REFERENCE_FAILED_TEMPLATE,
    REFERENCE_UNAVAILABLE_TEMPLATE,
    resolve_references,
)
from agentloop.state import PreparedCall, ReferencedOutcome, ToolExecutionRecord

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
    outcome: ReferencedOutcome = {
        "index": index,
        "tool_name": record["tool_name"],
        "success": record["success"],
        "result": record["result"],
        "error": record["error"],
    }
    if record.get("truncated"):  # the record holds a cut result: the whole one is kept apart
        outcome["cut_from"] = record["call_id"]
    return outcome


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

    A reference stands for the whole result of the command it names: where the record
    holds a cut result, the whole one the runner kept is used. Where that is no longer
    at hand, a call of a tool that is not read-only is not run (`reference_unavailable`);
    a read gets the cut result, and its record says so (`truncated`, a note).

    Args:
        runner: The loop's tool runner (its `validate` and kept whole results).
        call: A call as sent to run; one without `depends_on` is returned as it is.

    Returns:
        The call with its resolved and validated arguments, and a finished record when it
        must not run: a referenced command failed (`reference_failed`), its whole result
        is not at hand for a write (`reference_unavailable`), or the resolved arguments
        are invalid.
    """
    depends_on = call.get("depends_on")
    if not depends_on:
        return call, None
    outcomes = {outcome["index"]: outcome for outcome in call.get("referenced") or []}
    results = {}
    cut: list[str] = []
    for index in depends_on:
        outcome = outcomes.get(index) or referenced_outcome(index, None)
        if not outcome["success"]:
            return call, reference_failed_record(call, outcome)
        results[index + 1] = outcome["result"]
        cut_from = outcome.get("cut_from")
        if cut_from is None:
            continue
        whole = runner.whole_results.get(kept_under(call), cut_from)
        if whole is not None:
            results[index + 1] = whole.value
            continue
        policy = runner.tools.registry.policy_or_none(call["tool_name"])
        if policy is None or not policy.read_only:
            return call, _unavailable_record(call, outcome)
        cut.append(
            f"${index + 1} ({outcome['tool_name']}) is its result cut to the size budget: "
            "the whole result is no longer at hand"
        )
    call, refused = runner.validate(call, resolve_references(call["kwargs"], results))
    if refused is None and cut:
        call = {**call, "notes": [*call["notes"], *cut], "cut_references": True}
    return call, refused


def _unavailable_record(call: PreparedCall, referenced: ReferencedOutcome) -> ToolExecutionRecord:
    message = REFERENCE_UNAVAILABLE_TEMPLATE.format(
        tool_name=call["tool_name"],
        number=referenced["index"] + 1,
        referenced_tool=referenced["tool_name"],
    )
    outcome = ToolOutcome.refused("reference_unavailable", call["tool_name"], message)
    return make_record(call, outcome)
