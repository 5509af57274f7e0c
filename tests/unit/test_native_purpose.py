"""A native planner's text as the purpose of its tool calls: fixed once a call is complete."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessageChunk
from langchain_core.messages.tool import tool_call_chunk

from agentloop.planning.native import NativePlanReader


def chunk(*calls: dict[str, Any], text: str = "", last: bool = False) -> AIMessageChunk:
    message = AIMessageChunk(content=text, tool_call_chunks=[tool_call_chunk(**c) for c in calls])
    if last:
        message.chunk_position = "last"
    return message


def call(index: int, query: str) -> dict[str, Any]:
    return {"name": "lookup", "args": f'{{"query": "{query}"}}', "id": f"c{index}", "index": index}


@pytest.mark.parametrize("indexed", [True, False])
def test_a_complete_call_keeps_its_purpose_when_text_follows(indexed: bool) -> None:
    reader = NativePlanReader()
    first, second = call(0, "a"), call(1, "b")
    if not indexed:  # told apart by their ids
        first["index"] = second["index"] = None
    reader.feed(chunk(first))
    reader.feed(chunk(second))
    # what streaming dispatch starts now: the first call, complete once the second began
    [(_, started)] = reader.parser.completed_commands()
    reader.feed(chunk(text="Looking both up.", last=True))
    commands = reader.decision(short_circuited=False)["execution_commands"]
    assert "purpose" not in started  # no text yet: the default purpose, as in the plan
    assert commands[0]["purpose"] == "Use lookup"
    assert commands[1]["purpose"] == "Looking both up."  # still streaming when it came
    assert reader.parser.completed_commands()[0] == (0, started)


def test_text_in_the_chunk_of_the_first_call_is_the_purpose_of_every_call() -> None:
    reader = NativePlanReader()
    assert not reader.feed(chunk(call(0, "a"), text="Looking both up."))
    reader.feed(chunk(call(1, "b"), last=True))
    commands = reader.decision(short_circuited=False)["execution_commands"]
    assert [c["purpose"] for c in commands] == ["Looking both up.", "Looking both up."]
