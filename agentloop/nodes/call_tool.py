"""The `call_tool` task: one call through the side-effect ledger and the governance pipeline.

Each call is its own LangGraph task (`Send`), so a checkpointer saves every finished
call. With a checkpointer, the call also consults the side-effect ledger (see
`agentloop.durability`): an outcome already recorded for the same call is returned
as `replayed`; a call with side effects that another worker started and never
finished is `unknown_outcome`; otherwise it runs and its outcome is recorded.

A call whose arguments refer to other commands' results first resolves them from the
outcomes it was sent with and is validated (`complete_call`), before the ledger; when a
referenced command failed, or the resolved arguments are invalid, it is settled without
running.
"""

from __future__ import annotations

from typing import Any, cast

from langgraph.config import get_config
from langgraph.runtime import Runtime

from agentloop._sync import run_coroutine_sync
from agentloop.durability import (
    CallGuard,
    LedgerKey,
    Settled,
    current_checkpointer,
    ledger_for,
    loop_namespace,
)
from agentloop.events import Emit
from agentloop.inflight import EarlyCall
from agentloop.nodes._runnable import LoopNode
from agentloop.nodes.early_dispatch import tool_config
from agentloop.nodes.parts import LoopParts
from agentloop.settings import LoopContext, RunScope
from agentloop.state import PreparedCall, ToolExecutionRecord
from agentloop.tools.deferred import complete_call
from agentloop.tools.outcome import ToolOutcome
from agentloop.tools.pipeline import emit_settled, make_record

__all__ = ["make_call_tool", "settled_record"]

REPLAYED_NOTE = "replayed: this call already ran; its recorded outcome is returned, not re-run"


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


class _CallTool:
    def __init__(self, parts: LoopParts) -> None:
        self.parts = parts

    def _guard(self, call: PreparedCall, scope: RunScope) -> CallGuard | None:
        thread_id = scope.thread_id
        if thread_id is None:
            return None
        ledger = self.parts.ledger
        if ledger is None:
            saver = current_checkpointer()
            if saver is None:
                return None
            ledger = ledger_for(saver)
        task_ns = scope.execution.checkpoint_ns if scope.execution else ""
        namespace = loop_namespace(task_ns.rsplit("|", 1)[0] if "|" in task_ns else "")
        policy = self.parts.registry.policy(call["tool_name"])
        return CallGuard(
            ledger,
            LedgerKey(thread_id, namespace, call["call_key"]),
            side_effects=not policy.idempotent,
            resumable=policy.resumable,
            timeout_s=policy.timeout_s,
            reexecute=bool(scope.loop is not None and scope.loop.reexecute),
        )

    def _settled(self, call: PreparedCall, settled: Settled, emit: Emit) -> dict[str, Any]:
        record = settled_record(call, settled)
        if settled.kind == "replayed":
            emit(
                "tool_completed",
                call_id=call["call_id"],
                tool_name=call["tool_name"],
                index=call["index"],
                duration_ms=0.0,
                success=record["success"],
                replayed=True,
            )
        else:
            emit_settled(emit, record)
        return {"call_results": {call["call_id"]: self.parts.safe_value(record)}}

    def _early(self, call: PreparedCall) -> EarlyCall | None:
        """The call as the plan node started it while the plan streamed, if it did."""
        run_id = call["call_id"].split(":", 1)[0]
        return self.parts.inflight.take_call(run_id, call["call_id"], call["call_key"])

    def _refused(self, record: ToolExecutionRecord, emit: Emit) -> dict[str, Any]:
        """The update of a call settled before running (a failed reference, bad arguments)."""
        emit_settled(emit, record)
        return {"call_results": {record.get("call_id", ""): self.parts.safe_value(record)}}

    def invoke(self, call: PreparedCall, runtime: Runtime[LoopContext]) -> dict[str, Any]:
        scope = self.parts.scope(runtime)
        call, record = complete_call(self.parts.runner, call)
        if record is not None:
            return self._refused(record, scope.emit)
        config = tool_config(self.parts, call, get_config())

        def run() -> dict[str, Any]:
            early = self._early(call)
            if early is not None:
                return dict(self.parts.safe_value(early.result()))
            running = self.parts.runner.run(call, scope.emit, config, prefer_sync=True)
            return dict(self.parts.safe_value(run_coroutine_sync(running)))

        guard = self._guard(call, scope)
        if guard is None:
            return {"call_results": {call["call_id"]: run()}}
        settled = guard.before()
        if settled is not None:
            self._cancel_early(call)
            return self._settled(call, settled, scope.emit)
        return {"call_results": {call["call_id"]: guard.run(run)}}

    async def ainvoke(self, call: PreparedCall, runtime: Runtime[LoopContext]) -> dict[str, Any]:
        scope = self.parts.scope(runtime)
        call, record = complete_call(self.parts.runner, call)
        if record is not None:
            return self._refused(record, scope.emit)
        config = tool_config(self.parts, call, get_config())

        async def run() -> dict[str, Any]:
            early = self._early(call)
            if early is not None:
                return dict(self.parts.safe_value(await early.aresult()))
            return dict(
                self.parts.safe_value(await self.parts.runner.run(call, scope.emit, config))
            )

        guard = self._guard(call, scope)
        if guard is None:
            return {"call_results": {call["call_id"]: await run()}}
        settled = await guard.abefore()
        if settled is not None:
            self._cancel_early(call)
            return self._settled(call, settled, scope.emit)
        return {"call_results": {call["call_id"]: await guard.arun(run)}}

    def _cancel_early(self, call: PreparedCall) -> None:
        early = self._early(call)
        if early is not None:
            early.cancel()


def make_call_tool(parts: LoopParts) -> LoopNode:
    """Build the `call_tool` task node of a loop."""
    node = _CallTool(parts)
    return LoopNode("call_tool", node.invoke, node.ainvoke)
