"""The execute path: start a round, run its calls batch by batch, end the round.

- `prepare_round` prepares the round's commands (`agentloop.nodes.preparation`: resolve,
  repair, validate, find duplicates, name each call; a call streaming dispatch already
  started is adopted as it was prepared then), in the `execute` node when the run has a
  checkpointer or the loop `after_model` hooks (a person or a hook may change the plan
  after `plan` wrote it), otherwise as `plan` ends, one step less. The commands over
  `max_commands_per_round` are refused as a block (`PlanPreparation.over_cap`), a slice
  per turn of the event loop (`SETTLED_PER_TURN`). It splits the runnable ones into
  batches: concurrency-safe calls share a parallel batch (at most
  `concurrency` calls), an unsafe call forms a batch of its own. A command whose
  arguments refer to earlier commands' results (`"$N"`, `"${N}"`, see
  `agentloop.planning.references`) is validated only once they are known: it runs in a
  batch after theirs, and fails without running when one of them failed or did not run
  (`reference_failed`). A call refused this way that an earlier execution of the run
  started (before a deploy made its tool unknown or its arguments invalid) takes that
  execution's record from the side-effect ledger instead: replayed, or
  `unknown_outcome`. The commands are read back from the round's `AIMessage` when the
  plan node wrote one for `after_model` hooks (`agentloop.middleware.transcript.read_back`): a call
  a hook removed or answered with its own `ToolMessage` is settled without running
  (`refused`), an edited one is prepared with the message's arguments; otherwise the
  preparation writes that message.
- Each batch is one super-step of `call_tool` tasks sent with `Send`, one per call
  (see `agentloop.nodes.call_tool`); a referring call carries the outcomes it needs.
- After each batch the run goes back to `plan`: while calls of the round are still to
  run, it sends the next batch (`round_waits`); once every call is done it first ends
  the round (`collect_round`: orders the records by command, judges the round, a
  rollback when every call was flagged, and updates `round_state`), then plans again,
  or the run answers at `max_rounds` or ends (`after_round`). As in `create_agent`,
  whose model node reads the round's tool messages, the round's calls take one step
  besides the planner's (and `execute`'s, when it runs).
"""

from __future__ import annotations

from collections.abc import Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

from langchain_core.messages import ToolMessage
from langgraph.runtime import Runtime
from langgraph.types import Overwrite, Send

from agentloop.base.messages import message_text
from agentloop.base.sync import pause
from agentloop.governance.deferred import referenced_outcome
from agentloop.governance.judge import compact_record
from agentloop.governance.outcome import ToolOutcome
from agentloop.governance.pipeline import emit_settled, make_record
from agentloop.middleware.transcript import (
    plan_message,
    plan_message_id,
    read_back,
    round_outcomes,
    tool_messages,
)
from agentloop.models.usage import add_usage, sum_usage
from agentloop.nodes._runnable import NodeCoroutine
from agentloop.nodes.guarded import ledger_record
from agentloop.nodes.parts import LoopParts
from agentloop.nodes.preparation import PlanPreparation
from agentloop.nodes.updates import CollectUpdate, ExecuteUpdate
from agentloop.observability.events import (
    Emit,
    QueueDrained,
    RoundCompleted,
    ToolQueued,
    ToolRolledBack,
    null_emit,
)
from agentloop.planning.templates import to_prompt_json
from agentloop.settings import LoopContext, RunScope
from agentloop.state import (
    LoopState,
    PreparedCall,
    ToolCommand,
    ToolExecutionRecord,
    empty_round_state,
    new_round,
    reduce_round_state,
    reduce_run_book,
    run_book,
    run_limit,
)

if TYPE_CHECKING:
    from agentloop.nodes.accelerate import Accelerator

__all__ = [
    "CALL_NODE",
    "DROPPED_NOTE",
    "NOT_RUN",
    "REFUSALS",
    "SETTLED_PER_TURN",
    "assign_batches",
    "after_round",
    "collect_round",
    "joined",
    "make_execute",
    "next_batch",
    "returns_directly",
    "round_records",
    "round_waits",
    "route_execute",
    "state_after",
]

CALL_NODE = "call_tool"
DROPPED_NOTE = "an after_model hook removed this call from the plan, so it was not run"
"""The error of a call a hook removed from the round's `AIMessage`."""
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
        earliest = floor
        for earlier in needed:
            if not 0 <= earlier < position:
                msg = f"call {position} may wait only for earlier calls, not {list(needed)}"
                raise ValueError(msg)
            if batches[earlier] >= earliest:
                earliest = batches[earlier] + 1
        if is_safe:
            batch = len(sizes)  # a new batch, unless an earlier one has room
            for candidate in range(earliest, len(sizes)):
                if concurrency is None or sizes[candidate] < concurrency:
                    batch = candidate
                    break
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
    batch = pending[0]["batch"]
    for call in pending:
        if call["batch"] < batch:
            batch = call["batch"]
    sends: list[Send] = []
    ids: dict[int, str] | None = None
    for call in pending:
        if call["batch"] != batch:
            continue
        if call.get("depends_on"):
            if ids is None:
                ids = {c["index"]: c["call_id"] for c in state.get("round_calls") or []}
            call = _with_references(call, ids, state.get("call_results") or {})
        sends.append(Send(CALL_NODE, call))
    return sends


def _with_references(
    call: PreparedCall, ids: dict[int, str], results: dict[str, ToolExecutionRecord]
) -> PreparedCall:
    """The call with the outcomes of the commands its arguments refer to."""
    referenced = [
        referenced_outcome(index, results.get(ids.get(index, "")))
        for index in call.get("depends_on") or ()
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


def route_execute(state: LoopState) -> list[Send] | Literal["plan"]:
    """Send the first batch, or go straight to `plan` (which ends the round) when nothing runs."""
    return next_batch(state) or "plan"


def round_waits(state: LoopState) -> bool:
    """Whether the round has calls still to run (its next batch is sent, not planned)."""
    return bool(_pending(state))


def after_round(state: LoopState) -> Literal["plan", "answer", "end"]:
    """Where a run goes once a round ended: plan again, answer at `max_rounds`, or end.

    `"end"` when the round's calls were all of `return_direct` tools: `collect_round`
    made the last outcome the run's answer (status `ok`), so no model is asked again; the
    run goes where its answer would lead (the `after_agent` hooks, or `END`), as in
    `create_agent`.
    """
    if state.get("status") == "ok":
        return "end"
    round_state = state.get("round_state") or empty_round_state()
    return "answer" if round_state["round_index"] >= run_limit(state, "max_rounds") else "plan"


def state_after(state: LoopState, update: Mapping[str, Any]) -> LoopState:
    """The state as its channels hold it once `update` is written (what the node reads next).

    Lists (`tool_logs`, and `messages` that carry their ids) are appended as they are.
    """
    view: dict[str, Any] = dict(state)
    for key, value in update.items():
        if isinstance(value, Overwrite):
            view[key] = value.value
        elif key in ("messages", "tool_logs"):
            view[key] = [*(state.get(key) or []), *value]  # type: ignore[misc]
        elif key == "round_state":
            view[key] = reduce_round_state(state.get("round_state"), [value])
        elif key == "usage":
            view[key] = add_usage(state.get("usage"), value)
        elif key == "run_book":
            view[key] = reduce_run_book(state.get("run_book"), value)
        else:
            view[key] = value
    return cast(LoopState, view)


def joined(first: Mapping[str, Any], then: Mapping[str, Any]) -> dict[str, Any]:
    """Two updates of one node as one.

    Lists of `messages` and `tool_logs` end to end, usage added, the `run_book` keys
    merged, any other key as `then` writes it (a list or usage added to one `first`
    overwrites stays an overwrite).
    """
    update = dict(first)
    for key, value in then.items():
        before = update.get(key)
        if isinstance(before, Overwrite) and not isinstance(value, Overwrite):
            update[key] = Overwrite(joined({key: before.value}, {key: value})[key])
        elif key in ("messages", "tool_logs") and isinstance(before, list):
            update[key] = [*before, *value] if isinstance(value, list) else value
        elif key == "usage" and before is not None and not isinstance(value, Overwrite):
            update[key] = add_usage(before, value)
        elif key == "run_book" and before is not None and not isinstance(value, Overwrite):
            update[key] = reduce_run_book(before, value)
        else:
            update[key] = value
    return update


def returns_directly(parts: LoopParts, records: Sequence[ToolExecutionRecord]) -> bool:
    """Whether a round ends the run: every call was of a `return_direct` tool and succeeded.

    `create_agent` ends its run when every tool call of the model's last message was of
    such a tool; a failed call here goes back to the planner instead (the loop hands
    errors to the model where `create_agent` raises them).
    """
    if not records:
        return False
    for record in records:
        spec = parts.tools.registry.spec(record["tool_name"])
        if spec is None or not spec.runnable.return_direct or not record["success"]:
            return False
    return True


SETTLED_PER_TURN = 500
"""Commands over the round's cap settled, and outcomes written, per turn of the event
loop: a plan of thousands of calls does not hold up the other runs sharing the loop."""

REFUSALS = ("tool_not_found", "invalid_arguments", "reference_failed")
"""Refusals code deployed since an earlier execution of a call may make: that execution's
ledger record, when there is one, replaces them (`agentloop.nodes.guarded.ledger_record`)."""


def make_execute(parts: LoopParts, accelerator: Accelerator) -> NodeCoroutine:
    """Build the `execute` node: prepare the round's calls, settle the ones that must not run.

    The node runs when a plan is reviewed before its calls (an `after_model` hook, an
    interrupt before `execute` or after `plan`), or a hook jumps to the tools; otherwise
    `plan` prepares its round itself (`prepare_round`), one step less.
    """

    def execute(
        state: LoopState, runtime: Runtime[LoopContext]
    ) -> Coroutine[Any, Any, ExecuteUpdate]:
        return prepare_round(parts, accelerator, state, parts.scope(runtime))

    return execute


async def prepare_round(
    parts: LoopParts, accelerator: Accelerator, state: LoopState, scope: RunScope
) -> ExecuteUpdate:
    """Prepare the round `state["decision"]` plans, and settle the calls that must not run.

    The update holds the prepared calls (`round_calls`, each with its batch), the records
    of the settled ones and the round's `AIMessage` when no planner call wrote it.
    """
    decision = state.get("decision") or {"next_action": "response", "execution_commands": []}
    preparation = PlanPreparation(parts, state, scope.settings)
    run_id, invocation = preparation.run_id, preparation.invocation
    started = accelerator.started_calls(invocation)
    commands = decision["execution_commands"]
    cap = scope.settings.max_commands_per_round
    adopted: set[str] = set()
    as_written: set[str] = set()  # refused over the cap, as the plan's state holds them
    messages = state.get("messages") or []
    planned = read_back(commands, messages, run_id, preparation.round_label)
    redacted = set(decision.get("redacted") or ())
    for index, command in enumerate(commands):
        if index >= cap and (index - cap) % SETTLED_PER_TURN == 0:
            await pause(0)  # the other runs go on between slices of a huge plan's excess
        if index in planned.answered:  # a hook answered it (rejected, blocked)
            preparation.settle(index, command, _answered(command, planned.answered[index]))
            continue
        if index in planned.dropped:
            preparation.settle(index, command, _dropped(command))
            continue
        if index >= cap:
            edited = planned.commands[index]  # as a hook left it
            call = preparation.over_cap(index, edited, planned=len(commands), cap=cap)
            if edited is command:
                as_written.add(call["call_id"])
            continue
        early = started.get(str(preparation.call_id(index))) if started else None
        if redacted and planned.commands[index] != command:
            redacted.discard(index)  # a hook's edit: run as the hook wrote it
        command = planned.commands[index]  # with a hook's edit
        if early is not None and early.command == command:
            adopted.add(preparation.adopt(early.call)["call_id"])  # prepared while streaming
        else:
            preparation.prepare(index, command)
    calls, settled = preparation.calls, preparation.settled
    for call in calls if redacted else ():
        if call["index"] in redacted and call["call_id"] not in settled:
            call["redacted"] = True  # its tool gets the planner's own arguments
    known: dict[str, ToolExecutionRecord] = {}
    for call in calls:
        refused = settled.get(call["call_id"])
        if refused is not None and refused.get("error_type") in REFUSALS:
            record = await ledger_record(parts, call, scope)
            if record is not None:
                known[call["call_id"]] = record
    runnable = [call for call in calls if call["call_id"] not in settled]
    accelerator.drop_calls(invocation, keep=adopted.__contains__)
    safe = [c["concurrency_safe"] for c in runnable]
    position = {call["index"]: p for p, call in enumerate(runnable)}
    waits_for = [
        sorted({position[i] for i in (*c.get("depends_on", []), *c.get("follows", []))})
        if c.get("depends_on") or c.get("follows")
        else []
        for c in runnable
    ]
    batches = assign_batches(safe, scope.settings.concurrency, waits_for)
    for call, batch in zip(runnable, batches, strict=True):
        call["batch"] = batch
    emits = scope.emit is not null_emit  # something streams `custom`
    for call in calls if emits else ():
        scope.emit(
            ToolQueued(
                call_id=call["call_id"],
                tool_name=call["tool_name"],
                index=call["index"],
                batch=call["batch"],
                will_run=call["batch"] != NOT_RUN,
            )
        )
    for call_id, record in settled.items() if emits else ():
        if call_id not in known:  # the ledger's records reported themselves
            emit_settled(scope.emit, record)
    # the calls carry the planner's (already safe) arguments, encoded for the checkpoint;
    # a settled record shows them decoded, so it is made safe again; not a refusal over
    # the cap of a command as the plan's state holds it (already safe: the plan node
    # wrote it), whose other text is the loop's own
    results = {
        **parts.safe_value({k: r for k, r in settled.items() if k not in as_written}),
        **{k: settled[k] for k in as_written},
        **known,
    }
    update: ExecuteUpdate = {"round_calls": Overwrite(calls), "call_results": Overwrite(results)}
    plan_id = plan_message_id(run_id, preparation.round_label)
    # no planner call wrote it (a hook's plan, an older checkpoint): written here
    written = [] if planned.found else [plan_message(calls, plan_id)]
    records = [results[call["call_id"]] for call in calls if call["call_id"] in results]
    # a call a hook answered keeps the hook's message; one it removed gets none
    outcomes: list[ToolMessage] = []
    transcript = [*messages, *written] if records else []
    for start in range(0, len(records), SETTLED_PER_TURN):
        if len(records) > SETTLED_PER_TURN:
            await pause(0)  # after the plan's message, between slices of outcomes
        outcomes += round_outcomes(records[start : start + SETTLED_PER_TURN], transcript, plan_id)
    if written or outcomes:
        update["messages"] = [*written, *outcomes]
    return update


def _answered(command: ToolCommand, message: ToolMessage) -> ToolOutcome:
    """The outcome of a call a hook answered with a `ToolMessage` of its own (not run)."""
    text = message_text(message)
    if message.status == "success":  # the hook answered for the tool
        return ToolOutcome(text, attempts=0)
    return ToolOutcome.refused("refused", command["tool_name"], text)


def _dropped(command: ToolCommand) -> ToolOutcome:
    """The outcome of a call a hook removed from the round's `AIMessage` (not run)."""
    return ToolOutcome.refused("refused", command["tool_name"], DROPPED_NOTE)


def collect_round(
    parts: LoopParts, state: LoopState, scope: RunScope, emit: Emit | None = None
) -> CollectUpdate | None:
    """The update that ends a round once every call ran (None: no round to end).

    It orders the records by command, judges the round (a rollback when every call was
    flagged) and updates `round_state` (each call wrote its `ToolMessage` when it ended).
    The `plan` node makes it first, so the planner and its hooks see the round as ended.
    Its events go to `emit` (default: the run's stream).
    """
    calls = state.get("round_calls") or []
    if not calls:
        return None
    if emit is None:
        emit = scope.emit
    records = round_records(calls, state.get("call_results") or {})
    round_state = state.get("round_state") or empty_round_state()
    rollbacks = run_book(state).get("consecutive_rollbacks", 0)
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
        reasons = [to_prompt_json({"tool": r["tool_name"], "error": r["error"]}) for r in records]
        emit(
            ToolRolledBack(
                round_index=round_state["round_index"],
                consecutive=rollbacks + 1,
                reasons=[r["error"] for r in records],
            )
        )
        return {
            **update,
            "run_book": {
                "consecutive_rollbacks": rollbacks + 1,
                "rollback_note": parts.prompts.render("rollback_note", reasons="\n".join(reasons)),
            },
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
    if emit is not null_emit:  # something streams `custom`
        succeeded = sum(1 for r in stored if r["success"])
        emit(
            RoundCompleted(
                round_index=round_state["round_index"],
                calls=len(records),
                succeeded=succeeded,
                failed=len(stored) - succeeded,
            )
        )
    recorded: CollectUpdate = {
        **update,
        "round_state": new_round(stored, round_state["round_index"] + 1),
    }
    if rollbacks and not all_flagged:  # the rollbacks in a row end
        recorded["run_book"] = {"consecutive_rollbacks": 0}
    if returns_directly(parts, records):  # the last outcome is the answer, as it is
        recorded["answer"] = tool_messages(records[-1:])[0].text
        recorded["status"] = "ok"
    return recorded
