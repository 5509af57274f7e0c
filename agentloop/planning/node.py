"""The `plan` node: one streamed model request per round, closed early on `response`."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, BaseMessageChunk
from langchain_core.runnables import Runnable, RunnableConfig

from agentloop.errors import ConfigurationError, ModelBehaviorError
from agentloop.events import Emit
from agentloop.model_calls import (
    ModelRetry,
    arun_with_retries,
    model_error_message,
    run_with_retries,
)
from agentloop.models import ModelProvider, model_name
from agentloop.planning.normalize import normalize_plan_decision, unparseable_decision
from agentloop.planning.prompt import PLAN_TOOL, build_plan_messages
from agentloop.planning.stream import PlanParseError, PlanStreamParser
from agentloop.settings import LoopSettings
from agentloop.state import LoopState, PlanDecision, empty_round_state
from agentloop.tools.registry import ToolRegistry
from agentloop.usage import Prices, message_usage, usage_entry

__all__ = ["PlanReader", "chunk_text", "plan_runnable"]

PLAN_TAGS = ["agentloop:plan"]


def chunk_text(chunk: BaseMessageChunk | BaseMessage) -> str:
    """Return the text of a message chunk (string content or text blocks)."""
    content = chunk.content
    if isinstance(content, str):
        return content
    return "".join(
        block.get("text", "") if isinstance(block, dict) else str(block)
        for block in content
        if not isinstance(block, dict) or block.get("type") in ("text", "text_delta", None)
    )


@dataclass
class PlanReader:
    """Feeds a streamed planner reply to the incremental parser, one chunk at a time."""

    tool_mode: bool
    parser: PlanStreamParser
    text_parser: PlanStreamParser
    chunks: int = 0

    @classmethod
    def create(cls, *, tool_mode: bool) -> PlanReader:
        """Start reading a new reply."""
        return cls(tool_mode, PlanStreamParser(), PlanStreamParser())

    def feed(self, chunk: BaseMessageChunk) -> bool:
        """Consume one chunk; return True once a complete `next_action` says `response`."""
        self.chunks += 1
        if self.tool_mode:
            for call_chunk in getattr(chunk, "tool_call_chunks", None) or []:
                if (call_chunk.get("index") or 0) == 0 and call_chunk.get("args"):
                    self.parser.feed(str(call_chunk["args"]))
            text = chunk_text(chunk)
            if text:
                self.text_parser.feed(text)
            return self.parser.wants_response or (
                not self.parser.text and self.text_parser.wants_response
            )
        self.parser.feed(chunk_text(chunk))
        return self.parser.wants_response

    def decision(self, *, short_circuited: bool) -> PlanDecision:
        """Return the normalized decision of what was read."""
        if short_circuited:
            return {"next_action": "response", "execution_commands": [], "short_circuited": True}
        parser = self.parser if self.parser.text or not self.tool_mode else self.text_parser
        try:
            raw = parser.parse()
        except PlanParseError as error:
            return unparseable_decision(str(error), parser.text)
        decision = normalize_plan_decision(raw)
        decision["short_circuited"] = False
        return decision


class _PlanNode:
    def __init__(
        self,
        models: ModelProvider,
        registry: ToolRegistry,
        emit_factory: Any,
        retry: ModelRetry,
        prices: Prices | None,
    ) -> None:
        self.models = models
        self.registry = registry
        self.emit_factory = emit_factory
        self.retry = retry
        self.prices = prices

    def _prepare(
        self, state: LoopState, config: RunnableConfig
    ) -> tuple[list[BaseChatModel], list[BaseMessage], LoopSettings, Emit]:
        settings, emit = self.emit_factory(config)
        round_state = state.get("round_state") or empty_round_state()
        messages = build_plan_messages(
            user_input=state.get("user_input", ""),
            user_extra_requirement=state.get("user_extra_requirement", ""),
            available_tools=self.registry.descriptions_json,
            round_state=round_state,
            max_rounds=settings.max_rounds,
            keep_tool_results=settings.keep_tool_results,
            rollback_note=state.get("rollback_note", ""),
        )
        emit(
            "round_started",
            round_index=round_state["round_index"],
            replan=bool(state.get("rollback_note")),
        )
        return self.models.planners(config), messages, settings, emit

    def _runnable(self, model: BaseChatModel, tool_mode: bool) -> Runnable[Any, Any]:
        bound = _bind_plan_tool(model) if tool_mode else model
        return bound.with_config(tags=PLAN_TAGS, run_name="plan")

    def _finish(
        self,
        agent: str,
        read: _PlanRead | None,
        emit: Emit,
        *,
        started: float,
        error: BaseException | None,
    ) -> dict[str, Any]:
        if read is None:
            message = model_error_message(error) if error else "the planner produced nothing"
            decision = unparseable_decision(f"planner model failed: {message}")
            chunks, short = 0, False
        else:
            decision = read.reader.decision(short_circuited=read.short)
            chunks, short = read.reader.chunks, read.short
        emit(
            "plan_decided",
            next_action=decision["next_action"],
            command_count=len(decision["execution_commands"]),
            short_circuited=short,
            chunks=chunks,
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
            parse_error=decision.get("parse_error", ""),
        )
        update: dict[str, Any] = {"decision": decision, "rollback_note": ""}
        if read is not None:
            update["usage"] = {
                agent: usage_entry(read.model, read.tokens_in, read.tokens_out, self.prices)
            }
        return update

    def invoke(self, state: LoopState, config: RunnableConfig) -> dict[str, Any]:
        models, messages, settings, emit = self._prepare(state, config)
        tool_mode, agent = settings.plan_mode == "tool", settings.name
        started = time.perf_counter()

        def attempt(model: BaseChatModel) -> _PlanRead:
            read = _PlanRead.start(model, tool_mode)
            stream: Iterator[BaseMessageChunk] = self._runnable(model, tool_mode).stream(messages)
            try:
                for chunk in stream:
                    if read.feed(chunk):
                        break
            finally:
                close = getattr(stream, "close", None)
                if close is not None:
                    close()
            return read

        try:
            read = run_with_retries(models, attempt, self.retry)
        except ModelBehaviorError as error:
            return self._finish(agent, None, emit, started=started, error=error)
        return self._finish(agent, read, emit, started=started, error=None)

    async def ainvoke(self, state: LoopState, config: RunnableConfig) -> dict[str, Any]:
        models, messages, settings, emit = self._prepare(state, config)
        tool_mode, agent = settings.plan_mode == "tool", settings.name
        started = time.perf_counter()

        async def attempt(model: BaseChatModel) -> _PlanRead:
            read = _PlanRead.start(model, tool_mode)
            runnable = self._runnable(model, tool_mode)
            stream: AsyncIterator[BaseMessageChunk] = runnable.astream(messages)
            try:
                async for chunk in stream:
                    if read.feed(chunk):
                        break
            finally:
                aclose = getattr(stream, "aclose", None)
                if aclose is not None:
                    await aclose()
            return read

        try:
            read = await arun_with_retries(models, attempt, self.retry)
        except ModelBehaviorError as error:
            return self._finish(agent, None, emit, started=started, error=error)
        return self._finish(agent, read, emit, started=started, error=None)


@dataclass
class _PlanRead:
    """One attempt at reading a plan: the reader, usage, and whether it short-circuited."""

    reader: PlanReader
    model: str
    short: bool = False
    tokens_in: int = 0
    tokens_out: int = 0

    @classmethod
    def start(cls, model: BaseChatModel, tool_mode: bool) -> _PlanRead:
        return cls(PlanReader.create(tool_mode=tool_mode), model_name(model))

    def feed(self, chunk: BaseMessageChunk) -> bool:
        tokens_in, tokens_out = message_usage([chunk])
        self.tokens_in += tokens_in
        self.tokens_out += tokens_out
        self.short = self.reader.feed(chunk)
        return self.short


def _bind_plan_tool(model: BaseChatModel) -> Runnable[Any, Any]:
    try:
        return model.bind_tools([PLAN_TOOL], tool_choice="PlanDecision")
    except NotImplementedError as error:
        msg = f"plan_mode='tool' needs a model with tool calling; {type(model).__name__} has none"
        raise ConfigurationError(msg) from error


def plan_runnable(
    models: ModelProvider,
    registry: ToolRegistry,
    emit_factory: Any,
    retry: ModelRetry,
    prices: Prices | None = None,
) -> _PlanNode:
    """Build the plan node (sync and async)."""
    return _PlanNode(models, registry, emit_factory, retry, prices)
