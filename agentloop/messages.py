"""Reading LangChain messages: their text, and which request a run answers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    BaseMessageChunk,
    HumanMessage,
)

from agentloop.errors import InputError

__all__ = [
    "NOT_HUMAN_TYPES",
    "conversation_turns",
    "last_human",
    "message_text",
    "resolve_request",
]

NOT_HUMAN_TYPES = frozenset(
    {"ai", "tool", "system", "remove", "AIMessageChunk", "ToolMessageChunk", "SystemMessageChunk"}
)
"""Message `type`s no `HumanMessage` has: a backward scan for the turn's human message
passes them without an `isinstance` check (a run's transcript is mostly these)."""


def message_text(message: BaseMessageChunk | BaseMessage) -> str:
    """Return the text of a message or chunk (string content or text blocks)."""
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(
        block.get("text", "") if isinstance(block, dict) else str(block)
        for block in content
        if not isinstance(block, dict) or block.get("type") in ("text", "text_delta", None)
    )


def last_human(messages: Sequence[AnyMessage]) -> HumanMessage | None:
    """Return the newest human message, or None."""
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            return message
    return None


def resolve_request(state: Mapping[str, Any]) -> tuple[str, HumanMessage | None]:
    """Decide what a run answers: `user_input`, or the newest human message.

    A human message that the previous run did not answer wins over a `user_input` left
    in a checkpointed thread by that run; a freshly given `user_input` wins otherwise.

    Returns:
        The request text, and the human message it came from (None for `user_input`).

    Raises:
        InputError: There is no request: no `user_input` and no human message in
            `messages`, or only blank text. (A field that is not text is refused when
            it is written: see `agentloop.state.reduce_user_input`.)
    """
    user_input = (state.get("user_input") or "").strip()
    human = last_human(state.get("messages") or [])
    book = state.get("run_book") or {}  # the run's bookkeeping (`agentloop.state.RunBook`)
    fresh_message = human is not None and (human.id or "") != book.get("answered_message_id", "")
    stale_input = not user_input or user_input == book.get("answered_input")
    if human is not None and (not user_input or (fresh_message and stale_input)):
        request, source = message_text(human).strip(), human
    else:
        request, source = user_input, None
    if not request:
        msg = (
            "there is nothing to answer: give `user_input` (a non-empty string) or a "
            "human message with text in `messages`"
        )
        raise InputError(msg)
    return request, source


def conversation_turns(
    messages: Sequence[AnyMessage], *, max_turns: int | None = None, max_chars: int | None = None
) -> list[dict[str, str]]:
    """The earlier turns of a conversation, for context: newest kept, oldest first.

    The messages before the newest human message (the request being answered), only
    the user's questions and the final answers (no tool calls, tool results or system
    messages). By default all of them, as `create_agent`'s model sees the whole
    conversation; `max_turns` (user messages) and `max_chars` (characters in all) trim
    the oldest away. The transcript's `AIMessage`s with `tool_calls` and its
    `ToolMessage`s are left out: a run's results reach its own prompts through its round
    records, and an earlier turn's through its answer, so no result is shown twice.

    Returns:
        `[{"role": "user" | "assistant", "text": ...}, ...]`, oldest first.
    """
    if max_turns == 0 or max_chars == 0:
        return []
    end = len(messages)
    while end > 0:
        last = messages[end - 1]
        if last.type not in NOT_HUMAN_TYPES and isinstance(last, HumanMessage):
            break
        end -= 1
    turns: list[dict[str, str]] = []
    users, room = 0, max_chars
    for message in reversed(messages[: max(end - 1, 0)]):
        if isinstance(message, HumanMessage):
            role = "user"
        elif isinstance(message, AIMessage) and not message.tool_calls:
            role = "assistant"
        else:
            continue
        text = message_text(message).strip()
        if not text:
            continue
        if users == max_turns:  # an older turn's answer goes with its question
            break
        if room is not None:
            if len(text) > room:
                if turns:
                    break
                text = "[...] " + text[len(text) - room :]
            room -= len(text)
        turns.append({"role": role, "text": text})
        users += role == "user"
        if room is not None and room <= 0:
            break
    turns.reverse()
    return turns
