"""A scripted chat model for tests: replays replies and streams them in chunks.

`ScriptedChatModel` stands in for a real chat model in unit tests. Each model
request consumes the next reply of its script; replies stream as text chunks and
as tool-call chunks, so `with_structured_output` and LangGraph's message
streaming behave as they do with a real provider.

Example:
    ```python
    model = ScriptedChatModel(["Hello!", plan_reply("respond")])
    model.invoke("hi").content  # "Hello!"
    ```

May import: `agentloop.planning` and the parts below it; the library never imports it.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any, TypeAlias, cast

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, InvalidToolCall, ToolCall
from langchain_core.messages.tool import invalid_tool_call
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import PrivateAttr

from agentloop.testing._native import as_native_reply
from agentloop.testing._stream import estimate_usage, reply_chunks, reply_pieces

__all__ = [
    "ScriptExhaustedError",
    "ScriptedChatModel",
    "plan_reply",
    "planning_round",
    "tool_call_turns",
]

Reply: TypeAlias = (
    str | AIMessage | BaseException | Callable[[list[BaseMessage]], "str | AIMessage"]
)
"""One scripted reply: text, a message, an error to raise, or a function of the request."""

_MODEL_NAME = "scripted"


def _call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


class ScriptExhaustedError(IndexError):
    """A `ScriptedChatModel` was asked for more replies than it was given."""


class _Lock:
    """A lock that deep-copies as a new lock, so the model stays deep-copyable."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def __enter__(self) -> None:
        self._lock.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self._lock.release()

    def __deepcopy__(self, memo: dict[int, Any]) -> _Lock:
        return _Lock()


class ScriptedChatModel(BaseChatModel):
    """Replays scripted replies and streams them in chunks.

    Each model request takes the next entry of `replies` when it starts (when
    `invoke` runs, or when the first chunk of a stream is pulled). The position in
    the script is taken under a lock, so concurrent requests never share a reply.

    An entry may be:

    - a `str`: the reply text;
    - an `AIMessage`: its content, `tool_calls`, `response_metadata` (for example
      `{"finish_reason": "length"}`) and `usage_metadata` are replayed;
    - a `BaseException`: raised when that request starts;
    - a callable: called with the request's messages, returns a `str` or `AIMessage`.

    Streaming splits text into `chunk_size`-character chunks and each tool call's
    JSON arguments into `chunk_size`-character `tool_call_chunks`. All chunks of a
    reply share one message id, and the last one carries `chunk_position="last"`,
    the `response_metadata` and the `usage_metadata`.

    A non-streamed request (`invoke`) sleeps as long as the stream of the same reply
    would, so timing does not depend on whether the caller streams.

    One script serves every plan mode: bound to the loop's tools by a planner of
    `plan_mode="native"`, a reply that is a JSON plan (`plan_reply`) comes back as that
    planner's reply: an `execute` plan as one tool call per command (name `tool_name`,
    arguments `tool_kwargs`; purposes are dropped), streamed as tool-call chunks, and
    any other plan as a short text reply without tool calls.

    Example:
        ```python
        model = ScriptedChatModel(["first", TimeoutError("slow"), "third"])
        ```
    """

    replies: list[Any]
    """The script: one entry per model request, consumed in order."""

    responder: Callable[[list[BaseMessage]], str | AIMessage] | None = None
    """Computes a reply from the request's messages once the script is used up."""

    chunk_size: int = 8
    """Characters of text, or of tool-call arguments JSON, per streamed chunk."""

    chunk_delay_s: float = 0.0
    """Seconds to sleep before each streamed chunk."""

    repeat_last: bool = False
    """Repeat the last reply once the script is used up and there is no responder."""

    usage: bool = True
    """Attach `usage_metadata` (about four characters per token) to each reply."""

    keep_requests: bool = True
    """Keep every request's messages for `requests` (turn off for long or busy runs)."""

    _lock: _Lock = PrivateAttr(default_factory=_Lock)
    _requests: list[list[BaseMessage]] = PrivateAttr(default_factory=list)
    _request_count: int = PrivateAttr(default=0)
    _chunks_emitted: int = PrivateAttr(default=0)
    _bound_tools: list[dict[str, Any]] = PrivateAttr(default_factory=list)
    _options: list[dict[str, Any]] = PrivateAttr(default_factory=list)

    def __init__(self, replies: Sequence[Reply] = (), **kwargs: Any) -> None:
        kwargs["replies"] = list(replies)
        super().__init__(**kwargs)

    @property
    def _llm_type(self) -> str:
        return _MODEL_NAME

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": _MODEL_NAME}

    @property
    def requests(self) -> list[list[BaseMessage]]:
        """The messages of every request so far, in the order the requests started."""
        with self._lock:
            return [list(messages) for messages in self._requests]

    @property
    def replies_in_order(self) -> bool:
        """True when the model has a script: each request takes the next reply, in order.

        So a loop's `speculative_answer="auto"` requests no answer from it ahead of time
        (an extra request would take a reply meant for a later one); a model that only
        has a `responder` answers each request from its messages, as a real model does.
        """
        return bool(self.replies)

    @property
    def request_count(self) -> int:
        """How many requests started (kept or not)."""
        with self._lock:
            return self._request_count

    @property
    def chunks_emitted(self) -> int:
        """How many chunks consumers have pulled from streams so far."""
        with self._lock:
            return self._chunks_emitted

    @property
    def request_options(self) -> list[dict[str, Any]]:
        """The options of every request beside its messages, as a provider receives them.

        For example `tools`, `tool_choice` or `response_format`.
        """
        with self._lock:
            return [dict(options) for options in self._options]

    @property
    def bound_tools(self) -> list[dict[str, Any]]:
        """The tools of the last `bind_tools` call, as OpenAI-format tool dicts."""
        with self._lock:
            return list(self._bound_tools)

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind tools to the model; the script still decides which tool calls come back.

        Args:
            tools: Tools, functions, Pydantic or TypedDict classes, or tool schemas.
            tool_choice: Recorded in the binding, as a provider would receive it.
            **kwargs: Further arguments to bind.

        Returns:
            The model with `tools` (and `tool_choice`, if given) bound.
        """
        formatted = [convert_to_openai_tool(cast("Any", tool)) for tool in tools]
        with self._lock:
            self._bound_tools = formatted
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        return self.bind(tools=formatted, **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        message, delay = self._whole_reply(messages, kwargs)
        time.sleep(delay)
        return ChatResult(generations=[ChatGeneration(message=message)])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        message, delay = self._whole_reply(messages, kwargs)
        await asyncio.sleep(delay)
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        for chunk in self._chunks(messages, kwargs):
            time.sleep(self.chunk_delay_s)
            yield chunk

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        for chunk in self._chunks(messages, kwargs):
            await asyncio.sleep(self.chunk_delay_s)  # even 0 s lets concurrent streams interleave
            yield chunk

    def _whole_reply(self, messages: list[BaseMessage], kwargs: Any) -> tuple[AIMessage, float]:
        """The next reply, and how long streaming it would have taken."""
        message = self._next_reply(messages, kwargs)
        return message, self.chunk_delay_s * len(reply_pieces(message, self.chunk_size))

    def _chunks(self, messages: list[BaseMessage], kwargs: Any) -> Iterator[ChatGenerationChunk]:
        """The next reply's chunks, each counted as it is emitted (LangChain reports tokens)."""
        for chunk in reply_chunks(self._next_reply(messages, kwargs), self.chunk_size):
            self._count_chunk()
            yield chunk

    def _count_chunk(self) -> None:
        with self._lock:
            self._chunks_emitted += 1

    def _next_reply(
        self, messages: list[BaseMessage], options: Mapping[str, Any] | None = None
    ) -> AIMessage:
        """Record the request, take its reply from the script and complete it."""
        with self._lock:
            number = self._request_count
            self._request_count += 1
            if self.keep_requests:
                self._requests.append(list(messages))
                self._options.append(dict(options or {}))
            entry: Any
            if number < len(self.replies):
                entry = self.replies[number]
            elif self.responder is not None:
                entry = self.responder
            elif self.repeat_last and self.replies:
                entry = self.replies[-1]
            else:
                msg = (
                    f"ScriptedChatModel has no reply left for request #{number + 1}; "
                    f"it was given {len(self.replies)} replies"
                )
                raise ScriptExhaustedError(msg)
        if isinstance(entry, BaseException):
            raise entry
        if callable(entry):
            entry = entry(list(messages))
        return self._complete(as_native_reply(entry, options or {}), messages)

    def _complete(self, reply: Any, messages: list[BaseMessage]) -> AIMessage:
        """Turn a scripted reply into a fresh message with ids, metadata and usage."""
        if isinstance(reply, str):
            reply = AIMessage(content=reply)
        if not isinstance(reply, AIMessage):
            msg = (
                "A ScriptedChatModel reply must be a str or an AIMessage, "
                f"got {type(reply).__name__}"
            )
            raise TypeError(msg)
        tool_calls: list[ToolCall] = []
        invalid: list[InvalidToolCall] = []
        for call in reply.tool_calls:
            name, args, call_id = call["name"], call["args"], call["id"] or _call_id()
            if isinstance(args, dict):
                tool_calls.append(
                    ToolCall(name=name, args=dict(args), id=call_id, type="tool_call")
                )
            else:  # not an object (None, a list): invalid, as a provider reports it; streamed as is
                error = "the arguments are not a JSON object"
                invalid.append(
                    invalid_tool_call(name=name, args=json.dumps(args), id=call_id, error=error)
                )
        response_metadata = {
            "model_name": _MODEL_NAME,
            **reply.response_metadata,
            "finish_reason": reply.response_metadata.get("finish_reason", "stop"),
        }
        usage_metadata = reply.usage_metadata
        if usage_metadata is None and self.usage:
            usage_metadata = estimate_usage(messages, reply.text, tool_calls)
        return AIMessage(
            content=reply.content,
            additional_kwargs=dict(reply.additional_kwargs),
            tool_calls=tool_calls,
            invalid_tool_calls=[*reply.invalid_tool_calls, *invalid],
            response_metadata=response_metadata,
            usage_metadata=usage_metadata,
            id=reply.id or f"scripted-{uuid.uuid4().hex}",
            name=reply.name,
        )


def plan_reply(
    next_action: str,
    commands: Sequence[Mapping[str, Any]] = (),
    *,
    as_tool_call: bool = False,
    tool_name: str = "PlanDecision",
) -> str | AIMessage:
    """Build a planner reply for a `ScriptedChatModel` script.

    Args:
        next_action: The planner's decision, the first key of the reply.
        commands: Execution commands with `tool_name` and optionally `purpose`,
            `tool_kwargs` and `todo_suggestion` (defaults `""`, `{}`, `""`).
        as_tool_call: Return an `AIMessage` with one tool call instead of JSON text.
        tool_name: The tool call's name, that of the structured-output schema.

    Returns:
        The JSON text `{"next_action": ..., "execution_commands": [...]}`, or an
        `AIMessage` calling `tool_name` with those arguments.
    """
    args: dict[str, Any] = {
        "next_action": next_action,
        "execution_commands": [
            {
                "purpose": command.get("purpose", ""),
                "tool_name": command["tool_name"],
                "tool_kwargs": dict(command.get("tool_kwargs") or {}),
                "todo_suggestion": command.get("todo_suggestion", ""),
            }
            for command in commands
        ],
    }
    if not as_tool_call:
        return json.dumps(args)
    call = ToolCall(name=tool_name, args=args, id=_call_id())
    return AIMessage(content="", tool_calls=[call])


def tool_call_turns(
    rounds: Sequence[Sequence[tuple[str, Mapping[str, Any]]]], *, prefix: str = "call"
) -> list[AIMessage]:
    """Build a tool-calling model's turns: one `AIMessage` of tool calls per round.

    The same decisions as a loop's plans, scripted for `create_agent` (or any agent whose
    model calls tools), to run one app both ways on one script.

    Args:
        rounds: Per round, the calls as `(tool name, arguments)`.
        prefix: The start of every call id: `f"{prefix}_{round}_{position}"`.

    Returns:
        The turns, in order (add the final answer after them).
    """
    return [
        AIMessage(
            content="",
            tool_calls=[
                ToolCall(name=name, args=dict(args), id=f"{prefix}_{turn}_{position}")
                for position, (name, args) in enumerate(calls)
            ],
        )
        for turn, calls in enumerate(rounds)
    ]


_ROUND = re.compile(r"round_index: (\d+)")


def planning_round(messages: Sequence[BaseMessage]) -> int:
    """The round a planner request asks for (0: the run's first), for a scripted responder.

    A JSON or tool planner's request says it (`round_index: N`, in its last message); a
    native planner's is the transcript, whose rounds since the request are counted (each
    an `AIMessage` with tool calls).

    Example:
        ```python
        def planner(messages):
            return plan_reply("execute", [search]) if planning_round(messages) == 0 else "done"
        ```
    """
    if messages:
        last = messages[-1]
        if isinstance(last.content, str) and (found := _ROUND.search(last.content)):
            return int(found.group(1))
    rounds = 0
    for message in reversed(messages):
        if isinstance(message, AIMessage) and message.tool_calls:
            rounds += 1
        elif message.type == "human":
            break
    return rounds
