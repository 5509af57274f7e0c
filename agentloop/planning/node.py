"""The `plan` node: one streamed model request per round, closed early on `response`."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, BaseMessageChunk
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.errors import GraphBubbleUp

from agentloop.errors import ConfigurationError
from agentloop.events import Emit
from agentloop.models import ModelProvider
from agentloop.planning.normalize import normalize_plan_decision, unparseable_decision
from agentloop.planning.prompt import PLAN_TOOL, build_plan_messages
from agentloop.planning.stream import PlanParseError, PlanStreamParser
from agentloop.settings import LoopSettings
from agentloop.state import LoopState, PlanDecision, empty_round_state
from agentloop.tools.registry import ToolRegistry

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
        settings: LoopSettings,
        emit_factory: Any,
    ) -> None:
        self.models = models
        self.registry = registry
        self.settings = settings
        self.emit_factory = emit_factory

    def _prepare(
        self, state: LoopState, config: RunnableConfig
    ) -> tuple[Runnable[Any, Any], list[BaseMessage], PlanReader, Emit, LoopSettings]:
        settings, emit = self.emit_factory(config)
        model = self.models.planner(config)
        tool_mode = settings.plan_mode == "tool"
        bound = _bind_plan_tool(model) if tool_mode else model
        round_state = state.get("round_state") or empty_round_state()
        messages = build_plan_messages(
            user_input=state.get("user_input", ""),
            user_extra_requirement=state.get("user_extra_requirement", ""),
            tool_descriptions=self.registry.descriptions,
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
        runnable = bound.with_config(tags=PLAN_TAGS, run_name="plan")
        return runnable, messages, PlanReader.create(tool_mode=tool_mode), emit, settings

    def _finish(
        self,
        reader: PlanReader,
        emit: Emit,
        *,
        short_circuited: bool,
        started: float,
        error: BaseException | None,
    ) -> dict[str, Any]:
        if error is not None:
            decision = unparseable_decision(
                f"planner model failed: {type(error).__name__}: {error}", reader.parser.text
            )
        else:
            decision = reader.decision(short_circuited=short_circuited)
        emit(
            "plan_decided",
            next_action=decision["next_action"],
            command_count=len(decision["execution_commands"]),
            short_circuited=short_circuited,
            chunks=reader.chunks,
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
            parse_error=decision.get("parse_error", ""),
        )
        return {"decision": decision, "rollback_note": ""}

    def invoke(self, state: LoopState, config: RunnableConfig) -> dict[str, Any]:
        runnable, messages, reader, emit, _ = self._prepare(state, config)
        started = time.perf_counter()
        short, failure = False, None
        stream: Iterator[BaseMessageChunk] = runnable.stream(messages)
        try:
            for chunk in stream:
                if reader.feed(chunk):
                    short = True
                    break
        except GraphBubbleUp:
            raise
        except Exception as error:
            failure = error
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
        return self._finish(reader, emit, short_circuited=short, started=started, error=failure)

    async def ainvoke(self, state: LoopState, config: RunnableConfig) -> dict[str, Any]:
        runnable, messages, reader, emit, _ = self._prepare(state, config)
        started = time.perf_counter()
        short, failure = False, None
        stream: AsyncIterator[BaseMessageChunk] = runnable.astream(messages)
        try:
            async for chunk in stream:
                if reader.feed(chunk):
                    short = True
                    break
        except GraphBubbleUp:
            raise
        except Exception as error:
            failure = error
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        return self._finish(reader, emit, short_circuited=short, started=started, error=failure)


def _bind_plan_tool(model: BaseChatModel) -> Runnable[Any, Any]:
    try:
        return model.bind_tools([PLAN_TOOL], tool_choice="PlanDecision")
    except NotImplementedError as error:
        msg = f"plan_mode='tool' needs a model with tool calling; {type(model).__name__} has none"
        raise ConfigurationError(msg) from error


def plan_runnable(
    models: ModelProvider, registry: ToolRegistry, settings: LoopSettings, emit_factory: Any
) -> _PlanNode:
    """Build the plan node (sync and async)."""
    return _PlanNode(models, registry, settings, emit_factory)
