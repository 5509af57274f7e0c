"""Feeding a streamed planner reply to the incremental parser, chunk by chunk."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessageChunk, ToolCall
from langchain_core.messages.tool import tool_call_chunk

from agentloop.base.messages import message_text
from agentloop.models.resolve import model_name
from agentloop.models.usage import message_usage
from agentloop.planning.native import NativePlanReader
from agentloop.planning.normalize import normalize_plan_decision, unparseable_decision
from agentloop.planning.stream import PlanMode, PlanParseError, PlanStreamParser
from agentloop.state import PlanDecision

__all__ = ["PlanRead", "PlanReader"]


@dataclass
class PlanReader:
    """Feeds a streamed planner reply to the incremental parser, one chunk at a time.

    In tool mode the plan is the first tool call's arguments; text the model writes
    beside them is read too, for models that answer in text anyway.
    """

    tool_mode: bool
    parser: PlanStreamParser = field(default_factory=PlanStreamParser)
    text_parser: PlanStreamParser = field(default_factory=PlanStreamParser)
    chunks: int = 0

    def feed(self, chunk: BaseMessageChunk) -> bool:
        """Consume one chunk; return True once a complete `next_action` says `response`."""
        self.chunks += 1
        if self.tool_mode:
            for call_chunk in getattr(chunk, "tool_call_chunks", None) or []:
                if (call_chunk.get("index") or 0) == 0 and call_chunk.get("args"):
                    self.parser.feed(str(call_chunk["args"]))
            text = message_text(chunk)
            if text:
                self.text_parser.feed(text)
            return self.parser.wants_response or (
                not self.parser.text and self.text_parser.wants_response
            )
        self.parser.feed(message_text(chunk))
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


@dataclass
class PlanRead:
    """One attempt at reading a plan: the reader, usage, and whether it short-circuited."""

    reader: PlanReader | NativePlanReader
    model: str
    short: bool = False
    cut: str = ""
    """Why reading stopped before the reply ended ("" when it did not)."""
    tokens_in: int = 0
    tokens_out: int = 0
    offered: frozenset[str] | None = None
    """The tools the planner was offered, when a middleware narrowed them (None: all)."""
    refusal: str = ""
    """The model's refusal (`additional_kwargs["refusal"]`, as langchain-openai gives it,
    or a standard `refusal` content block)."""
    refusal_block: bool = False
    """The refusal came as a content block (kept as one for middleware)."""
    provider: str = ""
    """The reply's `model_provider`, which says how its content blocks are read."""
    written: str | None = None
    """The text of a reply a `wrap_model_call` middleware wrote itself (None: the model's)."""

    @classmethod
    def start(cls, model: BaseChatModel, plan_mode: PlanMode, *, whole: bool = False) -> PlanRead:
        """Start reading a reply of `model` (a native one `whole`: its text may be the answer)."""
        reader: PlanReader | NativePlanReader
        if plan_mode == "native":
            reader = NativePlanReader(whole=whole)
        else:
            reader = PlanReader(plan_mode == "tool")
        return cls(reader, model_name(model))

    @classmethod
    def of_message(cls, message: AIMessage, model: BaseChatModel, plan_mode: PlanMode) -> PlanRead:
        """Read a whole reply at once (one that middleware wrote, not the model)."""
        read = cls.start(model, plan_mode, whole=True)
        chunks = [
            tool_call_chunk(
                name=call["name"], args=json.dumps(call["args"]), id=call["id"], index=index
            )
            for index, call in enumerate(message.tool_calls)
        ]
        reply = AIMessageChunk(
            id=message.id,
            content=message.content,
            tool_call_chunks=chunks,
            additional_kwargs=message.additional_kwargs,
            response_metadata=message.response_metadata,
        )
        reply.chunk_position = "last"
        read.feed(reply)
        read.written = message_text(message)
        return read

    @property
    def reply_text(self) -> str:
        """The reply as text: the plan's JSON, or the native reply's text and tool calls."""
        if isinstance(self.reader, NativePlanReader):
            return self.reader.parser.transcript()
        return self.reader.parser.text or self.reader.text_parser.text

    def as_message(self) -> AIMessage:
        """The reply as a message, for middleware (the plan's JSON as its text).

        A native reply keeps its tool calls; a refusal is kept as the model gave it, so
        middleware reads it from `content_blocks` (`ModelRefusalMiddleware`).
        """
        extra: dict[str, Any] = {}
        if self.refusal_block:
            return AIMessage([{"type": "refusal", "refusal": self.refusal}], **extra)
        if self.refusal:
            extra["additional_kwargs"] = {"refusal": self.refusal}
        if self.provider:
            extra["response_metadata"] = {"model_provider": self.provider}
        if isinstance(self.reader, NativePlanReader):
            parser = self.reader.parser
            calls = [
                ToolCall(
                    name=command["tool_name"],
                    args=dict(command["tool_kwargs"])
                    if isinstance(command["tool_kwargs"], dict)
                    else {},
                    id=call_id or None,
                )
                for command, call_id in zip(parser.commands(), parser.call_ids(), strict=True)
            ]
            return AIMessage(parser.text, tool_calls=calls, **extra)
        return AIMessage(self.reader.parser.text or self.reader.text_parser.text, **extra)

    def feed(self, chunk: BaseMessageChunk) -> bool:
        """Consume one chunk; return True once the plan says `response`."""
        tokens_in, tokens_out = message_usage([chunk])
        refusal = chunk.additional_kwargs.get("refusal")
        if isinstance(refusal, str):
            self.refusal += refusal
        elif type(chunk.content) is list:  # a standard content block of a refusal
            for block in chunk.content:
                if isinstance(block, dict) and block.get("type") == "refusal":
                    self.refusal += str(block.get("refusal") or "")
                    self.refusal_block = True
        self.provider = str(chunk.response_metadata.get("model_provider") or self.provider)
        self.tokens_in += tokens_in
        self.tokens_out += tokens_out
        self.short = self.reader.feed(chunk)
        return self.short
