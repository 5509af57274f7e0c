"""A simulated model service: a chat model with a provider's latency and scripted decisions.

`SimulatedChatModel` waits as a hosted model would: time to first token plus prefill
(input tokens / prefill rate) before the first chunk, then one token per chunk at the
output rate. Tokens are estimated as one per 4 characters, rounded up, of the rendered
request (`render_request`: the bound tools as JSON, then each message's role, text and
tool calls) and of the reply. Its decisions come from a `Decisions` script, chosen by
what it is asked: our planner's prompt (with or without the tools bound), our answer
prompt, or a tool-calling turn of `create_agent` (tools bound, no plan prompt). Every
request is recorded in a `RequestLog`.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import PrivateAttr

__all__ = [
    "CHARS_PER_TOKEN",
    "Decisions",
    "ModelRequest",
    "RequestKind",
    "RequestLog",
    "ServiceProfile",
    "SimulatedChatModel",
    "estimate_tokens",
    "render_request",
]

CHARS_PER_TOKEN = 4
"""The token estimate: one token per 4 characters, rounded up."""
PLAN_MARKER = "You plan"
"""How our planner's rules begin, in its system message, in both plan modes (the answer's
rules begin otherwise): a request with tools bound that carries it is our native
planner's, not `create_agent`'s."""

RequestKind = Literal["plan", "answer", "agent"]
"""Our planner, our answer model, or a tool-calling turn of `create_agent`."""


def estimate_tokens(text: str) -> int:
    """Return the token estimate of `text` (one per 4 characters, rounded up)."""
    return -(-len(text) // CHARS_PER_TOKEN)


@dataclass(frozen=True)
class ServiceProfile:
    """The latency of the simulated service."""

    ttft_s: float = 0.6
    """Time to first token, before prefill."""
    prefill_tokens_per_s: float = 4_000
    """Input tokens read per second before the first token."""
    output_tokens_per_s: float = 60
    """Output tokens per second after the first."""
    time_scale: float = 1.0
    """Factor applied to every wait (1: real time; 0.1: ten times faster)."""

    def fixed_s(self) -> float:
        """Return the scaled time to first token (without prefill)."""
        return self.ttft_s * self.time_scale

    def prefill_s(self, input_tokens: int) -> float:
        """Return the scaled prefill time of a request."""
        return input_tokens / self.prefill_tokens_per_s * self.time_scale

    def token_s(self) -> float:
        """Return the scaled time between two output tokens."""
        return self.time_scale / self.output_tokens_per_s


def render_request(messages: Sequence[BaseMessage], tools: Sequence[dict[str, Any]]) -> str:
    """Render a request as the text a provider would tokenize.

    The tool definitions come first (as compact JSON), then each message as its role on
    a line, its text, and its tool calls as JSON; a provider's prompt cache can reuse
    the longest prefix this text shares with an earlier request's.
    """
    parts = [f"tools: {json.dumps(list(tools), separators=(',', ':'))}\n"] if tools else []
    for message in messages:
        parts.append(f"{message.type}:\n{message.text}\n")
        calls = getattr(message, "tool_calls", None) or []
        if calls:
            named = [{"name": call["name"], "args": call["args"]} for call in calls]
            parts.append(f"tool_calls: {json.dumps(named)}\n")
    return "".join(parts)


@dataclass
class ModelRequest:
    """One request to the simulated service, as it ran."""

    kind: RequestKind
    """Who asked (see `RequestKind`)."""
    prompt: str
    """The rendered request (see `render_request`)."""
    input_tokens: int
    """Its token estimate."""
    reply_tokens: int
    """Tokens of the whole scripted reply."""
    started: float
    """`time.perf_counter()` when the request arrived."""
    fixed_s: float
    """The time to first token it was given (scaled)."""
    prefill_s: float
    """The prefill time it was given (scaled)."""
    output_tokens: int = 0
    """Tokens actually sent (fewer than `reply_tokens` when the caller closed the stream)."""
    first_token: float | None = None
    """When the first chunk was sent."""
    ended: float | None = None
    """When the last chunk the caller took was sent."""
    due: list[float] = field(default_factory=list)
    """When each chunk the caller took was due (what the service alone would take)."""

    @property
    def duration_s(self) -> float:
        """Seconds from the request to its end."""
        return (self.ended or self.started) - self.started

    @property
    def output_s(self) -> float:
        """Seconds spent sending output (from the first chunk to the end)."""
        if self.first_token is None or self.ended is None:
            return 0.0
        return self.ended - self.first_token


@dataclass
class RequestLog:
    """Every request a model received, in order (shared, never copied)."""

    requests: list[ModelRequest] = field(default_factory=list)
    """The requests, in the order they arrived."""

    def __deepcopy__(self, memo: dict[int, Any]) -> RequestLog:
        return self


@dataclass(frozen=True)
class Decisions:
    """What the simulated model replies, by who asks."""

    plans: Sequence[str | AIMessage] = ()
    """Our planner's replies, one per plan request, in order: plan JSON text, or (for the
    native planner) a message with tool calls, or the text that ends its rounds."""
    agent_turns: Sequence[AIMessage] = ()
    """`create_agent`'s tool-calling turns, in order; the answer follows them."""
    answer: str = "Done."
    """The final answer: our answer model's reply and `create_agent`'s last turn."""


@dataclass(frozen=True)
class _Chunk:
    """A streamed chunk and the output tokens it costs."""

    chunk: AIMessageChunk
    tokens: int


def _chunks(reply: AIMessage) -> list[_Chunk]:
    """Split a reply into chunks of one token; a tool call's name costs tokens too."""
    step = CHARS_PER_TOKEN
    chunks = [
        _Chunk(AIMessageChunk(content=reply.text[i : i + step], id=reply.id), 1)
        for i in range(0, len(reply.text), step)
    ]
    for index, call in enumerate(reply.tool_calls):
        args = json.dumps(call["args"])
        pieces = [args[i : i + step] for i in range(0, len(args), step)] or [""]
        for position, piece in enumerate(pieces):
            first = position == 0
            delta = tool_call_chunk(
                name=call["name"] if first else None,
                args=piece,
                id=call["id"] if first else None,
                index=index,
            )
            tokens = 1 + (estimate_tokens(call["name"]) if first else 0)
            chunks.append(
                _Chunk(AIMessageChunk(content="", id=reply.id, tool_call_chunks=[delta]), tokens)
            )
    return chunks or [_Chunk(AIMessageChunk(content="", id=reply.id), 1)]


class SimulatedChatModel(BaseChatModel):
    """A chat model with a hosted service's latency, replying from a `Decisions` script.

    Sync and async, streamed or not: the first chunk comes after the time to first token
    plus prefill, then one token per chunk at the output rate (a non-streamed request
    waits as long as the whole stream would). The last chunk carries `usage_metadata`.
    """

    _profile: ServiceProfile = PrivateAttr()
    _decisions: Decisions = PrivateAttr()
    _log: RequestLog = PrivateAttr()
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _served: dict[str, int] = PrivateAttr(default_factory=dict)

    def __init__(
        self, profile: ServiceProfile, decisions: Decisions, log: RequestLog, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self._profile, self._decisions, self._log = profile, decisions, log

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> SimulatedChatModel:
        return self  # one script position and one log, whoever holds the model

    @property
    def _llm_type(self) -> str:
        return "simulated-service"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": "simulated-service"}

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind tools as a provider receives them (OpenAI format); they enter the prompt."""
        formatted = [convert_to_openai_tool(tool) for tool in tools]
        return self.bind(tools=formatted, **kwargs)

    def _start(
        self, messages: list[BaseMessage], tools: Sequence[dict[str, Any]]
    ) -> tuple[ModelRequest, AIMessage]:
        """Record the request and choose its reply."""
        kind: RequestKind
        if messages and messages[0].type == "system" and PLAN_MARKER in messages[0].text:
            kind = "plan"
        elif tools:
            kind = "agent"
        else:
            kind = "answer"
        with self._lock:
            number = self._served.get(kind, 0)
            self._served[kind] = number + 1
        reply = self._reply(kind, number)
        prompt = render_request(messages, tools)
        input_tokens = estimate_tokens(prompt)
        reply_tokens = sum(chunk.tokens for chunk in _chunks(reply))
        reply.usage_metadata = UsageMetadata(
            input_tokens=input_tokens,
            output_tokens=reply_tokens,
            total_tokens=input_tokens + reply_tokens,
        )
        request = ModelRequest(
            kind=kind,
            prompt=prompt,
            input_tokens=input_tokens,
            reply_tokens=reply_tokens,
            started=time.perf_counter(),
            fixed_s=self._profile.fixed_s(),
            prefill_s=self._profile.prefill_s(input_tokens),
        )
        with self._lock:
            self._log.requests.append(request)
        return request, reply

    def _reply(self, kind: RequestKind, number: int) -> AIMessage:
        decisions = self._decisions
        message_id = f"sim-{uuid.uuid4().hex}"
        if kind == "plan":
            if number >= len(decisions.plans):
                msg = f"the script has {len(decisions.plans)} plans; plan #{number + 1} was asked"
                raise RuntimeError(msg)
            return _copy(decisions.plans[number], message_id)
        if kind == "agent" and number < len(decisions.agent_turns):
            return _copy(decisions.agent_turns[number], message_id)
        return AIMessage(content=decisions.answer, id=message_id)

    def _deadlines(self, request: ModelRequest, chunks: list[_Chunk]) -> Iterator[float]:
        """When each chunk is due (perf_counter seconds)."""
        first = request.started + request.fixed_s + request.prefill_s
        sent = 0
        for chunk in chunks:
            sent += chunk.tokens
            yield first + (sent - 1) * self._profile.token_s()

    def _last_due(self, request: ModelRequest, reply: AIMessage) -> float:
        """When the whole reply is generated (perf_counter seconds)."""
        *_, last = self._deadlines(request, _chunks(reply))
        return last

    @staticmethod
    def _whole_reply(request: ModelRequest, reply: AIMessage, last_due: float) -> ChatResult:
        """Count the whole reply as sent; its first token was due after TTFT and prefill."""
        request.first_token = request.started + request.fixed_s + request.prefill_s
        request.output_tokens = request.reply_tokens
        request.ended = time.perf_counter()
        request.due.append(last_due)
        return ChatResult(generations=[ChatGeneration(message=reply)])

    @staticmethod
    def _sent(request: ModelRequest, chunk: _Chunk, due: float) -> None:
        """Count a chunk as sent; the request ends with the last chunk the caller takes."""
        now = time.perf_counter()
        if request.first_token is None:
            request.first_token = now
        request.output_tokens += chunk.tokens
        request.ended = now
        request.due.append(due)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        request, reply = self._start(messages, kwargs.get("tools") or ())
        last_due = self._last_due(request, reply)
        time.sleep(max(0.0, last_due - time.perf_counter()))
        return self._whole_reply(request, reply, last_due)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        request, reply = self._start(messages, kwargs.get("tools") or ())
        last_due = self._last_due(request, reply)
        await asyncio.sleep(max(0.0, last_due - time.perf_counter()))
        return self._whole_reply(request, reply, last_due)

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        request, reply = self._start(messages, kwargs.get("tools") or ())
        chunks = _chunks(reply)
        _finish(chunks, reply)
        for chunk, due in zip(chunks, self._deadlines(request, chunks), strict=True):
            time.sleep(max(0.0, due - time.perf_counter()))
            self._sent(request, chunk, due)
            generation = ChatGenerationChunk(message=chunk.chunk)
            if run_manager is not None:
                run_manager.on_llm_new_token(chunk.chunk.text, chunk=generation)
            yield generation

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        request, reply = self._start(messages, kwargs.get("tools") or ())
        chunks = _chunks(reply)
        _finish(chunks, reply)
        for chunk, due in zip(chunks, self._deadlines(request, chunks), strict=True):
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            self._sent(request, chunk, due)
            generation = ChatGenerationChunk(message=chunk.chunk)
            if run_manager is not None:
                await run_manager.on_llm_new_token(chunk.chunk.text, chunk=generation)
            yield generation


def _copy(reply: str | AIMessage, message_id: str) -> AIMessage:
    """A fresh reply message (text, or a scripted message's text and tool calls)."""
    if isinstance(reply, str):
        return AIMessage(content=reply, id=message_id)
    return AIMessage(content=reply.content, tool_calls=list(reply.tool_calls), id=message_id)


def _finish(chunks: list[_Chunk], reply: AIMessage) -> None:
    """Mark the last chunk as such, with the finish reason and the usage."""
    last = chunks[-1].chunk
    last.chunk_position = "last"
    last.response_metadata = {"model_name": "simulated-service", "finish_reason": "stop"}
    last.usage_metadata = reply.usage_metadata
