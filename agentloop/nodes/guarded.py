"""One route for every tool call: the side-effect ledger's guard, then the governance pipeline.

`call_tool` runs a call through here, and so does streaming dispatch when it starts a
call while its plan is still streaming: both consult the same ledger entry (keyed by
the thread, the loop's namespace and the call's `call_key`) before the tool runs and
record the outcome after, so a call started early is exactly as durable as any other.
With a checkpointer, an outcome already recorded is returned as `replayed`; a call with
side effects that another worker started and never finished is `unknown_outcome`.
"""

from __future__ import annotations

from functools import partial
from typing import Any, cast

from langchain_core.runnables import RunnableConfig

from agentloop._effects import Core, Effect
from agentloop.durability import (
    CallGuard,
    LateLedgerWriter,
    LedgerKey,
    Settled,
    loop_namespace,
    run_ledger,
)
from agentloop.events import Emit, ToolCompleted
from agentloop.nodes.parts import LoopParts
from agentloop.settings import RunScope
from agentloop.state import PreparedCall, ToolExecutionRecord
from agentloop.tools.outcome import ToolOutcome
from agentloop.tools.pipeline import emit_settled, make_record

__all__ = ["REPLAYED_NOTE", "call_guard", "guarded_call", "settled_record"]

REPLAYED_NOTE = "replayed: this call already ran; its recorded outcome is returned, not re-run"


def call_guard(parts: LoopParts, call: PreparedCall, scope: RunScope) -> CallGuard | None:
    """The ledger guard of a call, or None when the run has no thread to resume."""
    thread_id = scope.thread_id
    if thread_id is None:
        return None
    ledger = run_ledger(parts.ledger, scope.store)
    if ledger is None:
        return None
    task_ns = scope.execution.checkpoint_ns if scope.execution else ""
    namespace = loop_namespace(task_ns.rsplit("|", 1)[0] if "|" in task_ns else "")
    policy = parts.registry.policy(call["tool_name"])
    return CallGuard(
        ledger,
        LedgerKey(thread_id, namespace, call["call_key"]),
        side_effects=not policy.idempotent,
        resumable=policy.resumable,
        timeout_s=policy.timeout_s,
        reexecute=bool(scope.loop is not None and scope.loop.reexecute),
    )


def settled_record(call: PreparedCall, settled: Settled) -> ToolExecutionRecord:
    """The record of a call the ledger decided without running it."""
    if settled.kind == "replayed" and settled.outcome is not None:
        record = cast(ToolExecutionRecord, dict(settled.outcome))
        for field in ("call_id", "call_key", "index", "round_index", "purpose"):
            record[field] = call[field]
        record["todo_suggestion"] = record["next"] = call["todo_suggestion"]
        record["replayed"] = True
        record["notes"] = [*(record.get("notes") or []), REPLAYED_NOTE]
        return record
    message = (
        f"{call['tool_name']} may or may not have taken effect: {settled.reason}. It was not "
        "repeated because it is not idempotent. Check whether it took effect."
    )
    return make_record(call, ToolOutcome.refused("unknown_outcome", call["tool_name"], message))


def _settled(call: PreparedCall, settled: Settled, emit: Emit) -> ToolExecutionRecord:
    record = settled_record(call, settled)
    if settled.kind == "replayed":
        emit(
            ToolCompleted(
                call_id=call["call_id"],
                tool_name=call["tool_name"],
                index=call["index"],
                duration_ms=0.0,
                success=record["success"],
                replayed=True,
            )
        )
    else:
        emit_settled(emit, record)
    return record


def guarded_call(
    parts: LoopParts, call: PreparedCall, scope: RunScope, config: RunnableConfig
) -> Core[ToolExecutionRecord]:
    """A prepared call through the ledger guard and the pipeline: a core making its safe record.

    Drive it with `drive` from sync code or `adrive` from async code (`agentloop._effects`).
    """
    guard = call_guard(parts, call, scope)
    late = _late_writer(parts, guard)
    run = _run(parts, call, scope, config, late)
    if guard is None:
        return cast(ToolExecutionRecord, (yield from run))
    settled = yield from guard.decide()
    if settled is not None:
        return cast(ToolExecutionRecord, parts.safe_value(_settled(call, settled, scope.emit)))
    record = cast(ToolExecutionRecord, (yield from guard.record(run)))
    if late is not None:  # the call's own record is in the ledger: a late one may replace it
        late.ready()
    return record


def _run(
    parts: LoopParts,
    call: PreparedCall,
    scope: RunScope,
    config: RunnableConfig,
    late: LateLedgerWriter | None,
) -> Core[Any]:
    """Run the call through the pipeline (`run_sync` under `invoke`, `run` under `ainvoke`)."""
    runner = parts.runner
    record = yield from Effect(
        partial(runner.run_sync, call, scope.emit, config, on_late=late),
        partial(runner.run, call, scope.emit, config, on_late=late),
    )
    return parts.safe_value(record)


def _late_writer(parts: LoopParts, guard: CallGuard | None) -> LateLedgerWriter | None:
    """Where the late outcome of a call that timed out as `unknown_outcome` goes."""
    if guard is None or not guard.side_effects:
        return None
    return LateLedgerWriter(guard.ledger, guard.key, parts.safe_value)
