"""One route for every tool call: the side-effect ledger's guard, then the governance pipeline.

`call_tool` runs a call through here, and so does streaming dispatch when it starts a
call while its plan is still streaming: both consult the same ledger entry (keyed by
the thread, the loop's namespace and the call's `call_key`) before the tool runs and
record the outcome after, so a call started early is exactly as durable as any other.
With a checkpointer, an outcome already recorded is returned as `replayed`; a call with
side effects that another worker started and never finished is `unknown_outcome`.
"""

from __future__ import annotations

from typing import Any, cast

from langchain_core.runnables import RunnableConfig

from agentloop._sync import run_coroutine_sync
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

__all__ = ["REPLAYED_NOTE", "arun_guarded", "call_guard", "run_guarded", "settled_record"]

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


def run_guarded(
    parts: LoopParts, call: PreparedCall, scope: RunScope, config: RunnableConfig
) -> ToolExecutionRecord:
    """Run a prepared call through the ledger guard and the pipeline (sync drivers).

    Returns:
        The call's record, made checkpoint-safe.
    """
    guard = call_guard(parts, call, scope)
    late = _late_writer(parts, guard)

    def run() -> dict[str, Any]:
        running = parts.runner.run(call, scope.emit, config, prefer_sync=True, on_late=late)
        return dict(parts.safe_value(run_coroutine_sync(running)))

    if guard is None:
        return cast(ToolExecutionRecord, run())
    settled = guard.before()
    if settled is not None:
        return cast(ToolExecutionRecord, parts.safe_value(_settled(call, settled, scope.emit)))
    finished = guard.run(run)
    if late is not None:
        late.ready()
    return cast(ToolExecutionRecord, finished)


async def arun_guarded(
    parts: LoopParts, call: PreparedCall, scope: RunScope, config: RunnableConfig
) -> ToolExecutionRecord:
    """Async `run_guarded`."""
    guard = call_guard(parts, call, scope)
    late = _late_writer(parts, guard)

    async def run() -> dict[str, Any]:
        running = parts.runner.run(call, scope.emit, config, on_late=late)
        return dict(parts.safe_value(await running))

    if guard is None:
        return cast(ToolExecutionRecord, await run())
    settled = await guard.abefore()
    if settled is not None:
        return cast(ToolExecutionRecord, parts.safe_value(_settled(call, settled, scope.emit)))
    finished = await guard.arun(run)
    if late is not None:
        late.ready()
    return cast(ToolExecutionRecord, finished)


def _late_writer(parts: LoopParts, guard: CallGuard | None) -> LateLedgerWriter | None:
    """Where the late outcome of a call that timed out as `unknown_outcome` goes."""
    if guard is None or not guard.side_effects:
        return None
    return LateLedgerWriter(guard.ledger, guard.key, parts.safe_value)
