"""Model-side middleware has the effect on a tool loop that it has on `create_agent`.

`ContextEditingMiddleware`, also model-side, has a file of its own
(tests/unit/test_parity_context_editing.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import (
    LLMToolSelectorMiddleware,
    ModelRefusalMiddleware,
    ModelRequest,
    PIIMiddleware,
    SummarizationMiddleware,
    dynamic_prompt,
)
from langchain_core.exceptions import ModelRefusalError
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolCall
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from agentloop import ModelOptions, create_tool_loop
from agentloop.testing import ScriptedChatModel, plan_reply


@tool
def weather(city: str) -> str:
    """Today's weather in a city."""
    return f"sunny in {city}"


@tool
def stock(symbol: str) -> str:
    """Today's price of a stock."""
    return f"{symbol} at 100"


@tool
def news(topic: str) -> str:
    """Today's headlines on a topic."""
    return f"nothing new on {topic}"


TOOLS = [weather, stock, news]


def _thread(name: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


def _system(request: list[BaseMessage]) -> str:
    first = request[0]
    return first.text if isinstance(first, SystemMessage) else ""


def _agent(script: list[AIMessage | str], **kwargs: Any) -> tuple[Any, ScriptedChatModel]:
    model = ScriptedChatModel(script)
    return create_agent(model, TOOLS, checkpointer=InMemorySaver(), **kwargs), model


def _weather_call() -> AIMessage:
    return AIMessage("", tool_calls=[ToolCall(name="weather", args={"city": "Paris"}, id="c1")])


def _loop(
    plan_mode: str, answer: AIMessage | str = "It is sunny.", **kwargs: Any
) -> tuple[Any, ScriptedChatModel, ScriptedChatModel]:
    planner = ScriptedChatModel(
        [
            plan_reply("execute", [{"tool_name": "weather", "tool_kwargs": {"city": "Paris"}}]),
            plan_reply("response"),
        ]
    )
    answerer = ScriptedChatModel([answer])
    graph = create_tool_loop(
        planner,
        TOOLS,
        models=ModelOptions(answer_model=answerer),
        checkpointer=InMemorySaver(),
        plan_mode=plan_mode,
        **kwargs,
    )
    return graph, planner, answerer


# -- @dynamic_prompt: the app's part of the system prompt -----------------------------------


@dynamic_prompt
def french(request: ModelRequest) -> str:
    """Reply in French."""
    return "Reply in French."


async def test_dynamic_prompt_replaces_the_apps_system_prompt_and_keeps_the_loops_rules(
    run_loop: Any, plan_mode: str
) -> None:
    agent, model = _agent(
        [_weather_call(), "Il fait beau."], system_prompt="House rules.", middleware=[french]
    )
    await run_loop(agent, {"messages": [HumanMessage("Weather in Paris?")]}, _thread("a"))
    assert {_system(request) for request in model.requests} == {"Reply in French."}

    graph, planner, answerer = _loop(plan_mode, system_prompt="House rules.", middleware=[french])
    out = await run_loop(graph, {"user_input": "Weather in Paris?"}, _thread("b"))
    assert out["status"] == "ok" and out["answer"] == "It is sunny."
    assert planner.request_count == 2  # no plan was re-asked
    plain, plain_planner, plain_answerer = _loop(plan_mode)  # the loop's rules alone
    await run_loop(plain, {"user_input": "Weather in Paris?"}, _thread("c"))
    sent = [*planner.requests, *answerer.requests]
    rules = [*plain_planner.requests, *plain_answerer.requests]
    assert [_system(request) for request in sent] == [
        f"Reply in French.\n\n{_system(request)}" for request in rules
    ]
    assert [type(m).__name__ for m in out["messages"]][-2:] == ["ToolMessage", "AIMessage"]


# -- LLMToolSelectorMiddleware: the tools offered ---------------------------------------------


def _selection(*names: str) -> AIMessage:
    """The selector model's reply: its structured output, as a tool call."""
    call = ToolCall(name="ToolSelectionResponse", args={"tools": list(names)}, id="s1")
    return AIMessage("", tool_calls=[call])


def _catalog(request: list[BaseMessage]) -> str:
    """The tools a JSON planner's request lists: its rules', after `<available_tools>`."""
    return str(request[0].content).partition("<available_tools>")[2]


async def test_tool_selector_offers_the_planner_only_the_selected_tools(
    run_loop: Any, plan_mode: str
) -> None:
    selector = ScriptedChatModel([_selection("weather")] * 4)
    middleware = [LLMToolSelectorMiddleware(model=selector)]
    agent, model = _agent([_weather_call(), "It is sunny."], middleware=middleware)
    theirs = await run_loop(agent, {"messages": [HumanMessage("Weather in Paris?")]}, _thread("a"))
    assert [tool["function"]["name"] for tool in model.bound_tools] == ["weather"]

    selector = ScriptedChatModel([_selection("weather")] * 4)
    middleware = [LLMToolSelectorMiddleware(model=selector)]
    graph, planner, _ = _loop(plan_mode, middleware=middleware)
    ours = await run_loop(graph, {"user_input": "Weather in Paris?"}, _thread("b"))
    assert ours["status"] == "ok" and ours["answer"] == "It is sunny."
    assert selector.request_count == planner.request_count == 2  # once per planner call
    if plan_mode == "native":
        assert [tool["function"]["name"] for tool in planner.bound_tools] == ["weather"]
    for request in planner.requests:  # only the selected tool is listed
        assert '"weather"' in _catalog(request) or plan_mode == "native"
        assert '"stock"' not in _catalog(request) and '"news"' not in _catalog(request)
    assert ours["messages"][-1].content == theirs["messages"][-1].content


async def test_a_plan_naming_a_tool_not_selected_is_asked_again(run_loop: Any) -> None:
    selector = ScriptedChatModel([_selection("weather")] * 4)
    planner = ScriptedChatModel(
        [
            plan_reply("execute", [{"tool_name": "stock", "tool_kwargs": {"symbol": "ACME"}}]),
            plan_reply("execute", [{"tool_name": "weather", "tool_kwargs": {"city": "Paris"}}]),
            plan_reply("response"),
        ]
    )
    graph = create_tool_loop(
        planner,
        TOOLS,
        models=ModelOptions(answer_model=ScriptedChatModel(["It is sunny."])),
        middleware=[LLMToolSelectorMiddleware(model=selector)],
        checkpointer=InMemorySaver(),
    )
    out = await run_loop(graph, {"user_input": "Weather in Paris?"}, _thread("c"))
    assert out["status"] == "ok"
    assert [record["tool_name"] for record in out["tool_logs"]] == ["weather"]
    reask = planner.requests[1][-1].text
    assert "unknown: stock" in reask


# -- before_model changes reach the prompt: SummarizationMiddleware, PIIMiddleware -------------


def _text(request: list[BaseMessage]) -> str:
    return "\n".join(str(message.content) for message in request)


def _shape(messages: list[BaseMessage]) -> list[tuple[str, str]]:
    return [(type(message).__name__, str(message.content)) for message in messages]


def _summarizing() -> tuple[SummarizationMiddleware, ScriptedChatModel]:
    summarizer = ScriptedChatModel(["SUMMARY TEXT"] * 4)
    middleware = SummarizationMiddleware(
        model=summarizer, trigger=("messages", 5), keep=("messages", 2)
    )
    return middleware, summarizer


async def test_a_summary_replaces_old_turns_in_what_the_models_see(
    run_loop: Any, plan_mode: str
) -> None:
    middleware, summarizer = _summarizing()
    model = ScriptedChatModel([f"answer {turn}" for turn in range(3)])
    agent = create_agent(model, TOOLS, checkpointer=InMemorySaver(), middleware=[middleware])
    for turn in range(3):
        theirs = await run_loop(
            agent, {"messages": [HumanMessage(f"question {turn}")]}, _thread("a")
        )
    assert "SUMMARY TEXT" in _text(model.requests[2])
    assert "question 0" not in _text(model.requests[2])

    middleware, our_summarizer = _summarizing()
    answers = [f"answer {turn}" for turn in range(3)]
    # a native planner's text reply is the answer: no answer model call
    planner = ScriptedChatModel(answers if plan_mode == "native" else [plan_reply("response")] * 3)
    answerer = ScriptedChatModel(answers)
    graph = create_tool_loop(
        planner,
        TOOLS,
        models=ModelOptions(answer_model=answerer),
        checkpointer=InMemorySaver(),
        middleware=[middleware],
        plan_mode=plan_mode,
    )
    for turn in range(3):
        ours = await run_loop(graph, {"messages": [HumanMessage(f"question {turn}")]}, _thread("b"))
    assert our_summarizer.request_count == summarizer.request_count == 1
    for request in [*planner.requests[2:], *answerer.requests[2:]]:  # the summarising turn
        assert "SUMMARY TEXT" in _text(request)
        assert "question 0" not in _text(request) and "answer 0" not in _text(request)
    assert _shape(ours["messages"]) == _shape(theirs["messages"])


async def test_pii_is_redacted_in_what_the_models_see(run_loop: Any, plan_mode: str) -> None:
    asked = "Is jane@example.com on the list?"
    redact = PIIMiddleware("email", strategy="redact")
    model = ScriptedChatModel(["She is."])
    agent = create_agent(model, TOOLS, checkpointer=InMemorySaver(), middleware=[redact])
    theirs = await run_loop(agent, {"messages": [HumanMessage(asked)]}, _thread("a"))
    assert "[REDACTED_EMAIL]" in _text(model.requests[0])
    assert "jane@example.com" not in _text(model.requests[0])

    planner = ScriptedChatModel(["She is." if plan_mode == "native" else plan_reply("response")])
    answerer = ScriptedChatModel(["She is."])
    graph = create_tool_loop(
        planner,
        TOOLS,
        models=ModelOptions(answer_model=answerer),
        checkpointer=InMemorySaver(),
        middleware=[PIIMiddleware("email", strategy="redact")],
        plan_mode=plan_mode,
    )
    ours = await run_loop(graph, {"messages": [HumanMessage(asked)]}, _thread("b"))
    for request in [*planner.requests, *answerer.requests]:
        assert "[REDACTED_EMAIL]" in _text(request)
        assert "jane@example.com" not in _text(request)
    assert _shape(ours["messages"]) == _shape(theirs["messages"])


# -- a model refusal reaches model middleware: ModelRefusalMiddleware ---------------------------


def _refusal() -> AIMessage:
    """A refusal as langchain-openai gives it."""
    return AIMessage(
        "",
        additional_kwargs={"refusal": "I can't help with that."},
        response_metadata={"model_provider": "openai"},
    )


def _block_refusal() -> AIMessage:
    """A refusal as a standard content block (`content_blocks`' `refusal`)."""
    return AIMessage([{"type": "refusal", "refusal": "I can't help with that."}])


@pytest.mark.parametrize("refusal", [_refusal, _block_refusal], ids=["openai", "content-block"])
async def test_a_refusal_is_seen_by_model_refusal_middleware(
    run_loop: Any, plan_mode: str, refusal: Any
) -> None:
    model = ScriptedChatModel([refusal()])
    agent = create_agent(model, TOOLS, middleware=[ModelRefusalMiddleware()])
    with pytest.raises(ModelRefusalError, match="I can't help with that"):
        await run_loop(agent, {"messages": [HumanMessage("Help me.")]})
    assert model.request_count == 1

    planner, answerer = ScriptedChatModel([refusal()] * 3), ScriptedChatModel(["unused"])
    graph = create_tool_loop(
        planner,
        TOOLS,
        models=ModelOptions(answer_model=answerer),
        middleware=[ModelRefusalMiddleware()],
        checkpointer=InMemorySaver(),
        plan_mode=plan_mode,
    )
    # the run ends at the first refusal, as create_agent's: the middleware's error is raised
    with pytest.raises(ModelRefusalError, match="I can't help with that"):
        await run_loop(graph, {"messages": [HumanMessage("Help me.")]}, _thread("r"))
    assert (planner.request_count, answerer.request_count) == (1, 0)  # no re-ask, no answer


@pytest.mark.parametrize("refusal", [_refusal, _block_refusal], ids=["openai", "content-block"])
async def test_a_refusal_ends_the_run_with_the_refused_message(
    run_loop: Any, plan_mode: str, refusal: Any
) -> None:
    model = ScriptedChatModel([refusal()])
    agent = create_agent(model, TOOLS, checkpointer=InMemorySaver())
    theirs = await run_loop(agent, {"messages": [HumanMessage("Help me.")]}, _thread("a"))
    refused = [{"type": "refusal", "refusal": "I can't help with that."}]
    assert theirs["messages"][-1].content_blocks == refused
    assert model.request_count == 1

    planner, answerer = ScriptedChatModel([refusal()] * 3), ScriptedChatModel(["unused"])
    graph = create_tool_loop(
        planner,
        TOOLS,
        models=ModelOptions(answer_model=answerer),
        checkpointer=InMemorySaver(),
        plan_mode=plan_mode,
    )
    ours = await run_loop(graph, {"messages": [HumanMessage("Help me.")]}, _thread("b"))
    assert (planner.request_count, answerer.request_count) == (1, 0)  # no re-ask, no answer
    assert ours["status"] == "ok" and ours["status_reason"] == "the model refused"
    assert ours["answer"] == "I can't help with that."
    assert ours["messages"][-1].content_blocks == refused
    assert _shape(ours["messages"]) == _shape(theirs["messages"])


async def test_an_answer_models_refusal_is_the_answer(run_loop: Any, plan_mode: str) -> None:
    graph, _, _ = _loop(plan_mode, _refusal())  # the tool runs, the answer model refuses
    out = await run_loop(graph, {"user_input": "Weather in Paris?"}, _thread("c"))
    assert out["status"] == "ok" and out["answer"] == "I can't help with that."
    refused = [{"type": "refusal", "refusal": "I can't help with that."}]
    assert out["messages"][-1].content_blocks == refused
