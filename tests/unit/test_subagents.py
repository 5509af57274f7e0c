"""A loop offered to another loop as a tool."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.tools import tool

from agentloop import ConfigurationError, ModelOptions, as_tool, create_tool_loop
from agentloop.testing import ScriptedChatModel, plan_reply, planning_round


def cmd(tool_name: str, purpose: str = "", **kwargs: Any) -> dict[str, Any]:
    return {"purpose": purpose, "tool_name": tool_name, "tool_kwargs": kwargs}


@tool
def search_notes(query: str) -> str:
    """Search notes."""
    return f"note about {query}"


def child_loop() -> Any:
    planner = ScriptedChatModel(
        responder=lambda messages: str(
            plan_reply("execute", [cmd("search_notes", query="tides")])
            if planning_round(messages) == 0
            else plan_reply("response")
        )
    )
    answerer = ScriptedChatModel(responder=lambda messages: "child says: tides are high at 6")
    return create_tool_loop(
        planner, [search_notes], models=ModelOptions(answer_model=answerer), name="researcher"
    )


async def test_parent_calls_a_sub_agent() -> None:
    researcher = as_tool(child_loop(), name="ask_researcher", description="Researches a topic.")
    parent_planner = ScriptedChatModel(
        [
            plan_reply(
                "execute",
                [
                    cmd("search_notes", "own search", query="tides"),
                    cmd("ask_researcher", "delegate", user_input="When are the tides high?"),
                ],
            ),
            plan_reply("response"),
        ]
    )
    parent = create_tool_loop(
        parent_planner,
        [search_notes, researcher],
        models=ModelOptions(answer_model=ScriptedChatModel(["parent answer"])),
        name="boss",
    )
    events: list[dict[str, Any]] = []
    final: Any = None
    async for mode, chunk in parent.astream(
        {"user_input": "tides?"}, stream_mode=["custom", "values"]
    ):
        if mode == "custom":
            events.append(chunk)
        else:
            final = chunk
    own, delegated = final["tool_logs"]
    assert own["success"] and delegated["success"], delegated["error"]
    assert delegated["result"] == "child says: tides are high at 6"
    types = [e["type"] for e in events if e.get("agent") == "ask_researcher"]
    assert types[0] == "agent_started" and types[-1] == "agent_completed"
    assert "agent_progress" in types
    progress = [e["event"] for e in events if e["type"] == "agent_progress"]
    # the child ran the same query the parent ran: its own duplicate namespace
    assert any(p["type"] == "tool_completed" and p["success"] for p in progress)
    completed = next(e for e in events if e["type"] == "agent_completed")
    assert completed["rounds"] == 1 and completed["tool_calls"] == 1
    assert completed["input_tokens"] > 0 and completed["output_tokens"] > 0
    assert set(final["usage"]) == {"boss", "researcher"}
    researcher_usage = final["usage"]["researcher"]
    # two plans and the answer, and any answer requested speculatively and not used
    assert researcher_usage["model_calls"] - researcher_usage["wasted_answers"] == 3


def test_sub_agent_schema_and_errors() -> None:
    researcher = as_tool(child_loop(), name="ask_researcher", description="Researches.")
    schema = researcher.tool_call_schema.model_json_schema()
    assert set(schema["properties"]) == {"user_input", "user_extra_requirement"}
    assert schema["required"] == ["user_input"]
    with pytest.raises(ConfigurationError):
        as_tool(object(), name="x", description="y")
