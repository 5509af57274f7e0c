"""Reading the planner's own tool calls as a plan, chunk by chunk, as providers stream them."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessageChunk
from langchain_core.messages.tool import tool_call_chunk

from agentloop.planning.native import NativePlanReader


def chunk(*calls: dict[str, Any], text: str = "", last: bool = False) -> AIMessageChunk:
    message = AIMessageChunk(content=text, tool_call_chunks=[tool_call_chunk(**c) for c in calls])
    if last:
        message.chunk_position = "last"
    return message


def test_a_call_is_complete_when_the_next_one_starts_or_the_reply_ends() -> None:
    reader = NativePlanReader()
    assert not reader.feed(chunk({"name": "lookup", "args": '{"que', "id": "a", "index": 0}))
    assert reader.parser.next_action == "execute"
    reader.feed(chunk({"args": 'ry": "x"}', "index": 0}))
    assert reader.parser.commands_completed == 0
    reader.feed(chunk({"name": "lookup", "args": '{"query": "y"}', "id": "b", "index": 1}))
    assert reader.parser.completed_commands() == [
        (0, {"tool_name": "lookup", "tool_kwargs": {"query": "x"}, "tool_call_id": "a"})
    ]
    reader.feed(chunk(last=True))
    assert reader.parser.finished and reader.parser.commands_completed == 2
    decision = reader.decision(short_circuited=False)
    assert [c["tool_kwargs"] for c in decision["execution_commands"]] == [
        {"query": "x"},
        {"query": "y"},
    ]
    # the model's own ids name the calls in the transcript
    assert [c.get("tool_call_id") for c in decision["execution_commands"]] == ["a", "b"]


def test_calls_without_an_index_are_told_apart_by_their_ids() -> None:
    reader = NativePlanReader()
    reader.feed(chunk({"name": "lookup", "args": '{"query": "x"}', "id": "a", "index": None}))
    reader.feed(chunk({"name": "add", "args": '{"a": 1,', "id": "b", "index": None}))
    reader.feed(chunk({"args": ' "b": 2}', "index": None}))  # continues the last call
    assert reader.parser.commands_completed == 1
    reader.feed(chunk(last=True))
    commands = reader.decision(short_circuited=False)["execution_commands"]
    assert [(c["tool_name"], c["tool_kwargs"]) for c in commands] == [
        ("lookup", {"query": "x"}),
        ("add", {"a": 1, "b": 2}),
    ]


def test_text_before_any_call_is_a_response_and_text_after_one_is_the_purpose() -> None:
    answering = NativePlanReader()
    assert answering.feed(chunk(text="Paris"))
    assert answering.decision(short_circuited=True)["next_action"] == "response"

    acting = NativePlanReader()
    acting.feed(chunk({"name": "lookup", "args": '{"query": "x"}', "id": "a", "index": 0}))
    assert not acting.feed(chunk(text="to find x", last=True))
    command = acting.decision(short_circuited=False)["execution_commands"][0]
    assert command["purpose"] == "to find x"


def test_damaged_arguments_are_repaired() -> None:
    reader = NativePlanReader()
    reader.feed(chunk({"name": "add", "args": "{'a': 1, 'b': 2,}", "id": "a", "index": 0}))
    reader.feed(chunk(last=True))
    command = reader.decision(short_circuited=False)["execution_commands"][0]
    assert command["tool_kwargs"] == {"a": 1, "b": 2}


def test_an_empty_reply_is_a_response() -> None:
    reader = NativePlanReader()
    assert not reader.feed(chunk(last=True))
    assert reader.decision(short_circuited=False) == {
        "next_action": "response",
        "execution_commands": [],
        "short_circuited": False,
    }
