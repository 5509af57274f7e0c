"""Reading a plan from the planner's own tool calls (`plan_mode="native"`).

The planner model is bound to the loop's tools; each tool call of its reply is one
execution command (name -> `tool_name`, arguments -> `tool_kwargs`, the reply's text,
if any, -> `purpose`) and a reply without tool calls is `next_action="response"`.

`NativeCallParser` offers the command stream interface of `PlanStreamParser` that
streaming dispatch consumes (`next_action`, `finished`, `commands_completed`,
`completed_commands`): a tool call is complete when the next one starts or the stream
ends, and a complete call never changes: its `purpose` is the reply's text as it stood
then, so a call started early and the final plan agree. `NativePlanReader` feeds it chunk
by chunk and short-circuits on the first content token that comes before any tool-call
chunk: the reply is a `response`. When the planner's text reply will be the run's answer
(`adopts_planner_reply`), it reads the whole reply instead and the decision carries its
text as `reply`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessageChunk

from agentloop.base.messages import message_text
from agentloop.models.calls import needs_another_try
from agentloop.planning.normalize import normalize_plan_decision
from agentloop.planning.stream import (
    PlanMode,
    PlanParseError,
    PlanStreamParser,
    extract_json_object,
)
from agentloop.state import PlanDecision

__all__ = ["NativeCallParser", "NativePlanReader", "adopts_planner_reply", "decode_arguments"]


def adopts_planner_reply(
    plan_mode: PlanMode,
    planner: BaseChatModel,
    answerer: BaseChatModel,
    *,
    tools_ran: bool,
    results_omitted: bool = False,
) -> bool:
    """Whether a planner reply without tool calls would be the run's answer.

    In `plan_mode="native"` the planner's text reply is the answer, without a second
    model call, when no tool ran in the run, or when the answer model is the planner
    model and the planner's prompt showed every result in full (older results left out
    to keep plan prompts short, `keep_tool_results`, are for the answer model to read).
    The answer node still checks that the reply is usable: not empty, not cut.

    Args:
        plan_mode: The run's plan mode.
        planner: The run's planner model.
        answerer: The run's answer model.
        tools_ran: Whether the run has tool results.
        results_omitted: Whether the planner's prompt left out results
            (`agentloop.planning.prompt.omits_results`).
    """
    if plan_mode != "native":
        return False
    return not tools_ran or (answerer is planner and not results_omitted)


def decode_arguments(text: str) -> Any:
    """Decode a tool call's argument text, repairing common JSON damage ({} when empty).

    Returns:
        The decoded value, or the text itself when nothing decodes (the call is then
        refused by validation, with the reason, like any call with bad arguments).
    """
    if not text.strip():
        return {}
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        pass
    try:
        return extract_json_object(text)
    except PlanParseError:
        return text


@dataclass
class _CallBuffer:
    """One streamed tool call: its name, id and argument text so far."""

    name: str = ""
    call_id: str = ""
    parts: list[str] = field(default_factory=list)
    purpose: str | None = None
    """The reply's text when the call completed (None while it streams)."""
    decoded: Any = None
    """The decoded arguments, once the call is complete (decoded once)."""

    @property
    def arguments(self) -> str:
        return "".join(self.parts)

    def kwargs(self) -> Any:
        """The decoded arguments (kept once the call is complete: they no longer change)."""
        if self.decoded is not None:
            return self.decoded
        decoded = decode_arguments(self.arguments)
        if self.purpose is not None:
            self.decoded = decoded
        return decoded


class NativeCallParser:
    """The planner's tool calls as they stream, read as the commands of a plan."""

    def __init__(self) -> None:
        self._calls: dict[Any, _CallBuffer] = {}
        self._open: list[_CallBuffer] = []
        """The calls not complete yet (their purpose is not fixed)."""
        self._last: Any = None
        self._text: list[str] = []
        self.metadata: dict[str, Any] = {}
        """The reply's `response_metadata` (why it stopped)."""
        self.message_id = ""
        """The reply's message id ("" until a chunk gives one)."""
        self.ended = False
        """Whether the stream's last chunk arrived."""

    def feed(self, chunk: BaseMessageChunk) -> None:
        """Consume one chunk: its tool-call chunks and its text."""
        for call_chunk in getattr(chunk, "tool_call_chunks", None) or []:
            self._feed_call(call_chunk)
        text = message_text(chunk)
        if text:
            self._text.append(text)
        self.metadata.update(getattr(chunk, "response_metadata", None) or {})
        if not self.message_id and getattr(chunk, "id", None):
            self.message_id = str(chunk.id)
        if getattr(chunk, "chunk_position", None) == "last":
            self.ended = True
            self._complete_open()

    def _complete_open(self) -> None:
        """Fix the purpose of the calls still open: the reply's text so far."""
        purpose = self.text.strip() if self._open else ""
        for buffer in self._open:
            buffer.purpose = purpose
        self._open.clear()

    def _feed_call(self, call_chunk: Any) -> None:
        index, call_id = call_chunk.get("index"), call_chunk.get("id") or ""
        if index is not None:
            key: Any = index
        elif call_id and ("id", call_id) not in self._calls:
            key = ("id", call_id)  # no index: a new id starts a new call
        else:
            key = self._last if self._last is not None else 0
        buffer = self._calls.get(key)
        if buffer is None:
            self._complete_open()  # a new call completes those before it
            buffer = self._calls[key] = _CallBuffer()
            self._open.append(buffer)
        self._last = key
        if call_chunk.get("name"):
            buffer.name += str(call_chunk["name"])
        if call_id and not buffer.call_id:
            buffer.call_id = call_id
        if call_chunk.get("args"):
            buffer.parts.append(str(call_chunk["args"]))

    @property
    def has_calls(self) -> bool:
        """Whether a tool-call chunk has arrived."""
        return bool(self._calls)

    @property
    def next_action(self) -> str | None:
        """`execute` once a tool call started, `response` once text came first, else None."""
        if self._calls:
            return "execute"
        return "response" if self.text else None

    @property
    def wants_response(self) -> bool:
        """Whether the reply is a `response` (text before any tool call)."""
        return self.next_action == "response"

    @property
    def finished(self) -> bool:
        """Whether the reply ended."""
        return self.ended

    @property
    def commands_completed(self) -> int:
        """How many tool calls are complete: all but the last one until the reply ends."""
        count = len(self._calls)
        return count if self.ended else max(count - 1, 0)

    def completed_commands(self, start: int = 0) -> list[tuple[int, Any]]:
        """The complete tool calls from `start`, as (position, raw command) pairs."""
        buffers = list(self._calls.values())[: self.commands_completed]
        return [
            (position, self._command(buffer))
            for position, buffer in enumerate(buffers)
            if position >= start
        ]

    def commands(self) -> list[dict[str, Any]]:
        """Every tool call so far as a raw command."""
        return [self._command(buffer) for buffer in self._calls.values()]

    def call_ids(self) -> list[str]:
        """The ids of the tool calls so far ("" where the model gave none)."""
        return [buffer.call_id for buffer in self._calls.values()]

    def _command(self, buffer: _CallBuffer) -> dict[str, Any]:
        command: dict[str, Any] = {
            "tool_name": buffer.name,
            "tool_kwargs": buffer.kwargs(),
        }
        purpose = self.text.strip() if buffer.purpose is None else buffer.purpose
        if purpose:
            command["purpose"] = purpose
        if buffer.call_id:
            command["tool_call_id"] = buffer.call_id
        return command

    @property
    def text(self) -> str:
        """The reply's text so far."""
        if len(self._text) > 1:
            self._text = ["".join(self._text)]
        return self._text[0] if self._text else ""

    def transcript(self) -> str:
        """The reply as text, to quote it back to the planner: its text and its calls."""
        calls = [
            {"name": buffer.name, "arguments": buffer.arguments} for buffer in self._calls.values()
        ]
        parts = [self.text.strip()] if self.text.strip() else []
        if calls:
            parts.append(json.dumps(calls, ensure_ascii=False))
        return "\n".join(parts)


@dataclass
class NativePlanReader:
    """Feeds a streamed planner reply of `plan_mode="native"`, one chunk at a time."""

    parser: NativeCallParser = field(default_factory=NativeCallParser)
    text_parser: PlanStreamParser = field(default_factory=PlanStreamParser)
    """Unused in native mode (there is no JSON text to read); kept empty."""
    chunks: int = 0
    whole: bool = False
    """Read the whole reply, without the short-circuit: its text may be the answer."""

    def feed(self, chunk: BaseMessageChunk) -> bool:
        """Consume one chunk; return True once text came before any tool call.

        Reading the whole reply, never True: the reply ends by itself.
        """
        self.chunks += 1
        self.parser.feed(chunk)
        return not self.whole and self.parser.wants_response

    def reply(self) -> str:
        """The text of a whole reply without tool calls, when it can be an answer, else "".

        Not when it is empty, or stopped at the model's length limit, or loops.
        """
        parser = self.parser
        text = parser.text
        if parser.has_calls or not text.strip():
            return ""
        if needs_another_try(AIMessage(text, response_metadata=parser.metadata)):
            return ""
        return text

    def decision(self, *, short_circuited: bool) -> PlanDecision:
        """Return the normalized decision of what was read."""
        if short_circuited or not self.parser.has_calls:
            decision: PlanDecision = {
                "next_action": "response",
                "execution_commands": [],
                "short_circuited": short_circuited,
            }
            reply = "" if short_circuited else self.reply()
            if reply:
                decision["reply"] = reply
                if self.parser.message_id:
                    decision["reply_id"] = self.parser.message_id
            return decision
        decision = normalize_plan_decision(
            {"next_action": "execute", "execution_commands": self.parser.commands()}
        )
        decision["short_circuited"] = False
        return decision

    def cut_decision(self) -> PlanDecision | None:
        """The decision of a reply cut by a limit: a text reply is a `response` (not the answer).

        Returns:
            None when the reply has tool calls (a cut plan cannot be used).
        """
        if self.parser.has_calls or not self.parser.text.strip():
            return None
        return {"next_action": "response", "execution_commands": [], "short_circuited": False}
