"""Input is validated at the graph's edge: a clear `InputError` before any model call."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from agentloop import AgentLoopError, InputError, ModelOptions, create_tool_loop
from agentloop.testing import ScriptedChatModel, plan_reply


@tool
def get_time(zone: str) -> str:
    """Tell the time in a zone."""
    return f"noon in {zone}"


def loop() -> tuple[Any, ScriptedChatModel, ScriptedChatModel]:
    planner = ScriptedChatModel([plan_reply("response")], repeat_last=True)
    answerer = ScriptedChatModel(["hello"], repeat_last=True)
    graph = create_tool_loop(
        planner,
        [get_time],
        models=ModelOptions(answer_model=answerer),
        checkpointer=InMemorySaver(),
    )
    return graph, planner, answerer


BAD_INPUTS = [
    ({"user_input": 123}, "`user_input` must be a string, got int"),
    ({"user_input": ["what", "time"]}, "`user_input` must be a string, got list"),
    (
        {"user_input": "hi", "user_extra_requirement": 7},
        "`user_extra_requirement` must be a string",
    ),
    ({}, "nothing to answer"),
    ({"user_input": "   "}, "nothing to answer"),
    ({"messages": []}, "nothing to answer"),
    ({"messages": [AIMessage("I am only an answer")]}, "nothing to answer"),
    ({"messages": [HumanMessage("")]}, "nothing to answer"),
]


@pytest.mark.parametrize(("payload", "expected"), BAD_INPUTS)
async def test_bad_input_is_a_clear_error_before_any_model_call(
    run_loop: Any, payload: dict[str, Any], expected: str
) -> None:
    graph, planner, answerer = loop()
    config = {"configurable": {"thread_id": "t"}}
    with pytest.raises(InputError, match=expected) as raised:
        await run_loop(graph, payload, config)
    assert isinstance(raised.value, AgentLoopError)
    assert planner.request_count == 0 and answerer.request_count == 0
    # the thread is not broken: the next good input is answered
    out = await run_loop(graph, {"user_input": "hello?"}, config)
    assert out["answer"] == "hello" and out["status"] == "ok"


async def test_a_human_message_is_a_request(run_loop: Any) -> None:
    graph, _, _ = loop()
    out = await run_loop(
        graph, {"messages": [HumanMessage("hello?")]}, {"configurable": {"thread_id": "m"}}
    )
    assert out["user_input"] == "hello?" and out["answer"] == "hello"


def test_the_input_schema_studio_shows_stays_text() -> None:
    graph, _, _ = loop()
    properties = graph.get_input_jsonschema()["properties"]
    assert properties["user_input"]["type"] == "string"
    assert properties["user_extra_requirement"]["type"] == "string"
