"""The execute path: start a round, run its calls batch by batch, collect the round.

- `execute` prepares the round's commands (resolve, repair, validate, find duplicates)
  and splits the runnable ones into batches: consecutive concurrency-safe calls form one
  parallel batch (at most `concurrency` calls), an unsafe call forms a batch of its own.
- Each batch is one super-step of `call_tool` tasks sent with `Send`, one per call, each
  writing its record to `call_results`. With a checkpointer every finished call is saved
  as soon as it finishes, and a crash never re-runs a call that completed.
- `collect` runs after each batch; once every call is done it orders the records by
  command, judges the round (rollback when every call was flagged) and updates
  `round_state`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from langchain_core.runnables import RunnableConfig
from langgraph.types import Send

from agentloop._runtime import CURRENT_RUN, run_coroutine_sync
from agentloop.durability import amark_started, awas_started, is_resuming, mark_started, was_started
from agentloop.events import Emit
from agentloop.prompts import render_prompt
from agentloop.settings import LoopSettings
from agentloop.state import (
    RESET,
    LoopState,
    ToolExecutionRecord,
    empty_round_state,
    next_round,
)
from agentloop.tools.judge import compact_record, executed_queries
from agentloop.tools.outcome import ToolOutcome
from agentloop.tools.pipeline import PreparedCall, ToolRunner, make_record
from agentloop.usage import sum_usage

__all__ = [
    "CALL_NODE",
    "ExecutePath",
    "assign_batches",
    "next_batch",
    "round_records",
]

CALL_NODE = "call_tool"
NOT_RUN = -1
"""Batch number of a call that was settled without running (bad call, duplicate)."""

EmitFactory = Callable[[RunnableConfig], tuple[LoopSettings, Emit]]


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


def _emit_settled(emit: Emit, record: ToolExecutionRecord) -> None:
    """Report a call that was settled without running (bad call, duplicate, unknown outcome)."""
    emit(
        "tool_error",
        call_id=record.get("call_id", ""),
        tool_name=record["tool_name"],
        index=record.get("index", 0),
        error=record["error"],
        error_type=record.get("error_type", ""),
        success=False,
        duration_ms=0.0,
    )


class ExecutePath:
    """The `execute`, `call_tool` and `collect` nodes and their routers.

    Args:
        runner: The governance pipeline.
        emit_factory: Returns the run's settings and event emitter from a node's config.
    """

    def __init__(self, runner: ToolRunner, emit_factory: EmitFactory) -> None:
        self.runner = runner
        self.emit_factory = emit_factory

    # -- execute: start the round ----------------------------------------------------------

    def execute(self, state: LoopState, config: RunnableConfig) -> dict[str, Any]:
        """Prepare the round's calls and settle the ones that must not run."""
        settings, emit = self.emit_factory(config)
        decision = state.get("decision") or {"next_action": "response", "execution_commands": []}
        round_state = state.get("round_state") or empty_round_state()
        round_index = round_state["round_index"]
        rollbacks = state.get("consecutive_rollbacks", 0)
        allow_duplicates = rollbacks >= settings.max_consecutive_rollbacks
        executed = executed_queries(round_state["done_plans"])
        prefix = f"{state.get('run_id', 'run')}:{round_index}"
        if rollbacks:
            prefix += f".{rollbacks}"
        calls: list[PreparedCall] = []
        settled: dict[str, ToolExecutionRecord] = {}
        this_round: set[str] = set()
        for index, command in enumerate(decision["execution_commands"]):
            call, record = self.runner.prepare(
                command, call_id=f"{prefix}:{index}", round_index=round_index, index=index
            )
            key = call["query_key"]
            repeated = key in executed or key in this_round
            if record is None and repeated and not allow_duplicates:
                record = _duplicate_record(call, executed.get(key, round_index), key in this_round)
            if record is None:
                this_round.add(key)
            else:
                settled[call["call_id"]] = record
            calls.append(call)
        runnable = [call for call in calls if call["call_id"] not in settled]
        batches = assign_batches([c["concurrency_safe"] for c in runnable], settings.concurrency)
        for call, batch in zip(runnable, batches, strict=True):
            call["batch"] = batch
        for call in calls:
            emit(
                "tool_queued",
                call_id=call["call_id"],
                tool_name=call["tool_name"],
                index=call["index"],
                batch=call["batch"],
                will_run=call["batch"] != NOT_RUN,
            )
        for record in settled.values():
            _emit_settled(emit, record)
        return {"round_calls": calls, "call_results": settled}

    def route_execute(
        self, state: LoopState, config: RunnableConfig
    ) -> list[Send] | Literal["collect"]:
        """Send the first batch, or go straight to `collect` when nothing has to run."""
        return next_batch(state) or "collect"

    # -- call_tool: one task per call --------------------------------------------------------

    def _call_result(self, call: PreparedCall, record: ToolExecutionRecord) -> dict[str, Any]:
        return {"call_results": {call["call_id"]: record}}

    def _has_side_effects(self, call: PreparedCall) -> bool:
        return not self.runner.registry.policy(call["tool_name"]).idempotent

    def _unknown_outcome(self, call: PreparedCall, emit: Emit) -> dict[str, Any]:
        message = (
            f"{call['tool_name']} was started before the run stopped and did not report back; "
            "it was not repeated because it is not idempotent. Check whether it took effect."
        )
        record = make_record(
            call, ToolOutcome.refused("unknown_outcome", call["tool_name"], message)
        )
        _emit_settled(emit, record)
        return self._call_result(call, record)

    async def acall_tool(self, call: PreparedCall, config: RunnableConfig) -> dict[str, Any]:
        """Run one call through the pipeline (async)."""
        _, emit = self.emit_factory(config)
        if self._has_side_effects(call):
            if is_resuming(config) and await awas_started(config, call["call_id"]):
                return self._unknown_outcome(call, emit)
            await amark_started(config, call["call_id"])
        token = CURRENT_RUN.set(call["call_id"].split(":", 1)[0])
        try:
            record = await self.runner.run(call, emit)
        finally:
            CURRENT_RUN.reset(token)
        return self._call_result(call, record)

    def call_tool(self, call: PreparedCall, config: RunnableConfig) -> dict[str, Any]:
        """Run one call through the pipeline (sync callers)."""
        _, emit = self.emit_factory(config)
        if self._has_side_effects(call):
            if is_resuming(config) and was_started(config, call["call_id"]):
                return self._unknown_outcome(call, emit)
            mark_started(config, call["call_id"])
        token = CURRENT_RUN.set(call["call_id"].split(":", 1)[0])
        try:
            record = run_coroutine_sync(self.runner.run(call, emit))
        finally:
            CURRENT_RUN.reset(token)
        return self._call_result(call, record)

    # -- collect: close the round ------------------------------------------------------------

    def collect(self, state: LoopState, config: RunnableConfig) -> dict[str, Any]:
        """Once every call of the round finished: order, judge, and record the round."""
        calls = state.get("round_calls") or []
        if not calls or _pending(state):
            return {}
        settings, emit = self.emit_factory(config)
        records = round_records(calls, state.get("call_results") or {})
        round_state = state.get("round_state") or empty_round_state()
        rollbacks = state.get("consecutive_rollbacks", 0)
        emit("queue_drained", round_index=round_state["round_index"], calls=len(records))
        update: dict[str, Any] = {
            "round_calls": [],
            "call_results": {**RESET},
            "tool_logs": records,
        }
        sub_agents = [r["agent_usage"] for r in records if r.get("agent_usage")]
        if sub_agents:
            update["usage"] = sum_usage(sub_agents)
        all_flagged = bool(records) and all(record.get("flagged") for record in records)
        if all_flagged and rollbacks < settings.max_consecutive_rollbacks:
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
                "rollback_note": render_prompt("rollback_note", reasons="\n".join(reasons)),
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
        new_round = next_round(stored, round_state["round_index"] + 1)
        emit(
            "round_completed",
            round_index=round_state["round_index"],
            calls=len(records),
            succeeded=sum(1 for r in stored if r["success"]),
            failed=sum(1 for r in stored if not r["success"]),
        )
        return {
            **update,
            "round_state": new_round,
            "consecutive_rollbacks": rollbacks if all_flagged else 0,
        }

    def route_collect(
        self, state: LoopState, config: RunnableConfig
    ) -> list[Send] | Literal["plan", "answer"]:
        """Send the next batch; after the round, plan again unless `max_rounds` is reached."""
        sends = next_batch(state)
        if sends:
            return sends
        settings, _ = self.emit_factory(config)
        round_state = state.get("round_state") or empty_round_state()
        return "answer" if round_state["round_index"] >= settings.max_rounds else "plan"
