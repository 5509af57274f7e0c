"""Malformed tool calls in a plan get a failed record each; none is dropped or ends the run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from agentloop import ModelOptions, create_tool_loop
from agentloop.testing import ScriptedChatModel, plan_reply


@tool
def get_weather(city: str) -> str:
    """Today's weather in a city."""
    return f"sunny in {city}"


def _loop(first_reply: Any, **options: Any) -> Any:
    planner = ScriptedChatModel([first_reply, plan_reply("response")])
    answerer = ScriptedChatModel(["done"], repeat_last=True)
    return create_tool_loop(
        planner, [get_weather], models=ModelOptions(answer_model=answerer), **options
    )


async def test_a_call_with_a_blank_name_beside_a_good_one_gets_its_own_record(
    run_loop: Any, planning_for: Callable[..., dict[str, Any]]
) -> None:
    commands = [
        {"tool_name": "  ", "tool_kwargs": {"city": "Oslo"}},
        {"tool_name": "get_weather", "tool_kwargs": {"city": "Rome"}},
    ]
    out = await run_loop(
        _loop(plan_reply("execute", commands), **planning_for()), {"user_input": "w"}
    )
    nameless, weather = out["round_state"]["done_plans"]
    assert not nameless["success"] and nameless["error_type"] == "tool_not_found"
    assert "no tool name" in nameless["error"]
    assert weather["success"] and out["status"] == "ok"


def _native_reply(*calls: dict[str, Any]) -> AIMessage:
    """A reply as a hostile provider or middleware may build it, bypassing validation."""
    return AIMessage.model_construct(
        content="",
        tool_calls=[{**call, "type": "tool_call"} for call in calls],
        invalid_tool_calls=[],
        response_metadata={},
        additional_kwargs={},
        id="hostile",
        type="ai",
    )


async def test_native_calls_with_none_arguments_or_no_name_are_records_not_failures(
    run_loop: Any,
) -> None:
    reply = _native_reply(
        {"name": "get_weather", "args": None, "id": "c1"},
        {"name": "", "args": {"city": "Oslo"}, "id": "c2"},
        {"name": "get_weather", "args": {"city": "Rome"}, "id": "c3"},
    )
    out = await run_loop(_loop(reply, plan_mode="native"), {"user_input": "w"})
    records = out["round_state"]["done_plans"]
    assert out["status"] == "ok"
    by_type = sorted((r["tool_name"], r["success"], r["error_type"]) for r in records)
    assert by_type == [
        ("", False, "tool_not_found"),
        ("get_weather", False, "invalid_arguments"),
        ("get_weather", True, ""),
    ]
