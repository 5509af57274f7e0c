"""Reading LangChain messages: their text, and which request a run answers."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    AnyMessage,
    BaseMessage,
    BaseMessageChunk,
    HumanMessage,
)

from agentloop.errors import InputError

__all__ = [
    "NOT_HUMAN_TYPES",
    "as_stream_chunk",
    "last_human",
    "message_text",
    "request_message",
    "resolve_request",
    "with_request",
]

NOT_HUMAN_TYPES = frozenset(
    {"ai", "tool", "system", "remove", "AIMessageChunk", "ToolMessageChunk", "SystemMessageChunk"}
)
"""Message `type`s no `HumanMessage` has: a backward scan for the turn's human message
passes them without an `isinstance` check (a run's transcript is mostly these)."""


def as_stream_chunk(item: Any) -> Any:
    """A model's stream item as a chunk: a whole `AIMessage` becomes its last chunk.

    A chat model that does not stream (no `_stream` / `_astream`) yields its one reply
    whole from `stream` / `astream`; as a chunk, its tool calls are tool-call chunks as a
    streaming model's are, so every reader of a stream reads both kinds alike.
    """
    if isinstance(item, AIMessage) and not isinstance(item, AIMessageChunk):
        return AIMessageChunk(**item.model_dump(exclude={"type"}), chunk_position="last")
    return item


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


def request_message(state: Mapping[str, Any], request: str) -> HumanMessage:
    """The run's request as its message, when it came as `user_input`.

    So every middleware, and every model, reads the request in `messages`, as under
    `create_agent`. Its id is made of the thread's run before it (or, on a thread kept
    by a version that named no run, its number of human messages) and the request: the
    same whichever node writes it first (a `before_agent` hook's node, or `prepare`),
    and a new one for each new run.
    """
    before = (state.get("run_book") or {}).get("run_id")
    if not before:  # a thread kept by a version that named no run: its turns count
        messages = state.get("messages") or ()
        before = str(sum(isinstance(message, HumanMessage) for message in messages))
    text = f"{before}\x1f{request}".encode("utf-8", "surrogatepass")
    return HumanMessage(request, id=f"request-{hashlib.sha256(text).hexdigest()[:16]}")


def with_request(
    state: Mapping[str, Any], request: str, human: HumanMessage | None
) -> tuple[HumanMessage, list[AnyMessage]]:
    """The message of the run's request, and what adds it to `messages` (nothing if there).

    Args:
        state: The run's state.
        request: The request (`resolve_request`).
        human: The human message it came from (None: it came as `user_input`).
    """
    if human is not None:
        return human, []
    message = request_message(state, request)
    for kept in reversed(state.get("messages") or ()):
        if kept.id == message.id:  # written already (and maybe edited by a hook since)
            assert isinstance(kept, HumanMessage)
            return kept, []
    return message, [message]
