"""`plan_mode="native"`: the planner's text reply is the answer when it may be, through the API."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from langchain.agents.middleware import ModelRequest, wrap_model_call
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import BaseModel

from agentloop import ModelLimits, ModelOptions, PlanningOptions, create_tool_loop
from agentloop.planning.native import adopts_planner_reply
from agentloop.testing import ScriptedChatModel, plan_reply

ANSWER = "Lumen Bay has about 412,000 inhabitants."


@tool
def population(city: str) -> int:
    """Population of a city."""
    return {"Lumen Bay": 412000}.get(city, 0)


def lookup(city: str = "Lumen Bay") -> AIMessage:
    """A native planner reply calling the tool."""
    return AIMessage("", tool_calls=[{"name": "population", "args": {"city": city}, "id": "c1"}])


def native(model: Any, **options: Any) -> Any:
    return create_tool_loop(
        model, [population], plan_mode="native", checkpointer=InMemorySaver(), **options
    )


def thread(name: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


def answer_events(graph: Any, payload: Any, config: Any) -> list[dict[str, Any]]:
    events = list(graph.stream(payload, config, stream_mode="custom"))
    return [event for event in events if event["type"].startswith("answer_")]


async def test_a_chat_request_costs_one_model_call(run_loop: Any) -> None:
    model = ScriptedChatModel([ANSWER])
    graph = native(model)
    out = await run_loop(graph, {"user_input": "How many live in Lumen Bay?"}, thread("chat"))
    assert model.request_count == 1
    assert out["answer"] == ANSWER
    assert out["status"] == "ok"
    assert out["messages"][-1].content == ANSWER
    assert out["usage"]["tool_loop"]["model_calls"] == 1  # counted once, by the planner
    assert out["usage"]["tool_loop"]["output_tokens"] > 0
    assert out["action_results"] == {}


async def test_after_tools_the_same_model_answers_in_its_last_plan(run_loop: Any) -> None:
    model = ScriptedChatModel([lookup(), ANSWER])
    graph = native(model)
    out = await run_loop(graph, {"user_input": "How many live in Lumen Bay?"}, thread("tools"))
    assert model.request_count == 2  # one planner call per round, no answer call
    assert out["answer"] == ANSWER
    assert list(out["action_results"].values()) == [412000]
    assert out["round_state"]["done_plans"][0]["result"] == 412000
    assert out["usage"]["tool_loop"]["model_calls"] == 2
    # the planner saw the result it answers from
    assert "412000" in model.requests[1][-1].text


async def test_text_before_tool_calls_is_their_purpose_when_the_reply_is_read_whole(
    run_loop: Any,
) -> None:
    model = ScriptedChatModel(
        [AIMessage("Let me check.", tool_calls=lookup().tool_calls), ANSWER], chunk_size=3
    )
    graph = native(model)
    out = await run_loop(graph, {"user_input": "Lumen Bay?"}, thread("preamble"))
    assert out["round_state"]["done_plans"][0]["purpose"] == "Let me check."
    assert out["answer"] == ANSWER
    assert model.request_count == 2


async def test_another_answer_model_answers_once_tools_ran(run_loop: Any) -> None:
    planner = ScriptedChatModel([lookup(), "I have the figure."])
    answerer = ScriptedChatModel([ANSWER])
    graph = native(planner, models=ModelOptions(answer_model=answerer))
    out = await run_loop(graph, {"user_input": "Lumen Bay?"}, thread("other"))
    assert (planner.request_count, answerer.request_count) == (2, 1)
    assert out["answer"] == ANSWER
    assert out["usage"]["tool_loop"]["model_calls"] == 3


async def test_another_answer_model_is_not_asked_when_no_tool_ran(run_loop: Any) -> None:
    planner = ScriptedChatModel(["Hello! Ask me about a city."])
    answerer = ScriptedChatModel(["unused"])
    graph = native(planner, models=ModelOptions(answer_model=answerer))
    out = await run_loop(graph, {"user_input": "hi"}, thread("hi"))
    assert (planner.request_count, answerer.request_count) == (1, 0)
    assert out["answer"] == "Hello! Ask me about a city."


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param("", id="empty"),
        pytest.param("   \n", id="whitespace"),
        pytest.param(
            AIMessage("Lumen Bay has about", response_metadata={"finish_reason": "length"}),
            id="cut-by-the-length-limit",
        ),
    ],
)
async def test_an_unusable_reply_is_answered_by_the_answer_model(run_loop: Any, reply: Any) -> None:
    model = ScriptedChatModel([reply, ANSWER])
    graph = native(model)
    out = await run_loop(graph, {"user_input": "Lumen Bay?"}, thread("unusable"))
    assert model.request_count == 2
    assert out["answer"] == ANSWER
    assert out["status"] == "ok"


async def test_a_reply_cut_by_the_plan_limit_is_answered_by_the_answer_model(
    run_loop: Any,
) -> None:
    long_reply = " ".join(f"word{n}" for n in range(200))
    model = ScriptedChatModel([long_reply, ANSWER])
    graph = native(model, models=ModelOptions(limits=ModelLimits(max_plan_chars=100)))
    out = await run_loop(graph, {"user_input": "Lumen Bay?"}, thread("cut"))
    assert model.request_count == 2
    assert out["answer"] == ANSWER
    assert out["status"] == "ok"


async def test_json_mode_still_asks_the_answer_model(run_loop: Any) -> None:
    model = ScriptedChatModel([plan_reply("response"), ANSWER])
    graph = create_tool_loop(model, [population], checkpointer=InMemorySaver())
    out = await run_loop(graph, {"user_input": "Lumen Bay?"}, thread("json"))
    assert model.request_count == 2
    assert out["answer"] == ANSWER
    assert "reply" not in out["decision"]


async def test_each_turn_of_a_thread_answers_with_its_own_reply(run_loop: Any) -> None:
    model = ScriptedChatModel(["First answer.", lookup(), "Second answer."])
    graph = native(model)
    config = thread("turns")
    first = await run_loop(graph, {"messages": [HumanMessage("one")]}, config)
    second = await run_loop(graph, {"messages": [HumanMessage("two")]}, config)
    assert (first["answer"], second["answer"]) == ("First answer.", "Second answer.")
    answers = [m for m in second["messages"] if isinstance(m, AIMessage) and not m.tool_calls]
    assert [m.content for m in answers] == ["First answer.", "Second answer."]
    # the second turn's planner call, then its outcome, come before its answer
    assert [type(m).__name__ for m in second["messages"]] == [
        "HumanMessage",
        "AIMessage",
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
    ]
    assert model.request_count == 3


@pytest.mark.parametrize("entry", ["stream", "astream"])
async def test_the_events_say_the_planner_reply_was_used(entry: str) -> None:
    graph = native(ScriptedChatModel([lookup(), ANSWER]))
    payload, config = {"user_input": "Lumen Bay?"}, thread(f"events-{entry}")
    if entry == "stream":
        events = await asyncio.to_thread(answer_events, graph, payload, config)
    else:
        events = [
            event
            async for event in graph.astream(payload, config, stream_mode="custom")
            if event["type"].startswith("answer_")
        ]
    assert [(e["type"], e["planner_reply"]) for e in events] == [
        ("answer_started", True),
        ("answer_completed", True),
    ]
    assert events[0]["tool_results"] == 1
    assert events[1]["status"] == "ok" and events[1]["chars"] == len(ANSWER)


async def messages_stream(graph: Any, payload: Any, config: Any, entry: str) -> list[Any]:
    """The `(message, metadata)` items of `stream_mode="messages"`, through `entry`."""
    if entry == "stream":
        return await asyncio.to_thread(
            lambda: list(graph.stream(payload, config, stream_mode="messages"))
        )
    return [item async for item in graph.astream(payload, config, stream_mode="messages")]


@pytest.mark.parametrize("entry", ["stream", "astream"])
async def test_the_messages_stream_shows_the_adopted_answer_once(entry: str) -> None:
    graph = native(ScriptedChatModel([lookup(), ANSWER], chunk_size=4))
    payload, config = {"user_input": "Lumen Bay?"}, thread(f"messages-{entry}")
    items = await messages_stream(graph, payload, config, entry)
    shown = [
        (message, metadata["langgraph_node"])
        for message, metadata in items
        if ANSWER in str(message.content)
    ]
    assert len(shown) == 1
    message, node = shown[0]
    assert node == "answer"
    assert isinstance(message, AIMessage) and not isinstance(message, AIMessageChunk)
    assert message.content == ANSWER
    assert "plan" not in {metadata["langgraph_node"] for _, metadata in items}


@pytest.mark.parametrize("entry", ["stream", "astream"])
async def test_a_chat_ui_streams_the_speculative_answer_and_no_plan_text(entry: str) -> None:
    def reply(messages: list[Any]) -> str:
        return "PLANNER TEXT " * 8 if "You plan" in messages[0].text else ANSWER

    # speculated: the answer streams from the answer node while the plan is read
    graph = native(
        ScriptedChatModel([], responder=reply, chunk_size=4),
        planning=PlanningOptions(speculative_answer=True),
    )
    payload, config = {"user_input": "Say hello"}, thread(f"chat-ui-{entry}")
    items = await messages_stream(graph, payload, config, entry)
    chunks = [(m, meta["langgraph_node"]) for m, meta in items if isinstance(m, AIMessageChunk)]
    assert "".join(str(m.content) for m, _ in chunks) == ANSWER
    assert {node for _, node in chunks} == {"answer"}
    assert not any("PLANNER" in str(m.content) for m, _ in items)
    state = graph.get_state(config).values
    assert state["answer"] == ANSWER and state["messages"][-1].content == ANSWER


@pytest.mark.parametrize("entry", ["stream", "astream"])
async def test_auto_asks_no_second_model_for_the_planners_own_answer(entry: str) -> None:
    model = ScriptedChatModel([], responder=lambda messages: ANSWER, chunk_size=4)
    graph = native(model)  # "auto": the planner's reply is the answer, as create_agent's is
    items = await messages_stream(graph, {"user_input": "Say hello"}, thread(f"one-{entry}"), entry)
    assert model.request_count == 1
    shown = [
        m for m, meta in items if isinstance(m, AIMessage) and meta["langgraph_node"] == "answer"
    ]
    assert [m.content for m in shown] == [ANSWER]


@pytest.mark.parametrize("entry", ["stream", "astream"])
async def test_streamed_planner_tokens_are_the_answer_shown_once(entry: str) -> None:
    graph = native(
        ScriptedChatModel([ANSWER], chunk_size=4),
        planning=PlanningOptions(stream_plan_tokens=True),
    )
    payload, config = {"user_input": "Lumen Bay?"}, thread(f"plan-tokens-{entry}")
    items = await messages_stream(graph, payload, config, entry)
    shown = "".join(str(message.content) for message, _ in items if isinstance(message, AIMessage))
    assert shown == ANSWER  # the planner's chunks; the answer node's message is the same one
    assert {metadata["langgraph_node"] for _, metadata in items} == {"prepare", "plan"}


async def test_model_middleware_saw_the_planner_call_it_adopts(run_loop: Any) -> None:
    seen: list[str] = []

    @wrap_model_call
    def record(request: ModelRequest, handler: Any) -> Any:
        """Record which calls pass through."""
        seen.append(request.state["agentloop_model_call"])
        return handler(request)

    graph = native(ScriptedChatModel([lookup(), ANSWER]), middleware=[record])
    out = await run_loop(graph, {"user_input": "Lumen Bay?"}, thread("middleware"))
    assert seen == ["plan", "plan"]
    assert out["answer"] == ANSWER


class Census(BaseModel):
    """A city's population."""

    city: str
    population: int


async def test_a_typed_result_is_asked_from_the_adopted_reply(run_loop: Any) -> None:
    result = json.dumps({"city": "Lumen Bay", "population": 412000})
    model = ScriptedChatModel([lookup(), ANSWER, result], profile={"structured_output": True})
    graph = native(model, response_format=Census)
    out = await run_loop(graph, {"user_input": "Lumen Bay?"}, thread("typed"))
    assert model.request_count == 3  # two plans, then the typed result: no answer call
    assert out["answer"] == ANSWER
    assert out["structured_response"] == Census(city="Lumen Bay", population=412000)
    assert model.requests[2][-2].content == ANSWER  # the result follows the adopted answer


async def test_a_speculative_answer_is_the_answer_and_the_reply_is_read_no_further(
    run_loop: Any,
) -> None:
    def reply(messages: list[Any]) -> str:
        return (
            "The planner's own reply, long enough to stream."
            if "You plan" in messages[0].text
            else ANSWER
        )

    model = ScriptedChatModel([], responder=reply, chunk_size=4)
    graph = native(model, planning=PlanningOptions(speculative_answer=True))
    out = await run_loop(graph, {"user_input": "hi"}, thread("speculative"))
    assert out["answer"] == ANSWER
    assert model.request_count == 2  # the plan and the answer, started together
    assert out["decision"]["short_circuited"] is True  # read up to its first text
    assert "reply" not in out["decision"]
    assert out["usage"]["tool_loop"]["model_calls"] == 2


@tool
def page(n: int) -> str:
    """Read one page of the report."""
    return f"page {n}: " + "lorem " * 20


async def test_a_planner_that_no_longer_sees_every_result_does_not_write_the_answer(
    run_loop: Any,
) -> None:
    def read(n: int) -> AIMessage:
        return AIMessage("", tool_calls=[{"name": "page", "args": {"n": n}, "id": f"p{n}"}])

    model = ScriptedChatModel(
        [read(1), read(2), read(3), "From what I still see: 2 and 3.", ANSWER]
    )
    graph = create_tool_loop(
        model,
        [page],
        plan_mode="native",
        checkpointer=InMemorySaver(),
        planning=PlanningOptions(keep_tool_results=1),
    )
    out = await run_loop(graph, {"user_input": "Sum up pages 1 to 3."}, thread("omitted"))
    assert "page 1:" not in model.requests[3][-1].text  # the last plan left page 1 out
    assert model.request_count == 5  # so the answer model wrote the answer
    assert out["answer"] == ANSWER
    assert all(f"page {n}:" in model.requests[4][-1].text for n in (1, 2, 3))


def test_the_predicate_the_speculation_decision_can_use() -> None:
    one, other = ScriptedChatModel([]), ScriptedChatModel([])
    assert adopts_planner_reply("native", one, one, tools_ran=True)
    assert adopts_planner_reply("native", one, other, tools_ran=False)
    assert not adopts_planner_reply("native", one, other, tools_ran=True)
    assert not adopts_planner_reply("native", one, one, tools_ran=True, results_omitted=True)
    assert adopts_planner_reply("native", one, other, tools_ran=False, results_omitted=True)
    assert not adopts_planner_reply("json", one, one, tools_ran=False)
    assert not adopts_planner_reply("tool", one, one, tools_ran=False)
