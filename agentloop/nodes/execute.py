"""The execute path: start a round, run its calls batch by batch, collect the round.

- `execute` prepares the round's commands (resolve, repair, validate, find duplicates,
  name each call) and splits the runnable ones into batches: concurrency-safe calls
  share a parallel batch (at most `concurrency` calls), an unsafe call forms a batch of
  its own. A command whose arguments refer to earlier commands' results (`"$N"`,
  `"${N}"`, see `agentloop.planning.references`) is validated only once they are
  known: it runs in a batch after theirs, and fails without running when one of them
  failed or did not run (`reference_failed`).
- Each batch is one super-step of `call_tool` tasks sent with `Send`, one per call
  (see `agentloop.nodes.call_tool`); a referring call carries the outcomes it needs.
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
from agentloop.events import QueueDrained, RoundCompleted, ToolQueued, ToolRolledBack
from agentloop.nodes.parts import LoopParts
from agentloop.nodes.reads import mark_after_write, note_call, run_reads
from agentloop.planning.references import command_dependencies
from agentloop.prompts import to_prompt_json
from agentloop.settings import LoopContext
from agentloop.state import (
    LoopState,
    PreparedCall,
    ReferencedOutcome,
    ToolExecutionRecord,
    empty_round_state,
    new_round,
    run_limit,
)
from agentloop.tools.deferred import reference_failed_record, referenced_outcome
from agentloop.tools.judge import compact_record
from agentloop.tools.outcome import ToolOutcome
from agentloop.tools.pipeline import emit_settled, make_record
from agentloop.updates import CollectUpdate, ExecuteUpdate
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


def assign_batches(
    safe: Sequence[bool],
    concurrency: int | None,
    waits_for: Sequence[Sequence[int]] | None = None,
) -> list[int]:
    """Number the batches of calls, in order.

    Safe calls share a batch of at most `concurrency` calls: each joins the first batch
    with room that comes after the batches of the calls it waits for. An unsafe call has
    a batch of its own after every batch so far, and the calls after it come after it,
    so it runs alone, after the calls before it, and the calls after it wait for it.
    Without `waits_for`, consecutive safe calls share a batch.

    Args:
        safe: Whether each runnable call is concurrency-safe, in command order.
        concurrency: Most calls per batch (None: no limit).
        waits_for: For each call, the positions (in `safe`) of the earlier calls whose
            results it needs (None: no call needs another's).

    Returns:
        The batch number of each call.

    Raises:
        ValueError: A call waits for itself or for a later call.
    """
    batches: list[int] = []
    sizes: list[int] = []
    floor = 0  # the first batch a call may join: the one after the last unsafe call
    for position, is_safe in enumerate(safe):
        needed = waits_for[position] if waits_for is not None else ()
        if any(not 0 <= earlier < position for earlier in needed):
            msg = f"call {position} may wait only for earlier calls, not {list(needed)}"
            raise ValueError(msg)
        earliest = max([floor, *(batches[earlier] + 1 for earlier in needed)])
        if is_safe:
            batch = next(
                (
                    b
                    for b in range(earliest, len(sizes))
                    if concurrency is None or sizes[b] < concurrency
                ),
                len(sizes),
            )
        else:
            batch = len(sizes)
            floor = batch + 1
        if batch == len(sizes):
            sizes.append(0)
        sizes[batch] += 1
        batches.append(batch)
    return batches


def _pending(state: LoopState) -> list[PreparedCall]:
    results = state.get("call_results") or {}
    return [
        call
        for call in state.get("round_calls") or []
        if call["batch"] != NOT_RUN and call["call_id"] not in results
    ]


def next_batch(state: LoopState) -> list[Send]:
    """Return one `Send` per call of the first unfinished batch (empty when none is left).

    A call whose arguments refer to other commands' results carries their outcomes.
    """
    pending = _pending(state)
    if not pending:
        return []
    batch = min(call["batch"] for call in pending)
    results = state.get("call_results") or {}
    ids = {call["index"]: call["call_id"] for call in state.get("round_calls") or []}
    return [
        Send(CALL_NODE, _with_references(call, ids, results))
        for call in pending
        if call["batch"] == batch
    ]


def _with_references(
    call: PreparedCall, ids: dict[int, str], results: dict[str, ToolExecutionRecord]
) -> PreparedCall:
    depends_on = call.get("depends_on")
    if not depends_on:
        return call
    referenced = [
        referenced_outcome(index, results.get(ids.get(index, ""))) for index in depends_on
    ]
    return {**call, "referenced": referenced}


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


def _failed_reference(
    call: PreparedCall, earlier: Sequence[PreparedCall], settled: dict[str, ToolExecutionRecord]
) -> ToolExecutionRecord | None:
    """The record of a call that refers to a command settled without running, if it does.

    A reference to a command that is not an earlier one of the round (a plan edited
    after it was checked) fails the call too.
    """
    for index in call.get("depends_on", []):
        if not 0 <= index < len(earlier):
            outcome: ReferencedOutcome = {
                "index": index,
                "tool_name": "no earlier command",
                "success": False,
                "result": None,
                "error": "a command can use only the results of the commands listed before it",
            }
            return reference_failed_record(call, outcome)
        record = settled.get(earlier[index]["call_id"])
        if record is not None:
            return reference_failed_record(call, referenced_outcome(index, record))
    return None


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

    def execute(state: LoopState, runtime: Runtime[LoopContext]) -> ExecuteUpdate:
        scope = parts.scope(runtime)
        decision = state.get("decision") or {"next_action": "response", "execution_commands": []}
        round_state = state.get("round_state") or empty_round_state()
        round_index = round_state["round_index"]
        rollbacks = state.get("consecutive_rollbacks", 0)
        allow_duplicates = rollbacks >= scope.settings.max_consecutive_rollbacks
        reads = run_reads(parts, state)
        run_id = state.get("run_id", "run")
        round_label = f"{round_index}.{rollbacks}" if rollbacks else str(round_index)
        calls: list[PreparedCall] = []
        settled: dict[str, ToolExecutionRecord] = {}
        occurrences: dict[str, int] = {}
        commands = decision["execution_commands"]
        cap = scope.settings.max_commands_per_round
        for index, command in enumerate(commands):
            call_id = f"{run_id}:{round_label}:{index}"
            if index >= cap:
                call = parts.runner.unprepared(
                    command, call_id=call_id, round_index=round_index, index=index
                )
                settled[call["call_id"]] = _over_cap_record(call, len(commands), cap)
                calls.append(call)
                continue
            depends_on = command_dependencies(command)
            if depends_on:  # validated once the results it refers to are known
                call, record = parts.runner.defer(
                    command,
                    call_id=call_id,
                    round_index=round_index,
                    index=index,
                    depends_on=depends_on,
                )
            else:
                call, record = parts.runner.prepare(
                    command, call_id=call_id, round_index=round_index, index=index
                )
            identity = f"{call['tool_name']}\x1f{call['query_key']}"
            occurrence = occurrences.get(identity, 0)
            occurrences[identity] = occurrence + 1
            written = call["kwargs"] if depends_on else call["arguments"]
            call["call_key"] = call_key(run_id, round_label, call["tool_name"], written, occurrence)
            key = call["query_key"]
            if record is None and depends_on:
                record = _failed_reference(call, calls, settled)
            elif record is None:
                first = reads.ran_in(key)
                if first is not None and not allow_duplicates and _repeatable(parts, call):
                    record = _duplicate_record(call, first, first == round_index)
                elif reads.stale_after(key):
                    mark_after_write(call, reads.stale_after(key))
            if record is None:
                follows = note_call(parts, reads, call)
                if follows:
                    call["follows"] = follows
            else:
                record["call_key"] = call["call_key"]  # named after the record was made
                settled[call["call_id"]] = record
            calls.append(call)
        runnable = [call for call in calls if call["call_id"] not in settled]
        will_run = {call["call_id"] for call in runnable}
        parts.inflight.cancel_calls(run_id, keep=will_run.__contains__)
        safe = [c["concurrency_safe"] for c in runnable]
        position = {call["index"]: p for p, call in enumerate(runnable)}
        waits_for = [
            sorted({position[i] for i in (*c.get("depends_on", []), *c.get("follows", []))})
            for c in runnable
        ]
        batches = assign_batches(safe, scope.settings.concurrency, waits_for)
        for call, batch in zip(runnable, batches, strict=True):
            call["batch"] = batch
        for call in calls:
            scope.emit(
                ToolQueued(
                    call_id=call["call_id"],
                    tool_name=call["tool_name"],
                    index=call["index"],
                    batch=call["batch"],
                    will_run=call["batch"] != NOT_RUN,
                )
            )
        for record in settled.values():
            emit_settled(scope.emit, record)
        # the calls carry the planner's (already safe) arguments, encoded for the checkpoint;
        # a settled record shows them decoded, so it is made safe again
        return {"round_calls": Overwrite(calls), "call_results": parts.safe_value(settled)}

    return execute


def make_collect(parts: LoopParts) -> Any:
    """Build the `collect` node: once every call finished, order, judge and record the round."""

    def collect(state: LoopState, runtime: Runtime[LoopContext]) -> CollectUpdate:
        calls = state.get("round_calls") or []
        if not calls or _pending(state):
            return {}
        scope = parts.scope(runtime)
        emit = scope.emit
        records = round_records(calls, state.get("call_results") or {})
        round_state = state.get("round_state") or empty_round_state()
        rollbacks = state.get("consecutive_rollbacks", 0)
        emit(QueueDrained(round_index=round_state["round_index"], calls=len(records)))
        update: CollectUpdate = {
            "round_calls": Overwrite([]),
            "call_results": Overwrite({}),
            "tool_logs": records,
        }
        sub_agents = [r["agent_usage"] for r in records if r.get("agent_usage")]
        if sub_agents:
            update["usage"] = sum_usage(sub_agents)
        all_flagged = bool(records) and all(record.get("flagged") for record in records)
        if all_flagged and rollbacks < scope.settings.max_consecutive_rollbacks:
            reasons = [
                to_prompt_json({"tool": r["tool_name"], "error": r["error"]}) for r in records
            ]
            emit(
                ToolRolledBack(
                    round_index=round_state["round_index"],
                    consecutive=rollbacks + 1,
                    reasons=[r["error"] for r in records],
                )
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
            RoundCompleted(
                round_index=round_state["round_index"],
                calls=len(records),
                succeeded=sum(1 for r in stored if r["success"]),
                failed=sum(1 for r in stored if not r["success"]),
            )
        )
        return {
            **update,
            "round_state": new_round(stored, round_state["round_index"] + 1),
            "consecutive_rollbacks": rollbacks if all_flagged else 0,
        }

    return collect
