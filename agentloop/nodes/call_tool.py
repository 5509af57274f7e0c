"""The `call_tool` task: one call through the side-effect ledger and the governance pipeline.

Each call is its own LangGraph task (`Send`), so a checkpointer saves every finished
call. The call takes the one route every call takes (`agentloop.nodes.guarded`): with a
checkpointer it consults the side-effect ledger first, then runs the pipeline and
records the outcome. A call that streaming dispatch already started on that same route
while its plan streamed is adopted instead (same call id, same `call_key`).

A call whose arguments refer to other commands' results first resolves them from the
outcomes it was sent with and is validated (`complete_call`), before the ledger; when a
referenced command failed, or the resolved arguments are invalid, it is settled without
running.
"""

from __future__ import annotations

from typing import Any

from langgraph.config import get_config
from langgraph.runtime import Runtime

from agentloop.events import Emit
from agentloop.inflight import EarlyCall
from agentloop.nodes._runnable import LoopNode
from agentloop.nodes.early_dispatch import tool_config
from agentloop.nodes.guarded import arun_guarded, run_guarded
from agentloop.nodes.parts import LoopParts
from agentloop.settings import LoopContext
from agentloop.state import PreparedCall, ToolExecutionRecord
from agentloop.tools.deferred import complete_call
from agentloop.tools.pipeline import emit_settled

__all__ = ["make_call_tool"]


class _CallTool:
    def __init__(self, parts: LoopParts) -> None:
        self.parts = parts

    def _early(self, call: PreparedCall) -> EarlyCall | None:
        """The call as the plan node started it while the plan streamed, if it did."""
        return self.parts.inflight.take_call(call["run_id"], call["call_id"], call["call_key"])

    def _refused(self, record: ToolExecutionRecord, emit: Emit) -> dict[str, Any]:
        """The update of a call settled before running (a failed reference, bad arguments)."""
        emit_settled(emit, record)
        return {"call_results": {record.get("call_id", ""): self.parts.safe_value(record)}}

    def invoke(self, call: PreparedCall, runtime: Runtime[LoopContext]) -> dict[str, Any]:
        scope = self.parts.scope(runtime)
        call, refused = complete_call(self.parts.runner, call)
        if refused is not None:
            return self._refused(refused, scope.emit)
        early = self._early(call)
        if early is not None:
            record = self.parts.safe_value(early.result())
        else:
            record = run_guarded(
                self.parts, call, scope, tool_config(self.parts, call, get_config(), scope.context)
            )
        return {"call_results": {call["call_id"]: record}}

    async def ainvoke(self, call: PreparedCall, runtime: Runtime[LoopContext]) -> dict[str, Any]:
        scope = self.parts.scope(runtime)
        call, refused = complete_call(self.parts.runner, call)
        if refused is not None:
            return self._refused(refused, scope.emit)
        early = self._early(call)
        if early is not None:
            record = self.parts.safe_value(await early.aresult())
        else:
            config = tool_config(self.parts, call, get_config(), scope.context)
            record = await arun_guarded(self.parts, call, scope, config)
        return {"call_results": {call["call_id"]: record}}


def make_call_tool(parts: LoopParts) -> LoopNode:
    """Build the `call_tool` task node of a loop."""
    node = _CallTool(parts)
    return LoopNode("call_tool", node.invoke, node.ainvoke)
