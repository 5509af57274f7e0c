"""Prepare the commands of one plan: the one place where a command becomes a call.

Both routes a call may start from go through here: streaming dispatch (in the plan
node, while the plan streams) and `execute`. Each command, in plan order, is resolved
to its tool, its arguments repaired and validated (or, when they refer to earlier
commands' results, deferred until those are known, and settled when one of them was
settled without running), checked against the run's earlier reads (a duplicate is
settled; a read made stale by a write is marked to run again), placed after the calls
it must follow, and named: its typed `CallId`, its `position_key` (the ledger's key: its
place in the plan and the command as planned, the same whatever code resumes it) and its
`call_key` (its tool and validated arguments: the ledger's second key and the tool's
idempotency key). `execute` adopts a call started early exactly as it was
prepared here (`PlanPreparation.adopt`), so the two routes cannot disagree on a call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from agentloop.durability import call_key, ledger_thread, position_key
from agentloop.governance.call_id import CallId, round_label
from agentloop.governance.deferred import reference_failed_record, referenced_outcome
from agentloop.governance.outcome import ToolOutcome
from agentloop.governance.pipeline import make_record
from agentloop.nodes.parts import LoopParts
from agentloop.nodes.reads import mark_after_write, note_call, run_reads
from agentloop.planning.references import command_dependencies
from agentloop.settings import LoopSettings
from agentloop.state import (
    LoopState,
    PreparedCall,
    ReferencedOutcome,
    ToolCommand,
    ToolExecutionRecord,
    empty_round_state,
    invocation_of,
    run_book,
    run_id_of,
)

__all__ = ["PlanPreparation"]


class PlanPreparation:
    """Prepares the commands of one plan in order, keeping what later commands depend on.

    Args:
        parts: The loop's parts (its tool runner and registry).
        state: The run's state when the plan is made.
        settings: The run's settings (commands per round, rollbacks).

    Attributes:
        calls: The prepared calls, in plan order.
        settled: The records of the calls settled without running, by call id.
    """

    def __init__(self, parts: LoopParts, state: LoopState, settings: LoopSettings) -> None:
        round_state = state.get("round_state") or empty_round_state()
        book = run_book(state)
        rollbacks = book.get("consecutive_rollbacks", 0)
        self.parts = parts
        self.run_id = run_id_of(state)
        self.invocation = invocation_of(state)
        self.scope = book.get("idempotency_scope") or ""
        self.server_run = book.get("server_run") or ""
        self.named_by = self.scope or self.run_id
        """What names the calls: the run, or its idempotency key (the same for every
        submission of the key, so they find each other's calls in the ledger)."""
        self.round_index = round_state["round_index"]
        self.round_label = round_label(self.round_index, rollbacks)
        self.allow_duplicates = rollbacks >= settings.max_consecutive_rollbacks
        self.reads = run_reads(parts.registry, parts.replays, state)
        self.calls: list[PreparedCall] = []
        self.settled: dict[str, ToolExecutionRecord] = {}
        self._occurrences: dict[str, int] = {}
        self._tool_call_ids: set[str] = set()
        self._refusals: dict[str, ToolOutcome] = {}
        """The outcome of the commands over the round's cap, by tool name (made once)."""

    def call_id(self, position: int) -> CallId:
        """The identity of the call at `position` of this plan."""
        return CallId(self.run_id, self.round_label, position)

    def position_key(self, position: int, command: ToolCommand) -> str:
        """The ledger's name of the call at `position`: the same whatever code resumes it."""
        return position_key(
            self.named_by,
            self.round_label,
            position,
            command["tool_name"],
            command["tool_kwargs"],
        )

    def prepare(
        self, position: int, command: ToolCommand
    ) -> tuple[PreparedCall, ToolExecutionRecord | None]:
        """Prepare the next command of the plan.

        Returns:
            The call, and its record when it is settled without running (unknown tool,
            invalid arguments, a failed reference, a duplicate).
        """
        runner, call_id = self.parts.runner, self.call_id(position)
        depends_on = command_dependencies(command)
        if depends_on:  # validated once the results it refers to are known
            call, record = runner.defer(
                command, call_id=call_id, round_index=self.round_index, depends_on=depends_on
            )
        else:
            call, record = runner.prepare(command, call_id=call_id, round_index=self.round_index)
        written = call["kwargs"] if depends_on else call["arguments"]
        call["call_key"] = call_key(
            self.named_by, self.round_label, call["tool_name"], written, self._occurrence(call)
        )
        call["position_key"] = self.position_key(position, command)
        if self.scope:
            call["ledger_thread"] = ledger_thread(self.scope)
        if self.server_run:
            call["server_run"] = self.server_run
        if record is None and depends_on:
            record = _failed_reference(call, self.calls, self.settled)
        elif record is None:
            key = call["query_key"]
            first = self.reads.ran_in(key)
            if first is not None and not self.allow_duplicates and self._repeatable(call):
                record = _duplicate_record(call, first, first == self.round_index)
            elif self.reads.stale_after(key):
                mark_after_write(call, self.reads.stale_after(key))
        return self._add(call, record)

    def adopt(self, call: PreparedCall) -> PreparedCall:
        """Take a call this same preparation made earlier (a call started early) as is."""
        call = cast(PreparedCall, dict(call))
        self._occurrence(call)
        return self._add(call, None)[0]

    def over_cap(
        self, position: int, command: ToolCommand, *, planned: int, cap: int
    ) -> PreparedCall:
        """Settle a command beyond the round's cap of `cap` calls without preparing it.

        Nothing of it is resolved, validated, repaired or keyed (no `query_key`); the
        refusal is made once per tool name and shared by its records (their `result` is
        one object, which is never changed in place), so a plan of thousands of calls
        costs little more than their records.
        """
        name = command["tool_name"]
        outcome = self._refusals.get(name)
        if outcome is None:
            message = (
                f"The plan had {planned} commands; at most {cap} run per round, so this one "
                "was not run. Plan fewer calls per round, most important first."
            )
            outcome = self._refusals[name] = ToolOutcome.refused("too_many_commands", name, message)
        return self.settle(position, command, outcome, keyed=False)

    def settle(
        self, position: int, command: ToolCommand, outcome: ToolOutcome, *, keyed: bool = True
    ) -> PreparedCall:
        """Settle a command without preparing or running it, with the outcome given.

        For a call beyond the round's cap, or one an `after_model` hook answered or
        removed (`agentloop.middleware.transcript.read_back`). Without `keyed`, its `query_key` is
        left empty.
        """
        call = self.parts.runner.unprepared(
            command, call_id=self.call_id(position), round_index=self.round_index, keyed=keyed
        )
        return self._add(call, make_record(call, outcome))[0]

    def _occurrence(self, call: PreparedCall) -> int:
        """How many calls of this plan before it are the same query (0 for the first)."""
        identity = f"{call['tool_name']}\x1f{call['query_key']}"
        occurrence = self._occurrences.get(identity, 0)
        self._occurrences[identity] = occurrence + 1
        return occurrence

    def _repeatable(self, call: PreparedCall) -> bool:
        """Whether a repeated call may be answered by the earlier one (never side effects)."""
        spec = self.parts.registry.spec(call["tool_name"])
        return spec is not None and spec.policy.idempotent

    def _add(
        self, call: PreparedCall, record: ToolExecutionRecord | None
    ) -> tuple[PreparedCall, ToolExecutionRecord | None]:
        call["invocation"] = self.invocation
        given = call.get("tool_call_id", "")
        if not given or given in self._tool_call_ids:  # the planner's id, once per plan
            call["tool_call_id"] = self.call_id(call["index"]).tool_call_id
        self._tool_call_ids.add(call["tool_call_id"])
        if record is None:
            follows = note_call(self.parts.registry, self.reads, call)
            if follows:
                call["follows"] = follows
        else:
            record["call_key"] = call["call_key"]  # named after the record was made
            record["tool_call_id"] = call["tool_call_id"]
            if call.get("position_key"):
                record["position_key"] = call["position_key"]
            self.settled[call["call_id"]] = record
        self.calls.append(call)
        return call, record


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
