"""The `messages` stream carries what a chat UI shows: the answer, not the planner's JSON."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage
from langchain_core.tools import tool

from agentloop import ModelOptions, PlanningOptions, create_tool_loop
from agentloop.testing import ScriptedChatModel, plan_reply


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _loop(**options: Any) -> Any:
    planner = ScriptedChatModel(
        [
            plan_reply("execute", [{"tool_name": "add", "tool_kwargs": {"a": 2, "b": 3}}]),
            plan_reply("response"),
        ],
        chunk_size=6,
    )
    answerer = ScriptedChatModel(["The sum is 5."], chunk_size=4)
    return create_tool_loop(planner, [add], models=ModelOptions(answer_model=answerer), **options)


async def _messages(graph: Any, entry: str) -> list[tuple[Any, dict[str, Any]]]:
    payload = {"user_input": "what is 2+3?"}
    if entry == "stream":
        return await asyncio.to_thread(lambda: list(graph.stream(payload, stream_mode="messages")))
    return [item async for item in graph.astream(payload, stream_mode="messages")]


@pytest.mark.parametrize("entry", ["stream", "astream"])
async def test_messages_stream_has_the_answer_and_no_plan_json(entry: str) -> None:
    items = await _messages(_loop(), entry)
    nodes = {metadata["langgraph_node"] for _, metadata in items}
    text = "".join(chunk.content for chunk, _ in items if isinstance(chunk, AIMessageChunk))
    assert "next_action" not in text
    assert "The sum is 5." in text
    # the request as a human message and the plan's tool calls (no planner token: the
    # plan node, where a run without a checkpointer starts, writes the round's
    # AIMessage, as create_agent's model node), their outcomes, the answer
    assert nodes == {"plan", "call_tool", "answer"}
    from_plan = [m for m, meta in items if meta["langgraph_node"] == "plan"]
    assert isinstance(from_plan[0], HumanMessage)  # the run's start: the request
    planned = from_plan[1:]
    assert planned
    assert all(isinstance(m, AIMessage) and m.tool_calls and not m.content for m in planned)


@pytest.mark.parametrize("entry", ["stream", "astream"])
async def test_planner_tokens_stream_when_asked(entry: str) -> None:
    items = await _messages(_loop(planning=PlanningOptions(stream_plan_tokens=True)), entry)
    plan_text = "".join(
        chunk.content for chunk, metadata in items if metadata["langgraph_node"] == "plan"
    )
    assert '"next_action": "execute"' in plan_text
    assert '"next_action": "response"' in plan_text
