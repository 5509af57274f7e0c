"""Reading LangChain messages: their text, and which request a run answers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AnyMessage, BaseMessage, BaseMessageChunk, HumanMessage

__all__ = ["last_human", "message_text", "resolve_request"]


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
    """
    user_input = (state.get("user_input") or "").strip()
    human = last_human(state.get("messages") or [])
    fresh_message = human is not None and (human.id or "") != state.get("answered_message_id", "")
    stale_input = not user_input or user_input == state.get("answered_input")
    if human is not None and (not user_input or (fresh_message and stale_input)):
        return message_text(human).strip(), human
    return user_input, None
