"""`ScriptedChatModel` bound to a loop's tools replies to a JSON plan script with tool calls."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.tools import tool

from agentloop.planning.prompt import PLAN_TOOL
from agentloop.testing import ScriptedChatModel, plan_reply


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def lookup(query: str) -> str:
    """Look something up."""
    return query


PLAN = plan_reply(
    "execute",
    [
        {"purpose": "sum", "tool_name": "add", "tool_kwargs": {"a": 1, "b": 2}},
        {"tool_name": "lookup", "tool_kwargs": {"query": "$1"}},
    ],
)


def streamed(model: Any) -> list[AIMessageChunk]:
    return list(model.stream("plan"))


def test_an_execute_plan_streams_as_one_tool_call_per_command() -> None:
    model = ScriptedChatModel([PLAN], chunk_size=5)
    chunks = streamed(model.bind_tools([add, lookup]))
    assert all(chunk.content == "" for chunk in chunks)  # no text: nothing short-circuits
    assert all(chunk.tool_call_chunks for chunk in chunks)
    assert len(chunks) > 2  # the arguments arrive in pieces
    whole = chunks[0]
    for chunk in chunks[1:]:
        whole = whole + chunk
    assert [(call["name"], call["args"]) for call in whole.tool_calls] == [
        ("add", {"a": 1, "b": 2}),
        ("lookup", {"query": "$1"}),
    ]
    assert all(call["id"] for call in whole.tool_calls)
    assert chunks[-1].chunk_position == "last"


def test_a_response_plan_is_a_text_reply_without_tool_calls() -> None:
    model = ScriptedChatModel([plan_reply("response")], chunk_size=4)
    reply = model.bind_tools([add]).invoke("plan")
    assert isinstance(reply, AIMessage)
    assert reply.tool_calls == []
    assert reply.text and "next_action" not in reply.text


def test_a_callable_reply_is_converted_too() -> None:
    model = ScriptedChatModel(responder=lambda messages: str(PLAN))
    reply = model.bind_tools([add, lookup]).invoke("plan")
    assert [call["name"] for call in reply.tool_calls] == ["add", "lookup"]


def test_json_and_tool_mode_requests_keep_the_json_text() -> None:
    unbound = ScriptedChatModel([PLAN]).invoke("plan")
    assert json.loads(unbound.text)["next_action"] == "execute"
    plan_tool = ScriptedChatModel([PLAN]).bind_tools([PLAN_TOOL], tool_choice="PlanDecision")
    reply = plan_tool.invoke("plan")
    assert reply.tool_calls == [] and json.loads(reply.text)["execution_commands"]


def test_other_replies_are_left_as_they_are() -> None:
    own_call = AIMessage("", tool_calls=[{"name": "add", "args": {"a": 5, "b": 5}, "id": "c1"}])
    model = ScriptedChatModel(["just text", '{"not": "a plan"}', own_call])
    bound = model.bind_tools([add])
    assert bound.invoke("x").text == "just text"
    assert bound.invoke("x").text == '{"not": "a plan"}'
    assert [call["args"] for call in bound.invoke("x").tool_calls] == [{"a": 5, "b": 5}]


def test_a_command_a_tool_call_cannot_carry_is_a_clear_error() -> None:
    bad = plan_reply("execute", [{"tool_name": "add"}])
    bad_kwargs = json.loads(str(bad))
    bad_kwargs["execution_commands"][0]["tool_kwargs"] = ["a", "b"]
    model = ScriptedChatModel([json.dumps(bad_kwargs)])
    with pytest.raises(TypeError, match="command 1 of a scripted plan cannot be a tool call"):
        model.bind_tools([add]).invoke("plan")
