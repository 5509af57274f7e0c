"""The execute path: start a round, run its calls batch by batch, collect the round.

- `execute` prepares the round's commands (resolve, repair, validate, find duplicates,
  name each call) and splits the runnable ones into batches: consecutive
  concurrency-safe calls form one parallel batch (at most `concurrency` calls), an
  unsafe call forms a batch of its own.
- Each batch is one super-step of `call_tool` tasks sent with `Send`, one per call
  (see `agentloop.nodes.call_tool`).
- `collect` runs after each batch; once every call is done it orders the records by
  command, judges the round (rollback when every call was flagged) and updates
  `round_state`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from langgraph.runtime import Runtime
from langgraph.types import Overwrite, Send

from agentloop.durability import call_key
from agentloop.nodes.parts import LoopParts
from agentloop.settings import LoopContext
from agentloop.state import (
    LoopState,
    PreparedCall,
    ToolExecutionRecord,
    empty_round_state,
    new_round,
    run_limit,
)
from agentloop.tools.judge import compact_record, executed_queries
from agentloop.tools.outcome import ToolOutcome
from agentloop.tools.pipeline import emit_settled, make_record
from agentloop.usage import sum_usage

__all__ = [
    "CALL_NODE",
    "NOT_RUN",
    "assign_batches",
    "make_collect",
    "make_execute",
    "next_batch",
    "route_collect",
    "route_execute",
    "round_records",
]

CALL_NODE = "call_tool"
NOT_RUN = -1
"""Batch number of a call that was settled without running (bad call, duplicate)."""


def assign_batches(safe: Sequence[bool], concurrency: int | None) -> list[int]:
    """Number the batches of calls, in order.

    Consecutive safe calls share a batch of at most `concurrency` calls; an unsafe call
    has a batch of its own, so it waits for the calls before it and the calls after it
    wait for it.

    Args:
        safe: Whether each runnable call is concurrency-safe, in command order.
        concurrency: Most calls per batch (None: no limit).

    Returns:
        The batch number of each call.
    """
    batches: list[int] = []
    current, size, current_safe = -1, 0, False
    for is_safe in safe:
        full = concurrency is not None and size >= concurrency
        if current < 0 or not is_safe or not current_safe or full:
            current, size = current + 1, 0
        batches.append(current)
        size += 1
        current_safe = is_safe
    return batches


def _pending(state: LoopState) -> list[PreparedCall]:
    results = state.get("call_results") or {}
    return [
        call
        for call in state.get("round_calls") or []
        if call["batch"] != NOT_RUN and call["call_id"] not in results
    ]


def next_batch(state: LoopState) -> list[Send]:
    """Return one `Send` per call of the first unfinished batch (empty when none is left)."""
    pending = _pending(state)
    if not pending:
        return []
    batch = min(call["batch"] for call in pending)
    return [Send(CALL_NODE, call) for call in pending if call["batch"] == batch]


def round_records(
    calls: Sequence[PreparedCall], results: dict[str, ToolExecutionRecord]
) -> list[ToolExecutionRecord]:
    """Return the records of a round in command order, whatever order they finished in."""
    records: list[ToolExecutionRecord] = []
    for call in calls:
        record = results.get(call["call_id"])
        if record is None:
            outcome = ToolOutcome.failure("internal_error", "the call produced no record")
            record = make_record(call, outcome)
        records.append(record)
    return records


def _repeatable(parts: LoopParts, call: PreparedCall) -> bool:
    """Whether a repeated call may be answered by the earlier one (never for side effects)."""
    spec = parts.registry.spec(call["tool_name"])
    return spec is not None and spec.policy.idempotent


def _duplicate_record(
    call: PreparedCall, first_round: int, same_round: bool
) -> ToolExecutionRecord:
    where = "earlier in this round" if same_round else f"in round {first_round}"
    message = (
        f"Duplicate query: {call['tool_name']} with these arguments already ran {where}; "
        "its result is in done_plans. Use it instead of repeating the call."
    )
    outcome = ToolOutcome.refused("duplicate", call["tool_name"], message)
    return make_record(call, outcome, flagged=True, duplicate=True)


def _over_cap_record(call: PreparedCall, count: int, cap: int) -> ToolExecutionRecord:
    message = (
        f"The plan had {count} commands; at most {cap} run per round, so this one was not "
        "run. Plan fewer calls per round, most important first."
    )
    return make_record(call, ToolOutcome.refused("too_many_commands", call["tool_name"], message))


def route_execute(state: LoopState) -> list[Send] | Literal["collect"]:
    """Send the first batch, or go straight to `collect` when nothing has to run."""
    return next_batch(state) or "collect"


def route_collect(state: LoopState) -> list[Send] | Literal["plan", "answer"]:
    """Send the next batch; after the round, plan again unless `max_rounds` is reached."""
    sends = next_batch(state)
    if sends:
        return sends
    round_state = state.get("round_state") or empty_round_state()
    limit = run_limit(state, "max_rounds")
    return "answer" if round_state["round_index"] >= limit else "plan"


def make_execute(parts: LoopParts) -> Any:
    """Build the `execute` node: prepare the round's calls, settle the ones that must not run."""

    def execute(state: LoopState, runtime: Runtime[LoopContext]) -> dict[str, Any]:
        scope = parts.scope(runtime)
        decision = state.get("decision") or {"next_action": "response", "execution_commands": []}
        round_state = state.get("round_state") or empty_round_state()
        round_index = round_state["round_index"]
        rollbacks = state.get("consecutive_rollbacks", 0)
        allow_duplicates = rollbacks >= scope.settings.max_consecutive_rollbacks
        executed = executed_queries(round_state["done_plans"])
        run_id = state.get("run_id", "run")
        round_label = f"{round_index}.{rollbacks}" if rollbacks else str(round_index)
        calls: list[PreparedCall] = []
        settled: dict[str, ToolExecutionRecord] = {}
        this_round: set[str] = set()
        occurrences: dict[str, int] = {}
        commands = decision["execution_commands"]
        cap = scope.settings.max_commands_per_round
        for index, command in enumerate(commands):
            if index >= cap:
                call = parts.runner.unprepared(
                    command,
                    call_id=f"{run_id}:{round_label}:{index}",
                    round_index=round_index,
                    index=index,
                )
                settled[call["call_id"]] = _over_cap_record(call, len(commands), cap)
                calls.append(call)
                continue
            call, record = parts.runner.prepare(
                command,
                call_id=f"{run_id}:{round_label}:{index}",
                round_index=round_index,
                index=index,
            )
            identity = f"{call['tool_name']}\x1f{call['query_key']}"
            occurrence = occurrences.get(identity, 0)
            occurrences[identity] = occurrence + 1
            call["call_key"] = call_key(
                run_id, round_label, call["tool_name"], call["arguments"], occurrence
            )
            key = call["query_key"]
            repeated = key in executed or key in this_round
            if record is None and repeated and not allow_duplicates and _repeatable(parts, call):
                record = _duplicate_record(call, executed.get(key, round_index), key in this_round)
            if record is None:
                this_round.add(key)
            else:
                record["call_key"] = call["call_key"]  # named after the record was made
                settled[call["call_id"]] = record
            calls.append(call)
        runnable = [call for call in calls if call["call_id"] not in settled]
        will_run = {call["call_id"] for call in runnable}
        parts.inflight.cancel_calls(run_id, keep=will_run.__contains__)
        safe = [c["concurrency_safe"] for c in runnable]
        for call, batch in zip(
            runnable, assign_batches(safe, scope.settings.concurrency), strict=True
        ):
            call["batch"] = batch
        for call in calls:
            scope.emit(
                "tool_queued",
                call_id=call["call_id"],
                tool_name=call["tool_name"],
                index=call["index"],
                batch=call["batch"],
                will_run=call["batch"] != NOT_RUN,
            )
        for record in settled.values():
            emit_settled(scope.emit, record)
        # the calls carry the planner's (already safe) arguments, encoded for the checkpoint;
        # a settled record shows them decoded, so it is made safe again
        return {"round_calls": calls, "call_results": parts.safe_value(settled)}

    return execute


def make_collect(parts: LoopParts) -> Any:
    """Build the `collect` node: once every call finished, order, judge and record the round."""

    def collect(state: LoopState, runtime: Runtime[LoopContext]) -> dict[str, Any]:
        calls = state.get("round_calls") or []
        if not calls or _pending(state):
            return {}
        scope = parts.scope(runtime)
        emit = scope.emit
        records = round_records(calls, state.get("call_results") or {})
        round_state = state.get("round_state") or empty_round_state()
        rollbacks = state.get("consecutive_rollbacks", 0)
        emit("queue_drained", round_index=round_state["round_index"], calls=len(records))
        update: dict[str, Any] = {
            "round_calls": [],
            "call_results": Overwrite({}),
            "tool_logs": records,
        }
        sub_agents = [r["agent_usage"] for r in records if r.get("agent_usage")]
        if sub_agents:
            update["usage"] = sum_usage(sub_agents)
        all_flagged = bool(records) and all(record.get("flagged") for record in records)
        if all_flagged and rollbacks < scope.settings.max_consecutive_rollbacks:
            reasons = [f"- {r['tool_name']}: {r['error']}" for r in records]
            emit(
                "tool_rolled_back",
                round_index=round_state["round_index"],
                consecutive=rollbacks + 1,
                reasons=[r["error"] for r in records],
            )
            return {
                **update,
                "consecutive_rollbacks": rollbacks + 1,
                "rollback_note": parts.prompts.render("rollback_note", reasons="\n".join(reasons)),
                "rollbacks": [
                    *(state.get("rollbacks") or []),
                    {
                        "round_index": round_state["round_index"],
                        "consecutive": rollbacks + 1,
                        "records": [compact_record(r) for r in records],
                    },
                ],
            }
        stored = [compact_record(r) if r.get("flagged") else r for r in records]
        emit(
            "round_completed",
            round_index=round_state["round_index"],
            calls=len(records),
            succeeded=sum(1 for r in stored if r["success"]),
            failed=sum(1 for r in stored if not r["success"]),
        )
        return {
            **update,
            "round_state": new_round(stored, round_state["round_index"] + 1),
            "consecutive_rollbacks": rollbacks if all_flagged else 0,
        }

    return collect
