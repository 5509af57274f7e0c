"""How a `ScriptedChatModel` reply streams, and the usage it reports.

A reply is cut into pieces of `chunk_size` characters: its text first, then each tool
call's JSON arguments, as a provider streams them (`tool_call_chunks` carrying the name
and id in their first piece). Usage, when the script gives none, is estimated at four
characters per token.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolCall
from langchain_core.messages.ai import UsageMetadata
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGenerationChunk

__all__ = ["estimate_usage", "reply_chunks", "reply_pieces"]


def reply_pieces(message: AIMessage, size: int) -> list[tuple[int | None, str]]:
    """Split a reply into `(tool call index or None for text, text)` pieces."""
    size = max(size, 1)
    pieces: list[tuple[int | None, str]] = []
    if isinstance(message.content, str):
        text = message.content
        pieces.extend((None, text[i : i + size]) for i in range(0, len(text), size))
    elif message.content:
        pieces.append((None, ""))  # content blocks travel whole, in the first chunk
    for index, call in enumerate(_streamed_calls(message)):
        args = call["args"]
        pieces.extend((index, args[i : i + size]) for i in range(0, len(args), size))
    return pieces or [(None, "")]


def _streamed_calls(message: AIMessage) -> list[dict[str, Any]]:
    """The reply's tool calls as a provider streams them (invalid ones last): name, id, text."""
    calls = [
        {"name": call["name"], "id": call["id"], "args": json.dumps(call["args"])}
        for call in message.tool_calls
    ]
    calls.extend(
        {"name": call["name"], "id": call["id"], "args": call["args"] or ""}
        for call in message.invalid_tool_calls
    )
    return calls


def reply_chunks(message: AIMessage, size: int) -> Iterator[ChatGenerationChunk]:
    """Yield the streamed chunks of a reply, one at a time."""
    pieces = reply_pieces(message, size)
    calls = _streamed_calls(message)
    text_content = isinstance(message.content, str)
    started: set[int] = set()
    for position, (index, text) in enumerate(pieces):
        last = position == len(pieces) - 1
        content: str | list[str | dict[str, Any]]
        call_chunks = []
        if index is None:
            content = text if text_content else list(message.content)
        else:
            content = "" if text_content else []
            call = calls[index]
            first = index not in started
            started.add(index)
            call_chunks.append(
                tool_call_chunk(
                    name=call["name"] if first else None,
                    args=text,
                    id=call["id"] if first else None,
                    index=index,
                )
            )
        chunk = AIMessageChunk(
            content=content,
            id=message.id,
            tool_call_chunks=call_chunks,
            additional_kwargs=dict(message.additional_kwargs) if position == 0 else {},
        )
        if last:
            chunk.chunk_position = "last"
            chunk.response_metadata = dict(message.response_metadata)
            chunk.usage_metadata = message.usage_metadata
        yield ChatGenerationChunk(message=chunk)


def _tokens(characters: int) -> int:
    """Tokens of a text of this many characters, estimated (four characters a token)."""
    return -(-characters // 4)


def estimate_usage(
    messages: Sequence[BaseMessage], text: str, tool_calls: Sequence[ToolCall]
) -> UsageMetadata:
    """The usage of a reply to `messages`, estimated from their lengths."""
    prompt_chars = sum(len(message.text) for message in messages)
    reply_chars = len(text) + sum(
        len(call["name"]) + len(json.dumps(call["args"])) for call in tool_calls
    )
    input_tokens, output_tokens = _tokens(prompt_chars), _tokens(reply_chars)
    return UsageMetadata(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=input_tokens + output_tokens,
    )
