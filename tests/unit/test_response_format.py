"""`response_format=`: a typed `structured_response` beside the text answer."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from langchain.agents.middleware import ModelFallbackMiddleware
from langchain.agents.structured_output import ProviderStrategy, ToolStrategy
from langchain_core.messages import AIMessage, ToolCall
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from agentloop import ConfigurationError, ModelOptions, create_tool_loop
from agentloop.testing import ScriptedChatModel, plan_reply


class TramFacts(BaseModel):
    """Facts about a tram network."""

    length_km: float = Field(description="Total length in km.")
    lines: int = Field(ge=1, description="Number of lines.")


@dataclass
class TramFactsRecord:
    """Facts about a tram network, as a dataclass."""

    length_km: float
    lines: int


class TramFactsDict(TypedDict):
    """Facts about a tram network, as a TypedDict."""

    length_km: float
    lines: int


@tool
def network_length() -> str:
    """Length of the tram network."""
    return "21 km over 2 lines"


ANSWER = "The network is 21 km long with 2 lines."
NATIVE = {"structured_output": True}


def _facts_call(args: dict[str, Any], name: str = "TramFacts") -> AIMessage:
    return AIMessage("", tool_calls=[ToolCall(name=name, args=args, id="call_facts")])


def _loop(answers: list[Any], response_format: Any, **model: Any) -> tuple[Any, ScriptedChatModel]:
    planner = ScriptedChatModel(
        [plan_reply("execute", [{"tool_name": "network_length"}]), plan_reply("response")]
    )
    answerer = ScriptedChatModel(answers, **model)
    graph = create_tool_loop(
        planner,
        [network_length],
        models=ModelOptions(answer_model=answerer),
        response_format=response_format,
    )
    return graph, answerer


async def test_pydantic_result_by_native_structured_output(run_loop: Any) -> None:
    graph, answerer = _loop(
        [ANSWER, json.dumps({"length_km": 21, "lines": 2})], TramFacts, profile=NATIVE
    )
    out = await run_loop(graph, {"user_input": "How long is the network?"})
    assert out["answer"] == ANSWER
    assert out["structured_response"] == TramFacts(length_km=21, lines=2)
    assert out["status"] == "ok"
    options = answerer.request_options[1]
    assert options["response_format"]["json_schema"]["name"] == "TramFacts"
    assert "tools" not in options
    assert answerer.requests[1][-2].content == ANSWER  # the result follows the text answer


async def test_pydantic_result_by_tool_strategy_without_native_support(run_loop: Any) -> None:
    graph, answerer = _loop([ANSWER, _facts_call({"length_km": 21, "lines": 2})], TramFacts)
    out = await run_loop(graph, {"user_input": "How long is the network?"})
    assert out["structured_response"] == TramFacts(length_km=21, lines=2)
    assert out["answer"] == ANSWER
    options = answerer.request_options[1]
    assert [t["function"]["name"] for t in options["tools"]] == ["TramFacts"]
    assert "response_format" not in options


async def test_an_invalid_result_is_asked_again_once_with_the_error(run_loop: Any) -> None:
    graph, answerer = _loop(
        [
            ANSWER,
            _facts_call({"length_km": 21, "lines": 0}),
            _facts_call({"length_km": 21, "lines": 2}),
        ],
        TramFacts,
    )
    out = await run_loop(graph, {"user_input": "How long?"})
    assert out["structured_response"] == TramFacts(length_km=21, lines=2)
    assert out["status"] == "ok"
    retry = answerer.requests[2][-1]
    assert retry.type == "tool" and "lines" in str(retry.content)


async def test_a_result_invalid_twice_sets_the_status_and_keeps_the_answer(run_loop: Any) -> None:
    graph, answerer = _loop([ANSWER, "not json", "still not json"], TramFacts, profile=NATIVE)
    out = await run_loop(graph, {"user_input": "How long?"})
    assert out["answer"] == ANSWER
    assert out["structured_response"] is None
    assert out["status"] == "structured_response_failed"
    assert "valid JSON" in out["status_reason"]
    assert answerer.request_count == 3


@pytest.mark.parametrize(
    ("response_format", "expected"),
    [
        (TramFactsRecord, TramFactsRecord(21, 2)),
        (TramFactsDict, {"length_km": 21, "lines": 2}),
        (ToolStrategy(TramFacts), TramFacts(length_km=21, lines=2)),
    ],
)
async def test_dataclass_typeddict_and_explicit_tool_strategy(
    run_loop: Any, response_format: Any, expected: Any
) -> None:
    name = getattr(getattr(response_format, "schema", response_format), "__name__", "")
    graph, _ = _loop([ANSWER, _facts_call({"length_km": 21, "lines": 2}, name)], response_format)
    out = await run_loop(graph, {"user_input": "How long?"})
    assert out["structured_response"] == expected


async def test_json_schema_and_explicit_provider_strategy(run_loop: Any) -> None:
    schema = {
        "title": "tram_facts",
        "type": "object",
        "properties": {"length_km": {"type": "number"}, "lines": {"type": "integer"}},
        "required": ["length_km", "lines"],
    }
    graph, answerer = _loop([ANSWER, '{"length_km": 21, "lines": 2}'], ProviderStrategy(schema))
    out = await run_loop(graph, {"user_input": "How long?"})
    assert out["structured_response"] == {"length_km": 21, "lines": 2}
    assert answerer.request_options[1]["response_format"]["type"] == "json_schema"


def test_an_unusable_response_format_is_refused_at_build() -> None:
    with pytest.raises(ConfigurationError, match="response_format"):
        create_tool_loop(ScriptedChatModel([]), [], response_format=42)


async def test_the_structured_call_is_not_on_the_messages_stream() -> None:
    graph, _ = _loop([ANSWER, json.dumps({"length_km": 21, "lines": 2})], TramFacts, profile=NATIVE)
    chunks = [
        chunk
        async for chunk, _ in graph.astream({"user_input": "How long?"}, stream_mode="messages")
    ]
    text = "".join(str(chunk.content) for chunk in chunks)
    assert ANSWER in text and "length_km" not in text


async def test_the_structured_call_goes_through_model_middleware(run_loop: Any) -> None:
    backup = ScriptedChatModel([json.dumps({"length_km": 21, "lines": 2})], profile=NATIVE)
    planner = ScriptedChatModel(
        [plan_reply("execute", [{"tool_name": "network_length"}]), plan_reply("response")]
    )
    answerer = ScriptedChatModel([ANSWER, ValueError("structured output is down")])
    graph = create_tool_loop(
        planner,
        [network_length],
        models=ModelOptions(answer_model=answerer),
        response_format=TramFacts,
        middleware=[ModelFallbackMiddleware(backup)],
    )
    out = await run_loop(graph, {"user_input": "How long?"})
    assert out["answer"] == ANSWER
    assert out["structured_response"] == TramFacts(length_km=21, lines=2)
    assert backup.request_options[0]["response_format"]["json_schema"]["name"] == "TramFacts"


async def test_a_later_run_without_an_answer_leaves_no_stale_result(run_loop: Any) -> None:
    planner = ScriptedChatModel([plan_reply("response")], repeat_last=True)
    answerer = ScriptedChatModel(
        [ANSWER, json.dumps({"length_km": 21, "lines": 2}), ValueError("answer model is down")],
        profile=NATIVE,
    )
    graph = create_tool_loop(
        planner,
        [],
        models=ModelOptions(answer_model=answerer),
        response_format=TramFacts,
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": f"stale-{run_loop.entry}"}}
    first = await run_loop(graph, {"user_input": "How long?"}, config)
    assert first["structured_response"] == TramFacts(length_km=21, lines=2)
    second = await run_loop(graph, {"user_input": "And how wide?"}, config)
    assert second["status"] == "answer_failed"
    assert second["structured_response"] is None
