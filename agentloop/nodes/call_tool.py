"""The `call_tool` task: one call through the side-effect ledger and the governance pipeline.

Each call is its own LangGraph task (`Send`), so a checkpointer saves every finished
call. The call takes the one route every call takes (`agentloop.nodes.guarded`): with a
checkpointer it consults the side-effect ledger first, then runs the pipeline and
records the outcome. A call that streaming dispatch already started on that same route
while its plan streamed is adopted instead (same call id, same `call_key`).

A call whose arguments refer to other commands' results first resolves them from the
outcomes it was sent with and is validated (`complete_call`), before the ledger; when a
referenced command failed, or the resolved arguments are invalid, it is settled without
running (with the ledger's record when an earlier execution of it left one).

A call with side effects whose run is cancelled while it runs leaves its `unknown_outcome`
record and the run's `cancelled` status in the state (`_CallTool._cancelled`).
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial
from typing import TYPE_CHECKING, Any, cast

from langgraph.config import get_config
from langgraph.runtime import Runtime

from agentloop.durability import current_checkpointer, save_step_input
from agentloop.governance.call_id import kept_under
from agentloop.governance.deferred import complete_call
from agentloop.governance.outcome import ToolOutcome
from agentloop.governance.pipeline import emit_settled
from agentloop.governance.planned_arguments import NOTHING_PLANNED, planned, unavailable_message
from agentloop.governance.records import make_record
from agentloop.middleware.transcript import tool_message
from agentloop.nodes._runnable import LoopNode
from agentloop.nodes.guarded import guarded_call, ledger_record, tool_config
from agentloop.nodes.parts import LoopParts
from agentloop.nodes.updates import CallToolUpdate
from agentloop.settings import LoopContext, RunScope
from agentloop.state import PreparedCall, ToolExecutionRecord

if TYPE_CHECKING:
    from agentloop.nodes.accelerate import Accelerator

__all__ = ["make_call_tool"]

logger = logging.getLogger("agentloop")


class _CallTool:
    def __init__(self, parts: LoopParts, accelerator: Accelerator) -> None:
        self.parts = parts
        self.accelerator = accelerator

    async def _refused(
        self, call: PreparedCall, refused: ToolExecutionRecord, scope: RunScope
    ) -> CallToolUpdate:
        """The update of a call refused before running: the ledger's record if it has one.

        Code deployed since an earlier execution started the call may refuse it (its
        tool gone, its arguments now invalid); that execution's outcome, or
        `unknown_outcome`, is then the call's record.
        """
        known = await ledger_record(self.parts, call, scope)
        if known is not None:
            return self._done(call, known)
        emit_settled(scope.emit, refused)
        return _written(self.parts.safe_value(refused))

    def _done(self, call: PreparedCall, record: Any) -> CallToolUpdate:
        """The call's record and `ToolMessage`, and what its tool's `Command` writes (if any).

        The `Command`'s keys are written now, so the next round sees them; its messages
        follow the call's `ToolMessage` (in the order `create_agent` keeps them).
        """
        # subscripts, not `get`: no call on the usual path
        state_update = (
            record["state_update"] if type(record) is dict and "state_update" in record else None
        )
        if not state_update:
            return _written(record)
        keys = {key: value for key, value in state_update.items() if key != "messages"}
        record = {key: value for key, value in record.items() if key != "state_update"}
        written = _written(record, list(state_update.get("messages") or ()))
        return cast(CallToolUpdate, {**keys, **written})

    async def run(self, call: PreparedCall, runtime: Runtime[LoopContext]) -> CallToolUpdate:
        """The task: a coroutine `LoopNode` awaits under `ainvoke`, runs blocking under `invoke`."""
        try:
            return await self._run(call, runtime)
        except asyncio.CancelledError:  # the run was cancelled: what it kept goes
            self.parts.release_kept(kept_under(call))
            raise

    async def _run(self, call: PreparedCall, runtime: Runtime[LoopContext]) -> CallToolUpdate:
        scope = self.parts.scope(runtime)
        redacted = call.get("redacted")
        written = self.parts.planned_arguments.take(call) if redacted else None
        if redacted and written is None:  # kept in memory, gone since
            message = unavailable_message(call["tool_name"])
            outcome = ToolOutcome.refused("arguments_unavailable", call["tool_name"], message)
            return await self._refused(call, make_record(call, outcome), scope)
        if call.get("depends_on"):  # its arguments take other commands' results
            call, refused = complete_call(self.parts.runner, call)
            if refused is not None:  # a reference failed, or the resolved arguments are invalid
                return await self._refused(call, refused, scope)
        early = self.accelerator.take_call(call)  # started while its plan streamed
        if early is not None:
            record = await early.record()
            return self._done(call, record)  # guarded_call's record: already safe
        config = scope.config  # the node call's, read once when its scope was made
        config = tool_config(
            self.parts, call, config if config is not None else get_config(), scope.context
        )
        block = planned(written)  # the tool's function gets the planner's own arguments
        cancelled = partial(self._cancelled, call, scope)
        if block is NOTHING_PLANNED:  # the usual call: no block to enter
            record = await guarded_call(self.parts, call, scope, config, cancelled=cancelled)
        else:
            with block:
                record = await guarded_call(self.parts, call, scope, config, cancelled=cancelled)
        return self._done(call, record)

    async def _cancelled(
        self, call: PreparedCall, scope: RunScope, record: ToolExecutionRecord
    ) -> None:
        """Leave in the state how a run cancelled during a call with side effects ended.

        The task's own output dies with it, so the call's `unknown_outcome` record and the
        run's `cancelled` status are saved as input to the task's step
        (`save_step_input`): a read of the thread shows them, and resuming the run starts
        from them and settles the call from the ledger's claim (it is not made again).
        """
        saver, execution = current_checkpointer(), scope.execution
        if saver is None or execution is None:
            return
        update = self.parts.safe(
            {
                "call_results": {record.get("call_id", ""): record},
                "status": "cancelled",
                "status_reason": f"the run was cancelled while {call['tool_name']} ran",
            }
        )
        try:
            await save_step_input(saver, execution, list(update.items()))
        except Exception as error:  # the cancellation goes on whatever the checkpointer says
            logger.warning(
                "%s: the state of a run cancelled during %s could not be saved: %s",
                self.parts.settings.name,
                call["tool_name"],
                error,
            )


def _written(record: ToolExecutionRecord, added: list[Any] | None = None) -> CallToolUpdate:
    """A finished call's update: its record, its `ToolMessage` and the messages it added."""
    return {
        "call_results": {record.get("call_id", ""): record},
        "messages": [tool_message(record), *added] if added else [tool_message(record)],
    }


def make_call_tool(parts: LoopParts, accelerator: Accelerator) -> LoopNode:
    """Build the `call_tool` task node of a loop."""
    return LoopNode("call_tool", coroutine=_CallTool(parts, accelerator).run)
