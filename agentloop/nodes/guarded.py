"""One route for every tool call: the side-effect ledger's guard, then the governance pipeline.

`call_tool` runs a call through here, and so does streaming dispatch when it starts a
call while its plan is still streaming: both consult the same ledger entry (keyed by
the thread, the loop's namespace and the call's `position_key`, else its `call_key`)
before the tool runs and record the outcome after, so a call started early is exactly
as durable as any other. With a checkpointer, an outcome already recorded is returned
as `replayed`; a call with side effects that another worker started and never finished
is `unknown_outcome`.

The ledger names a call by its place in the plan, so whatever code resumes a run finds
the calls the earlier code started: a call claimed there is guarded whatever its tool's
policy says now, and a call of a tool the loop no longer has is replayed, reported as
`unknown_outcome` or, when it never started, failed naming the missing tool. A call
refused before it could run (its tool unknown, its arguments invalid under the new code)
is looked up too (`ledger_record`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, cast

from langchain_core.runnables import RunnableConfig

from agentloop.base.sync import has_running_loop
from agentloop.durability import (
    CallGuard,
    LateLedgerWriter,
    LedgerKey,
    Settled,
    loop_namespace,
    run_ledger,
    run_record_key,
)
from agentloop.durability.guard import STARTED_BEFORE_STOP, STARTED_ELSEWHERE, SUBMISSION_FIELD
from agentloop.durability.ledger import owner_is_gone
from agentloop.durability.retry import RUN_RECORD_LOST
from agentloop.governance.cache_scope import run_identities
from agentloop.governance.call_config import CallInfo, with_call_info
from agentloop.governance.call_id import kept_under, tool_call_id
from agentloop.governance.outcome import ToolOutcome
from agentloop.governance.pipeline import emit_settled, make_record
from agentloop.nodes.parts import LoopParts
from agentloop.observability.events import DurabilityWarning, Emit, ToolCompleted
from agentloop.settings import RunScope
from agentloop.state import PreparedCall, ToolExecutionRecord, call_status

__all__ = [
    "CANCELLED_WHILE_RUNNING",
    "REPLAYED_NOTE",
    "call_guard",
    "guarded_call",
    "ledger_record",
    "settled_record",
    "tool_config",
]

logger = logging.getLogger("agentloop")

CANCELLED_WHILE_RUNNING = "the run was cancelled while it ran"
"""Why a call is `unknown_outcome` when its run was cancelled during it."""
REPLAYED_NOTE = "replayed: this call already ran; its recorded outcome is returned, not re-run"


def call_guard(parts: LoopParts, call: PreparedCall, scope: RunScope) -> CallGuard | None:
    """The ledger guard of a call, or None when the run has no thread to resume.

    A call of a run submitted with an idempotency key is kept under the key
    (`ledger_thread`), not the thread, so another submission of the key finds it.
    """
    if scope.thread_id is None:
        return None
    thread_id = call.get("ledger_thread") or scope.thread_id
    ledger = run_ledger(parts.ledger, scope.store)
    if ledger is None:
        return None
    namespace = _loop_namespace(scope)
    names = [name for name in (call.get("position_key"), call["call_key"]) if name]
    if not names:
        return None  # a command that was never prepared: it never runs
    key, *aliases = [LedgerKey(thread_id, namespace, name) for name in dict.fromkeys(names)]
    policy = parts.registry.policy_or_none(call["tool_name"])
    if policy is None:  # the tool is gone (a deploy removed it): look the call up only
        return CallGuard(ledger, key, side_effects=False, aliases=tuple(aliases))
    return CallGuard(
        ledger,
        key,
        side_effects=not policy.idempotent,
        aliases=tuple(aliases),
        resumable=policy.resumable,
        timeout_s=policy.timeout_s,
        reexecute=bool(scope.loop is not None and scope.loop.reexecute),
        submission=kept_under(call),
    )


def _loop_namespace(scope: RunScope) -> str:
    """The loop's namespace, as the calls of its runs are kept under in the ledger."""
    task_ns = scope.execution.checkpoint_ns if scope.execution else ""
    return loop_namespace(task_ns.rsplit("|", 1)[0] if "|" in task_ns else "")


async def _warn_if_run_record_lost(
    parts: LoopParts, call: PreparedCall, scope: RunScope, guard: CallGuard
) -> None:
    """Warn when the ledger lost the record the call's run committed before its first call.

    The call names the server's run that recorded it (`server_run`, from the checkpoint);
    `prepare` wrote that record in the run's own namespace (its task's), before any call.
    A ledger without it lost entries, so a call an earlier attempt started may run again.
    """
    server_run, thread_id = call.get("server_run"), scope.thread_id
    if not server_run or thread_id is None:
        return
    loop_ns = _loop_namespace(scope)
    key = run_record_key(thread_id, f"{loop_ns}|prepare" if loop_ns else "prepare", server_run)
    if not await parts.run_records.lost(guard.ledger, key):
        return
    ledger = type(guard.ledger).__name__
    message = RUN_RECORD_LOST.format(run=server_run, ledger=ledger)
    logger.warning("%s: %s", parts.settings.name, message)
    scope.emit(DurabilityWarning(ledger=ledger, message=message))


def settled_record(
    call: PreparedCall, settled: Settled, *, gone: bool = False
) -> ToolExecutionRecord:
    """The record of a call the ledger decided without running it.

    Args:
        call: The call.
        settled: What the ledger decided.
        gone: The loop no longer has the call's tool (a deploy removed or renamed it).
    """
    if settled.kind == "replayed" and settled.outcome is not None:
        outcome = {k: v for k, v in settled.outcome.items() if k != SUBMISSION_FIELD}
        record = cast(ToolExecutionRecord, outcome)
        for field in ("call_id", "call_key", "index", "round_index", "purpose"):
            record[field] = call[field]
        if call.get("position_key"):
            record["position_key"] = call["position_key"]
        record["tool_call_id"] = tool_call_id(call)  # this run's transcript names it
        record["todo_suggestion"] = record["next"] = call["todo_suggestion"]
        record["replayed"] = True
        if "status" not in record:  # recorded by an earlier version
            record["status"] = call_status(record)
        record["notes"] = [*(record.get("notes") or []), REPLAYED_NOTE]
        return record
    name = call["tool_name"]
    why = (
        f"{name} is no longer one of the loop's tools"
        if gone
        else "a call that started with possible side effects never runs twice"
    )
    message = (
        f"{name} may or may not have taken effect: {settled.reason}. It was not repeated: "
        f"{why}. Check whether it took effect."
    )
    return make_record(call, ToolOutcome.refused("unknown_outcome", call["tool_name"], message))


def _settled(
    call: PreparedCall, settled: Settled, emit: Emit, *, gone: bool
) -> ToolExecutionRecord:
    record = settled_record(call, settled, gone=gone)
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


async def guarded_call(
    parts: LoopParts,
    call: PreparedCall,
    scope: RunScope,
    config: RunnableConfig,
    *,
    cancelled: Callable[[ToolExecutionRecord], Awaitable[None]] | None = None,
) -> ToolExecutionRecord:
    """A prepared call through the ledger guard and the pipeline: its safe record.

    Awaited from async code; run with `run_blocking` from sync code (`agentloop.base.sync`).

    Args:
        parts: The loop's parts.
        call: The call.
        scope: The scope of the node call running it.
        config: The config its tool is called with.
        cancelled: Awaited with the call's `unknown_outcome` record when the call, claimed
            as a call with side effects, is cancelled while it runs (the cancellation then
            goes on).
    """
    execution = scope.execution  # no thread (no checkpointer): no guard, no call for it
    guard = (
        None if execution is None or execution.thread_id is None else call_guard(parts, call, scope)
    )
    record: ToolExecutionRecord  # typed without `cast`, a call each time
    if guard is None:
        record = parts.safe_value(await _pipeline(parts, call, scope, config, None))
        return record
    settled = await guard.decide()
    gone = parts.registry.spec(call["tool_name"]) is None
    if settled is not None:
        record = parts.safe_value(_settled(call, settled, scope.emit, gone=gone))
        return record
    if gone:  # never started, and its tool is gone: the runner fails it, naming the tool
        record = await _run(parts, call, scope, config, None)
        return record
    if guard.claimed:  # a call with side effects runs: does the ledger still know its run?
        await _warn_if_run_record_lost(parts, call, scope, guard)
    late = _late_writer(parts, guard)  # after `decide`: the key the entry was found under
    run = _run(parts, call, scope, config, late)
    try:
        record = cast(ToolExecutionRecord, await guard.record(run))
    except asyncio.CancelledError:
        if cancelled is not None and guard.claimed:  # it started: it may have taken effect
            stopped = Settled("unknown_outcome", reason=CANCELLED_WHILE_RUNNING)
            await cancelled(parts.safe_value(settled_record(call, stopped)))
        raise
    if late is not None:  # the call's own record is in the ledger: a late one may replace it
        late.ready()
    return record


async def _run(
    parts: LoopParts,
    call: PreparedCall,
    scope: RunScope,
    config: RunnableConfig,
    late: LateLedgerWriter | None,
) -> Any:
    """Run the call through the pipeline: its safe record."""
    return parts.safe_value(await _pipeline(parts, call, scope, config, late))


async def _pipeline(
    parts: LoopParts,
    call: PreparedCall,
    scope: RunScope,
    config: RunnableConfig,
    late: LateLedgerWriter | None,
) -> ToolExecutionRecord:
    """The pipeline's run of the call: `run` on an event loop, `run_sync` without one."""
    runner = parts.runner
    if has_running_loop():
        return await runner.run(call, scope.emit, config, on_late=late)
    return runner.run_sync(call, scope.emit, config, on_late=late)


def _late_writer(parts: LoopParts, guard: CallGuard | None) -> LateLedgerWriter | None:
    """Where the late outcome of a call that timed out as `unknown_outcome` goes."""
    if guard is None or not guard.side_effects:
        return None
    return LateLedgerWriter(guard.ledger, guard.key, parts.safe_value)


async def ledger_record(
    parts: LoopParts, call: PreparedCall, scope: RunScope
) -> ToolExecutionRecord | None:
    """The ledger's record of a call refused before it could run, if the ledger has one.

    Code deployed since the call started may refuse it (its tool renamed or removed, an
    argument renamed without an alias): when an earlier execution of the same call
    recorded an outcome it is replayed; when it claimed the call and never finished,
    the call is `unknown_outcome`. Returns None when the ledger knows nothing of it.
    """
    guard = call_guard(parts, call, scope)
    if guard is None:
        return None
    entry = await guard.find()
    if entry is None:
        return None
    if entry.outcome is not None:
        settled = Settled("replayed", entry.outcome)
    elif owner_is_gone(guard.ledger, guard.key, entry.owner):
        settled = Settled("unknown_outcome", reason=STARTED_BEFORE_STOP)
    else:
        settled = Settled("unknown_outcome", reason=STARTED_ELSEWHERE)
    gone = parts.registry.spec(call["tool_name"]) is None
    record = _settled(call, settled, scope.emit, gone=gone)
    return cast(ToolExecutionRecord, parts.safe_value(record))


def tool_config(
    parts: LoopParts, call: PreparedCall, config: RunnableConfig, context: Any
) -> RunnableConfig:
    """The config a tool is called with: the node's, naming the call and whom it serves."""
    identity, owner = run_identities(config, context, known=parts.identities)
    info: CallInfo = {
        "run_id": call["run_id"],
        "call_id": call["call_id"],
        "place": f"{call['round_label']}:{call['index']}",  # `CallId.in_run`, formatted
        "call_key": call["call_key"],
        "loop": parts.settings.name,
        "identity": identity,
        "owner": owner,
        "sampler": parts.sampling.key,
    }
    if call.get("position_key"):
        info["position_key"] = call["position_key"]
    return with_call_info(config, info)
