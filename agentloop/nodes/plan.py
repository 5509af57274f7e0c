"""The `plan` node: one streamed model request per round, closed early on `response`."""

from __future__ import annotations

import time
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, BaseMessageChunk
from langchain_core.runnables import Runnable
from langgraph.runtime import Runtime

from agentloop.errors import ConfigurationError, ModelBehaviorError, model_error_message
from agentloop.messages import message_text
from agentloop.model_calls import arun_with_retries, run_with_retries
from agentloop.model_stream import BoundedRead
from agentloop.nodes._runnable import LoopNode
from agentloop.nodes.parts import LoopParts
from agentloop.planning.normalize import unparseable_decision
from agentloop.planning.prompt import PLAN_TOOL, build_plan_messages
from agentloop.planning.reader import PlanRead
from agentloop.settings import LoopContext, RunScope
from agentloop.state import LoopState, empty_round_state
from agentloop.usage import usage_entry

__all__ = ["PLAN_TAGS", "make_plan"]

PLAN_TAGS = ["agentloop:plan"]


def _bind_plan_tool(model: BaseChatModel) -> Runnable[Any, Any]:
    try:
        return model.bind_tools([PLAN_TOOL], tool_choice="PlanDecision")
    except NotImplementedError as error:
        msg = f"plan_mode='tool' needs a model with tool calling; {type(model).__name__} has none"
        raise ConfigurationError(msg) from error


def _runnable(model: BaseChatModel, tool_mode: bool) -> Runnable[Any, Any]:
    bound = _bind_plan_tool(model) if tool_mode else model
    return bound.with_config(tags=PLAN_TAGS, run_name="plan")


def plan_chunk_size(chunk: BaseMessageChunk) -> int:
    """Characters a streamed plan chunk adds: its text and its tool-call argument text."""
    calls = getattr(chunk, "tool_call_chunks", None) or []
    return len(message_text(chunk)) + sum(len(call.get("args") or "") for call in calls)


class _Plan:
    """The plan node of one loop (sync and async)."""

    def __init__(self, parts: LoopParts) -> None:
        self.parts = parts

    def _bounded(self) -> BoundedRead[BaseMessageChunk]:
        limits = self.parts.model_limits
        return BoundedRead("plan", limits, limits.max_plan_chars, plan_chunk_size)

    def _request(
        self, state: LoopState, runtime: Runtime[LoopContext]
    ) -> tuple[RunScope, list[BaseChatModel], list[BaseMessage]]:
        scope = self.parts.scope(runtime)
        round_state = state.get("round_state") or empty_round_state()
        messages = build_plan_messages(
            user_input=state.get("user_input", ""),
            user_extra_requirement=state.get("user_extra_requirement", ""),
            available_tools=self.parts.tool_list,
            round_state=round_state,
            max_rounds=scope.settings.max_rounds,
            keep_tool_results=scope.settings.keep_tool_results,
            rollback_note=state.get("rollback_note", ""),
        )
        scope.emit(
            "round_started",
            round_index=round_state["round_index"],
            replan=bool(state.get("rollback_note")),
        )
        return scope, self.parts.models.planners(scope.context), messages

    def _finish(
        self,
        scope: RunScope,
        read: PlanRead | None,
        *,
        started: float,
        error: BaseException | None,
    ) -> dict[str, Any]:
        failure = ""
        if read is None:
            message = model_error_message(error) if error else "the planner produced nothing"
            failure = f"planner model failed: {message}"
            decision = unparseable_decision(failure)
            chunks, short = 0, False
        elif read.cut and not read.short:
            failure = f"planner output was cut: {read.cut}"
            decision = unparseable_decision(failure, read.reader.parser.text)
            chunks, short = read.reader.chunks, False
        else:
            decision = read.reader.decision(short_circuited=read.short)
            chunks, short = read.reader.chunks, read.short
        scope.emit(
            "plan_decided",
            next_action=decision["next_action"],
            command_count=len(decision["execution_commands"]),
            short_circuited=short,
            chunks=chunks,
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
            parse_error=decision.get("parse_error", ""),
        )
        update: dict[str, Any] = {"decision": decision, "rollback_note": ""}
        if failure:
            update.update(status="planner_failed", status_reason=failure)
        if read is not None:
            entry = usage_entry(read.model, read.tokens_in, read.tokens_out, self.parts.prices)
            update["usage"] = {scope.settings.name: entry}
        return self.parts.safe(update)

    def invoke(self, state: LoopState, runtime: Runtime[LoopContext]) -> dict[str, Any]:
        scope, models, messages = self._request(state, runtime)
        tool_mode = scope.settings.plan_mode == "tool"
        started = time.perf_counter()

        def attempt(model: BaseChatModel) -> PlanRead:
            read, bounded = PlanRead.start(model, tool_mode), self._bounded()
            chunks = bounded.iterate(lambda: _runnable(model, tool_mode).stream(messages))
            try:
                for chunk in chunks:
                    if read.feed(chunk):
                        break
            finally:
                chunks.close()
            read.cut = bounded.cut
            return read

        try:
            read = run_with_retries(models, attempt, self.parts.model_retry)
        except ModelBehaviorError as error:
            return self._finish(scope, None, started=started, error=error)
        return self._finish(scope, read, started=started, error=None)

    async def ainvoke(self, state: LoopState, runtime: Runtime[LoopContext]) -> dict[str, Any]:
        scope, models, messages = self._request(state, runtime)
        tool_mode = scope.settings.plan_mode == "tool"
        started = time.perf_counter()

        async def attempt(model: BaseChatModel) -> PlanRead:
            read, bounded = PlanRead.start(model, tool_mode), self._bounded()
            chunks = bounded.aiterate(_runnable(model, tool_mode).astream(messages))
            try:
                async for chunk in chunks:
                    if read.feed(chunk):
                        break
            finally:
                await chunks.aclose()
            read.cut = bounded.cut
            return read

        try:
            read = await arun_with_retries(models, attempt, self.parts.model_retry)
        except ModelBehaviorError as error:
            return self._finish(scope, None, started=started, error=error)
        return self._finish(scope, read, started=started, error=None)


def make_plan(parts: LoopParts) -> LoopNode:
    """Build the `plan` node of a loop."""
    node = _Plan(parts)
    return LoopNode("plan", node.invoke, node.ainvoke)
