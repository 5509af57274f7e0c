"""`create_agent`'s parameters on a tool loop: state schema, debug, cache, interrupts, dict tools.

Each test builds the same small app with `create_agent` and with `create_tool_loop`, from
scripted models, and checks that the parameter has the same effect on both.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, NotRequired

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentState
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.cache.memory import InMemoryCache
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from typing_extensions import TypedDict

from agentloop import ConfigurationError, ModelOptions, create_tool_loop
from agentloop.testing import ScriptedChatModel, plan_reply

CALLS: list[str] = []


@tool
def greet(runtime: ToolRuntime) -> str:
    """Greet the user by the name the app keeps in its state."""
    CALLS.append("greet")
    return f"hello {runtime.state.get('user_name')}"


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
"""An OpenAI-format dict tool: bound to the model, run by no one in the graph."""

WEB_SEARCH = {"type": "web_search_preview"}
"""A provider's own tool, which the provider runs."""


class AppState(AgentState[Any]):
    user_name: NotRequired[str]


@pytest.fixture(autouse=True)
def _no_calls_yet() -> None:
    CALLS.clear()


def _thread(name: str) -> RunnableConfig:
    return {"configurable": {"thread_id": name}}


def _agent_model() -> ScriptedChatModel:
    """`create_agent`'s model: one call of `greet`, then the answer."""
    return ScriptedChatModel(
        [AIMessage("", tool_calls=[{"name": "greet", "args": {}, "id": "call_1"}]), "Done."]
    )


def _loop(**kwargs: Any) -> tuple[Any, ScriptedChatModel]:
    """The same app as a tool loop: one round calling `greet`, then the answer."""
    planner = ScriptedChatModel(
        [plan_reply("execute", [{"tool_name": "greet", "tool_kwargs": {}}]), plan_reply("response")]
    )
    tools = kwargs.pop("tools", [greet])
    loop = create_tool_loop(
        planner, tools, models=ModelOptions(answer_model=ScriptedChatModel(["Done."])), **kwargs
    )
    return loop, planner


def _agent_input(**extra: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": "Greet me."}], **extra}


def _loop_input(**extra: Any) -> dict[str, Any]:
    return {"user_input": "Greet me.", **extra}


# -- state_schema ----------------------------------------------------------------------


async def test_a_state_schema_key_is_in_the_state_tools_see_and_in_the_output(
    run_loop: Any, planning_for: Callable[..., dict[str, Any]]
) -> None:
    agent = create_agent(
        _agent_model(), [greet], state_schema=AppState, checkpointer=InMemorySaver()
    )
    agent_out = await run_loop(agent, _agent_input(user_name="Ada"), _thread("a"))
    loop, _ = _loop(state_schema=AppState, checkpointer=InMemorySaver(), **planning_for())
    loop_out = await run_loop(loop, _loop_input(user_name="Ada"), _thread("a"))

    assert agent_out["user_name"] == loop_out["user_name"] == "Ada"
    tool_message = next(m for m in agent_out["messages"] if isinstance(m, ToolMessage))
    assert tool_message.content == "hello Ada"
    assert [record["result"] for record in loop_out["tool_logs"]] == ["hello Ada"]
    assert loop_out["status"] == "ok"
    # kept by the checkpointer for the thread's next run, as in create_agent
    assert loop.get_state(_thread("a")).values["user_name"] == "Ada"
    assert agent.get_state(_thread("a")).values["user_name"] == "Ada"


class TurnState(TypedDict, total=False):
    """A plain TypedDict: its key joins the state as an `AgentState` subclass's does."""

    turn: int


async def test_a_plain_typed_dict_state_schema_is_taken(run_loop: Any) -> None:
    loop, _ = _loop(state_schema=TurnState)
    out = await run_loop(loop, _loop_input(turn=3))
    assert out["turn"] == 3 and out["answer"] == "Done."


class Clashing(AgentState[Any]):
    status: NotRequired[int]


def test_a_state_schema_that_retypes_a_key_of_the_loop_is_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"another type: \['status'\]"):
        _loop(state_schema=Clashing)
    with pytest.raises(ConfigurationError, match="state_schema must be a TypedDict"):
        _loop(state_schema={"user_name": str})


# -- debug and cache ---------------------------------------------------------------------


async def test_debug_prints_each_step_as_create_agent_does(
    run_loop: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = create_agent(_agent_model(), [greet], debug=True)
    await run_loop(agent, _agent_input())
    agent_printed = capsys.readouterr().out
    loop, _ = _loop(debug=True)
    out = await run_loop(loop, _loop_input())
    loop_printed = capsys.readouterr().out

    assert agent.debug is loop.debug is True
    assert "[values]" in agent_printed and "[values]" in loop_printed
    assert "model" in agent_printed and "plan" in loop_printed
    assert out["answer"] == "Done."
    quiet, _ = _loop()
    assert quiet.debug is False


async def test_cache_is_the_compiled_graph_cache_and_not_the_result_cache(
    run_loop: Any,
) -> None:
    agent_cache: InMemoryCache[Any] = InMemoryCache()
    loop_cache: InMemoryCache[Any] = InMemoryCache()
    agent = create_agent(_agent_model(), [greet], cache=agent_cache)
    loop, _ = _loop(cache=loop_cache)
    assert agent.cache is agent_cache and loop.cache is loop_cache
    assert (await run_loop(agent, _agent_input()))["messages"][-1].content == "Done."
    out = await run_loop(loop, _loop_input())
    assert out["answer"] == "Done." and CALLS == ["greet", "greet"]
    uncached, _ = _loop()
    assert uncached.cache is None


# -- interrupt_before / interrupt_after with create_agent's node names -------------------


async def _stops(run_loop: Any, graph: Any, payload: Any, resume: Any) -> tuple[list[Any], Any]:
    """Run to the end, resuming at each stop: the nodes next at each, then the calls made."""
    config = _thread("i")
    out = await run_loop(graph, payload, config)
    stops: list[Any] = []
    while graph.get_state(config).next:
        stops.append(graph.get_state(config).next)
        stops.append(list(CALLS))  # the tool calls made so far
        out = await run_loop(graph, resume, config)
    return stops, out


@pytest.mark.parametrize("resume", [None, Command(resume="approved")], ids=["none", "command"])
async def test_interrupt_before_tools_stops_before_the_calls(
    run_loop: Any, planning_for: Callable[..., dict[str, Any]], resume: Any
) -> None:
    agent = create_agent(
        _agent_model(), [greet], checkpointer=InMemorySaver(), interrupt_before=["tools"]
    )
    agent_stops, agent_out = await _stops(run_loop, agent, _agent_input(), resume)
    CALLS.clear()
    loop, _ = _loop(checkpointer=InMemorySaver(), interrupt_before=["tools"], **planning_for())
    loop_stops, loop_out = await _stops(run_loop, loop, _loop_input(), resume)

    assert agent_stops == [("tools",), []]  # once, before the tool ran
    assert loop_stops == [("execute",), []]
    assert agent_out["messages"][-1].content == loop_out["answer"] == "Done."
    assert CALLS == ["greet"] and loop_out["status"] == "ok"


@pytest.mark.parametrize("resume", [None, Command(resume="approved")], ids=["none", "command"])
async def test_interrupt_after_model_stops_after_each_decision(
    run_loop: Any, planning_for: Callable[..., dict[str, Any]], resume: Any
) -> None:
    agent = create_agent(
        _agent_model(), [greet], checkpointer=InMemorySaver(), interrupt_after=["model"]
    )
    agent_stops, agent_out = await _stops(run_loop, agent, _agent_input(), resume)
    CALLS.clear()
    loop, _ = _loop(checkpointer=InMemorySaver(), interrupt_after=["model"], **planning_for())
    loop_stops, loop_out = await _stops(run_loop, loop, _loop_input(), resume)

    # after the model chose the tool, before it ran; create_agent's last model call is
    # its answer, the loop's last plan is followed by the answer model: one stop more
    assert agent_stops == [("tools",), []]
    assert loop_stops == [("execute",), [], ("answer",), ["greet"]]
    assert agent_out["messages"][-1].content == loop_out["answer"] == "Done."
    assert CALLS == ["greet"]


async def test_interrupt_before_model_and_after_tools(run_loop: Any) -> None:
    agent = create_agent(
        _agent_model(),
        [greet],
        checkpointer=InMemorySaver(),
        interrupt_before=["model"],
        interrupt_after=["tools"],
    )
    agent_stops, _ = await _stops(run_loop, agent, _agent_input(), None)
    CALLS.clear()
    loop, _ = _loop(
        checkpointer=InMemorySaver(), interrupt_before=["model"], interrupt_after=["tools"]
    )
    loop_stops, out = await _stops(run_loop, loop, _loop_input(), None)

    # before the first model call, then once after the tools, which is before the next
    assert agent_stops == [("model",), [], ("model",), ["greet"]]
    assert loop_stops == [("plan",), [], ("plan",), ["greet"]]
    assert out["answer"] == "Done."


def test_an_unknown_interrupt_name_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigurationError, match="interrupt_before names no node") as raised:
        _loop(checkpointer=InMemorySaver(), interrupt_before=["agent"])
    assert "'agent'" in str(raised.value)
    for name in ("'plan'", "'execute'", "'answer'", "'model' (plan)", "'tools' (execute)"):
        assert name in str(raised.value)
    with pytest.raises(ConfigurationError, match=r"'tools' \(call_tool\)"):
        _loop(checkpointer=InMemorySaver(), interrupt_after=["tool"])


# -- dict tools ---------------------------------------------------------------------------


async def test_dict_tools_are_bound_after_the_tools_and_never_run(run_loop: Any) -> None:
    weather_call = {"name": "get_weather", "args": {"city": "Oslo"}, "id": "call_1"}
    agent_model = ScriptedChatModel([AIMessage("", tool_calls=[weather_call]), "No weather."])
    agent = create_agent(agent_model, [greet, WEATHER, WEB_SEARCH])
    agent_out = await run_loop(agent, _agent_input())
    planner = ScriptedChatModel(
        [
            plan_reply("execute", [{"tool_name": "get_weather", "tool_kwargs": {"city": "Oslo"}}]),
            "No weather.",  # a native planner's text reply is the answer
        ]
    )
    loop = create_tool_loop(planner, [greet, WEATHER, WEB_SEARCH], plan_mode="native")
    loop_out = await run_loop(loop, _loop_input())

    # bound as create_agent binds them: the tools, then the dict tools as given
    agent_bound, loop_bound = (
        model.request_options[0]["tools"] for model in (agent_model, planner)
    )
    assert agent_bound[1:] == loop_bound[1:] == [WEATHER, WEB_SEARCH]
    assert agent_bound[0]["function"]["name"] == loop_bound[0]["function"]["name"] == "greet"
    # a call to one is answered as an unknown tool and the model is asked again
    refusal = next(m for m in agent_out["messages"] if isinstance(m, ToolMessage))
    assert refusal.status == "error" and "get_weather is not a valid tool" in refusal.content
    assert "unknown: get_weather" in planner.requests[1][-1].content
    assert agent_model.request_count == 2 and planner.request_count == 2
    assert agent_out["messages"][-1].content == loop_out["answer"] == "No weather."
    assert loop_out["tool_logs"] == [] and CALLS == []


async def test_dict_tools_without_native_planning_are_named_in_a_warning(
    run_loop: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="agentloop.policy"):
        loop, planner = _loop(tools=[greet, WEATHER, WEB_SEARCH], plan_mode="json")
    out = await run_loop(loop, _loop_input())
    warned = [record.getMessage() for record in caplog.records]
    assert any("get_weather, web_search_preview are not offered" in line for line in warned)
    assert out["answer"] == "Done." and CALLS == ["greet"]
    assert "get_weather" not in planner.requests[0][0].content  # not in its tool list


def test_a_dict_tool_named_like_a_tool_is_refused() -> None:
    twin = {**WEATHER, "function": {**WEATHER["function"], "name": "greet"}}  # type: ignore[dict-item]
    with pytest.raises(ConfigurationError, match="two tools are named 'greet'"):
        _loop(tools=[greet, twin], plan_mode="native")
