"""LangChain's tool conventions on a tool loop, as they behave under `create_agent`.

Each test runs the same small app through `create_agent` and through `create_tool_loop`
(both plan modes, `invoke` and `ainvoke`, an `InMemorySaver`), with scripted models making
the same tool calls, and checks the same effect: model calls, tool executions, the final
messages and answer, the state's keys.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, NotRequired

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, AgentState, ToolRetryMiddleware
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, Tool, ToolException, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import InjectedState
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from agentloop import GovernanceOptions, ModelOptions, ToolPolicy, ToolRetry, create_tool_loop
from agentloop.testing import ScriptedChatModel, plan_reply, tool_call_turns

Round = list[tuple[str, dict[str, Any]]]

EXECUTED: list[str] = []
"""Every execution of a tool body, by tool name."""


class AppState(AgentState[Any]):
    user_name: NotRequired[str]


def _thread(name: str) -> RunnableConfig:
    return {"configurable": {"thread_id": name}}


def _kinds(messages: list[BaseMessage]) -> list[str]:
    names = []
    for message in messages:
        name = type(message).__name__.removesuffix("Message")
        if isinstance(message, AIMessage) and message.tool_calls:
            name += "(tool_calls)"
        names.append(name)
    return names


def _agent_model(rounds: list[Round], answer: str | None = "the answer") -> ScriptedChatModel:
    script: list[AIMessage | str] = [*tool_call_turns(rounds)]
    return ScriptedChatModel([*script, *([answer] if answer is not None else [])])


def _planner(rounds: list[Round], *, respond: bool = True) -> ScriptedChatModel:
    script: list[str | AIMessage] = [
        plan_reply("execute", [{"tool_name": name, "tool_kwargs": args} for name, args in calls])
        for calls in rounds
    ]
    return ScriptedChatModel([*script, *([plan_reply("response")] if respond else [])])


def _loop(
    planner: ScriptedChatModel,
    answerer: ScriptedChatModel,
    tools: list[Any],
    plan_mode: str,
    **kwargs: Any,
) -> Any:
    return create_tool_loop(
        planner,
        tools,
        plan_mode=plan_mode,  # type: ignore[arg-type]
        checkpointer=InMemorySaver(),
        models=ModelOptions(answer_model=answerer),
        **kwargs,
    )


def _question(text: str) -> dict[str, Any]:
    return {"messages": [HumanMessage(text)]}


# -- return_direct -------------------------------------------------------------------------


@tool(return_direct=True)
def order_status(order_id: str) -> str:
    """The shipping status of an order, shown to the user as it is."""
    EXECUTED.append("order_status")
    return f"order {order_id}: shipped"


@tool
def weather(city: str) -> str:
    """Today's weather in a city."""
    EXECUTED.append("weather")
    return f"sunny in {city}"


async def test_a_return_direct_tool_ends_the_run_with_its_output(
    run_loop: Any, plan_mode: str
) -> None:
    rounds: list[Round] = [[("weather", {"city": "Oslo"})], [("order_status", {"order_id": "7"})]]
    EXECUTED.clear()
    model = _agent_model(rounds, answer=None)
    agent = create_agent(model, [weather, order_status], checkpointer=InMemorySaver())
    theirs = await run_loop(agent, _question("Where is order 7?"), _thread("rd-agent"))
    agent_executed = list(EXECUTED)

    EXECUTED.clear()
    planner = _planner(rounds, respond=False)
    answerer = ScriptedChatModel(["never asked"])
    graph = _loop(planner, answerer, [weather, order_status], plan_mode)
    ours = await run_loop(graph, _question("Where is order 7?"), _thread("rd-loop"))

    assert EXECUTED == agent_executed == ["weather", "order_status"]
    assert planner.request_count == model.request_count == 2
    assert answerer.request_count == 0
    assert _kinds(ours["messages"]) == _kinds(theirs["messages"])
    last = ours["messages"][-1]
    assert isinstance(last, ToolMessage)
    assert last.content == theirs["messages"][-1].content == "order 7: shipped"
    assert ours["answer"] == "order 7: shipped"
    assert ours["status"] == "ok"


async def test_a_return_direct_tool_beside_another_tool_does_not_end_the_run(
    run_loop: Any, plan_mode: str
) -> None:
    rounds: list[Round] = [[("weather", {"city": "Oslo"}), ("order_status", {"order_id": "7"})]]
    model = _agent_model(rounds)
    agent = create_agent(model, [weather, order_status], checkpointer=InMemorySaver())
    theirs = await run_loop(agent, _question("Weather and order?"), _thread("rd2-agent"))
    planner, answerer = _planner(rounds), ScriptedChatModel(["the answer"])
    graph = _loop(planner, answerer, [weather, order_status], plan_mode)
    ours = await run_loop(graph, _question("Weather and order?"), _thread("rd2-loop"))
    assert model.request_count == 2 and answerer.request_count == 1
    assert _kinds(ours["messages"]) == _kinds(theirs["messages"])
    assert ours["answer"] == theirs["messages"][-1].content == "the answer"


# -- Command(update=...) -------------------------------------------------------------------


@tool
def remember_name(name: str, runtime: ToolRuntime) -> Command[Any]:
    """Remember the user's name."""
    EXECUTED.append("remember_name")
    message = ToolMessage(f"saved {name}", tool_call_id=runtime.tool_call_id)
    return Command(update={"user_name": name, "messages": [message]})


@tool
def greet(runtime: ToolRuntime) -> str:
    """Greet the user by the name the app keeps in its state."""
    EXECUTED.append("greet")
    return f"hello {runtime.state.get('user_name')}"


async def test_a_command_update_reaches_the_state_before_the_next_round(
    run_loop: Any, plan_mode: str
) -> None:
    rounds: list[Round] = [[("remember_name", {"name": "Bob"})], [("greet", {})]]
    EXECUTED.clear()
    model = _agent_model(rounds)
    agent = create_agent(
        model, [remember_name, greet], state_schema=AppState, checkpointer=InMemorySaver()
    )
    theirs = await run_loop(agent, _question("I am Bob. Greet me."), _thread("cmd-agent"))
    agent_executed = list(EXECUTED)

    EXECUTED.clear()
    planner, answerer = _planner(rounds), ScriptedChatModel(["the answer"])
    graph = _loop(planner, answerer, [remember_name, greet], plan_mode, state_schema=AppState)
    ours = await run_loop(graph, _question("I am Bob. Greet me."), _thread("cmd-loop"))

    assert EXECUTED == agent_executed == ["remember_name", "greet"]
    assert ours["user_name"] == theirs["user_name"] == "Bob"
    assert _kinds(ours["messages"]) == _kinds(theirs["messages"])

    def outcomes(messages: list[BaseMessage]) -> list[tuple[Any, ...]]:
        return [(m.content, m.status) for m in messages if isinstance(m, ToolMessage)]

    assert outcomes(ours["messages"]) == outcomes(theirs["messages"])
    assert outcomes(ours["messages"]) == [("saved Bob", "success"), ("hello Bob", "success")]
    assert [r["success"] for r in ours["tool_logs"]] == [True, True]
    assert planner.request_count == 3 and answerer.request_count == 1


@tool
def set_mood(mood: str) -> Command[Any]:
    """Set a state key the app does not have, and jump somewhere."""
    EXECUTED.append("set_mood")
    return Command(update={"mood": mood}, goto="model")


async def test_a_command_the_state_cannot_take_keeps_the_calls_outcome(
    run_loop: Any, plan_mode: str
) -> None:
    rounds: list[Round] = [[("set_mood", {"mood": "happy"})]]
    EXECUTED.clear()
    planner, answerer = _planner(rounds), ScriptedChatModel(["the answer"])
    graph = _loop(planner, answerer, [set_mood], plan_mode)
    out = await run_loop(graph, _question("Be happy."), _thread("cmd-unknown"))
    assert EXECUTED == ["set_mood"]  # ran once, never again
    [record] = out["tool_logs"]
    assert record["success"]  # it ran and took effect: the outcome is not lost
    notes = " ".join(record.get("notes") or [])
    assert "'mood'" in notes and "goto" in notes
    assert "mood" not in out
    assert out["answer"] == "the answer" and out["status"] == "ok"


# -- InjectedState / ToolRuntime.state: the conversation's messages ------------------------

SEEN: dict[str, list[str]] = {}


@tool
def transcript_shape(state: Annotated[dict[str, Any], InjectedState]) -> str:
    """The shape of the conversation so far, as the tool's injected state holds it."""
    SEEN["injected"] = _kinds(state["messages"])
    return "seen"


@tool
def transcript_runtime(runtime: ToolRuntime) -> str:
    """The shape of the conversation so far, as the tool's runtime state holds it."""
    SEEN["runtime"] = _kinds(runtime.state["messages"])
    return "seen"


async def test_injected_state_holds_the_conversation_messages(
    run_loop: Any, plan_mode: str
) -> None:
    rounds: list[Round] = [
        [("weather", {"city": "Oslo"})],
        [("transcript_shape", {}), ("transcript_runtime", {})],
    ]
    tools = [weather, transcript_shape, transcript_runtime]
    SEEN.clear()
    agent = create_agent(_agent_model(rounds), tools, checkpointer=InMemorySaver())
    await run_loop(agent, _question("Look back."), _thread("state-agent"))
    theirs = dict(SEEN)

    SEEN.clear()
    graph = _loop(_planner(rounds), ScriptedChatModel(["the answer"]), tools, plan_mode)
    await run_loop(graph, _question("Look back."), _thread("state-loop"))
    expected = ["Human", "AI(tool_calls)", "Tool", "AI(tool_calls)"]
    assert SEEN == theirs == {"injected": expected, "runtime": expected}


# -- ToolRetryMiddleware replaces the loop's own retries -----------------------------------


@tool
def get_quote(symbol: str) -> str:
    """A quote service that is down."""
    EXECUTED.append("get_quote")
    msg = f"quote service down for {symbol}"
    raise ConnectionError(msg)


def _retry_middleware() -> ToolRetryMiddleware:
    return ToolRetryMiddleware(max_retries=1, initial_delay=0, jitter=False)


async def test_tool_retry_middleware_retries_once_not_on_top_of_the_loops_retries(
    run_loop: Any, plan_mode: str
) -> None:
    rounds: list[Round] = [[("get_quote", {"symbol": "ACME"})]]
    EXECUTED.clear()
    agent = create_agent(
        _agent_model(rounds),
        [get_quote],
        middleware=[_retry_middleware()],
        checkpointer=InMemorySaver(),
    )
    theirs = await run_loop(agent, _question("ACME?"), _thread("retry-agent"))
    assert EXECUTED == ["get_quote", "get_quote"]

    EXECUTED.clear()
    graph = _loop(
        _planner(rounds),
        ScriptedChatModel(["the answer"]),
        [get_quote],
        plan_mode,
        middleware=[_retry_middleware()],
        governance=GovernanceOptions(
            policies={
                "get_quote": ToolPolicy(
                    idempotent=True, retry=ToolRetry(max_attempts=3, initial_delay_s=0)
                )
            }
        ),
    )
    ours = await run_loop(graph, _question("ACME?"), _thread("retry-loop"))
    assert EXECUTED == ["get_quote", "get_quote"]
    [record] = ours["tool_logs"]
    assert not record["success"] and record["attempts"] == 2
    [theirs_outcome] = [m for m in theirs["messages"] if isinstance(m, ToolMessage)]
    [ours_outcome] = [m for m in ours["messages"] if isinstance(m, ToolMessage)]
    assert ours_outcome.status == theirs_outcome.status == "error"
    assert "quote service down for ACME" in str(ours_outcome.content)


async def test_without_tool_retry_middleware_the_loops_own_retries_stand(
    run_loop: Any, plan_mode: str
) -> None:
    rounds: list[Round] = [[("get_quote", {"symbol": "ACME"})]]
    EXECUTED.clear()
    graph = _loop(
        _planner(rounds),
        ScriptedChatModel(["the answer"]),
        [get_quote],
        plan_mode,
        governance=GovernanceOptions(
            policies={
                "get_quote": ToolPolicy(
                    idempotent=True, retry=ToolRetry(max_attempts=3, initial_delay_s=0)
                )
            }
        ),
    )
    ours = await run_loop(graph, _question("ACME?"), _thread("retry-own"))
    assert EXECUTED == ["get_quote"] * 3
    [record] = ours["tool_logs"]
    assert record["attempts"] == 3


async def test_a_replayed_command_call_updates_the_state_again(
    run_loop: Any, plan_mode: str
) -> None:
    rounds: list[Round] = [[("remember_name", {"name": "Ann"})]]
    EXECUTED.clear()
    graph = _loop(
        ScriptedChatModel([*_planner(rounds).replies, *_planner(rounds).replies]),  # two runs
        ScriptedChatModel(["the answer", "the answer"]),
        [remember_name],
        plan_mode,
        state_schema=AppState,
        governance=GovernanceOptions(policies={"remember_name": ToolPolicy(idempotent=False)}),
    )
    request = {"user_input": "I am Ann.", "idempotency_key": "profile-1"}
    first = await run_loop(graph, request, _thread("cmd-first"))
    again = await run_loop(graph, request, _thread("cmd-again"))
    assert EXECUTED == ["remember_name"]  # the side-effect ledger replays the second
    [record] = again["tool_logs"]
    assert record["replayed"] is True
    assert first["user_name"] == again["user_name"] == "Ann"
    [outcome] = [m for m in again["messages"] if isinstance(m, ToolMessage)]
    assert outcome.content == "saved Ann"


async def test_a_command_passes_through_wrap_tool_call_middleware(
    run_loop: Any, plan_mode: str
) -> None:
    seen: list[str] = []

    class Watch(AgentMiddleware[Any, Any, Any]):
        """Note what the handler returned (sync and async, as create_agent needs both)."""

        def wrap_tool_call(
            self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Any]
        ) -> Any:
            result = handler(request)
            seen.append(type(result).__name__)
            return result

        async def awrap_tool_call(
            self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Any]
        ) -> Any:
            result = await handler(request)
            seen.append(type(result).__name__)
            return result

    watch = Watch()

    rounds: list[Round] = [[("remember_name", {"name": "Eve"})], [("greet", {})]]
    agent = create_agent(
        _agent_model(rounds),
        [remember_name, greet],
        middleware=[watch],
        state_schema=AppState,
        checkpointer=InMemorySaver(),
    )
    theirs = await run_loop(agent, _question("I am Eve."), _thread("cmd-mw-agent"))
    agent_seen = list(seen)
    seen.clear()
    graph = _loop(
        _planner(rounds),
        ScriptedChatModel(["the answer"]),
        [remember_name, greet],
        plan_mode,
        middleware=[watch],
        state_schema=AppState,
    )
    ours = await run_loop(graph, _question("I am Eve."), _thread("cmd-mw-loop"))
    assert seen == agent_seen == ["Command", "ToolMessage"]
    assert ours["user_name"] == theirs["user_name"] == "Eve"
    greeting = [m.content for m in ours["messages"] if isinstance(m, ToolMessage)]
    assert greeting == ["saved Eve", "hello Eve"]


@tool
def sign_up(name: str, runtime: ToolRuntime) -> Command[Any]:
    """Sign the user up, and leave a note in the conversation."""
    EXECUTED.append("sign_up")
    saved = ToolMessage(f"signed up {name}", tool_call_id=runtime.tool_call_id)
    note = AIMessage(f"Welcome, {name}.", id=f"welcome-{name}")
    return Command(update={"user_name": name, "messages": [saved, note]})


async def test_a_commands_other_messages_follow_its_tool_message(
    run_loop: Any, plan_mode: str
) -> None:
    rounds: list[Round] = [[("sign_up", {"name": "Ida"}), ("weather", {"city": "Oslo"})]]
    agent = create_agent(
        _agent_model(rounds),
        [sign_up, weather],
        state_schema=AppState,
        checkpointer=InMemorySaver(),
    )
    theirs = await run_loop(agent, _question("Sign me up."), _thread("cmd-notes-agent"))
    graph = _loop(
        _planner(rounds),
        ScriptedChatModel(["the answer"]),
        [sign_up, weather],
        plan_mode,
        state_schema=AppState,
    )
    ours = await run_loop(graph, _question("Sign me up."), _thread("cmd-notes-loop"))

    def shape(messages: list[BaseMessage]) -> list[tuple[str, Any]]:
        return [(kind, m.content) for kind, m in zip(_kinds(messages), messages, strict=True)]

    assert shape(ours["messages"])[2:] == shape(theirs["messages"])[2:]
    assert shape(ours["messages"])[2:5] == [
        ("Tool", "signed up Ida"),
        ("AI", "Welcome, Ida."),
        ("Tool", "sunny in Oslo"),
    ]
    assert ours["user_name"] == "Ida"
    assert all("state_update" not in record for record in ours["tool_logs"])


# -- tools without args_schema ---------------------------------------------------------------


class LookupTool(BaseTool):
    """A `BaseTool` subclass whose `_run` declares its arguments (no `args_schema`)."""

    name: str = "lookup"
    description: str = "Look a customer up by name."

    def _run(self, customer: str, limit: int = 3) -> str:
        EXECUTED.append(f"lookup {customer} {limit}")
        return f"{customer}: gold"


def _shout(text: str) -> str:
    EXECUTED.append(f"shout {text}")
    return text.upper()


SHOUT = Tool(name="shout", func=_shout, description="Say a text louder.")


async def test_tools_without_args_schema_take_the_arguments_create_agent_binds(
    run_loop: Any, plan_mode: str
) -> None:
    rounds: list[Round] = [
        [("lookup", {"customer": "Ann", "limit": 1}), ("shout", {"__arg1": "hi"})]
    ]
    EXECUTED.clear()
    model = _agent_model(rounds)
    agent = create_agent(model, [LookupTool(), SHOUT], checkpointer=InMemorySaver())
    theirs = await run_loop(agent, _question("Look Ann up and shout hi"), _thread("s-agent"))
    agent_executed = sorted(EXECUTED)

    EXECUTED.clear()
    planner, answerer = _planner(rounds), ScriptedChatModel(["the answer"])
    graph = _loop(planner, answerer, [LookupTool(), SHOUT], plan_mode)
    ours = await run_loop(graph, _question("Look Ann up and shout hi"), _thread("s-loop"))
    assert sorted(EXECUTED) == agent_executed == ["lookup Ann 1", "shout hi"]
    outcomes = [(m.status, m.content) for m in ours["messages"] if isinstance(m, ToolMessage)]
    assert outcomes == [
        (m.status, m.content) for m in theirs["messages"] if isinstance(m, ToolMessage)
    ]
    assert outcomes == [("success", "Ann: gold"), ("success", "HI")]


# -- a tool that turns its own errors into content -----------------------------------------


@tool
def charge_card(amount: int) -> str:
    """Charge the customer's card."""
    EXECUTED.append("charge_card")
    raise ToolException("card declined")


charge_card.handle_tool_error = True


async def test_a_tools_handled_error_is_a_failed_call(run_loop: Any, plan_mode: str) -> None:
    """`handle_tool_error=True`: the handler's text reaches the model as an error, once."""
    rounds: list[Round] = [[("charge_card", {"amount": 5})]]
    EXECUTED.clear()
    model = _agent_model(rounds)
    agent = create_agent(model, [charge_card], checkpointer=InMemorySaver())
    theirs = await run_loop(agent, _question("Charge 5"), _thread("handled-agent"))
    agent_executed = list(EXECUTED)

    EXECUTED.clear()
    graph = _loop(_planner(rounds), ScriptedChatModel(["the answer"]), [charge_card], plan_mode)
    ours = await run_loop(graph, _question("Charge 5"), _thread("handled-loop"))

    assert EXECUTED == agent_executed == ["charge_card"]
    their_result, our_result = (
        next(m for m in out["messages"] if isinstance(m, ToolMessage)) for out in (theirs, ours)
    )
    assert their_result.status == our_result.status == "error"
    assert their_result.content == "card declined"
    assert "card declined" in str(our_result.content)  # in the loop's error envelope
    record = ours["tool_logs"][0]
    assert (record["status"], record["error_type"], record["attempts"]) == (
        "failed",
        "internal_error",
        1,
    )
    assert record["error"] == "card declined"
    assert ours["answer"] == theirs["messages"][-1].content == "the answer"


@pytest.mark.parametrize(
    ("handler", "seen"),
    [
        (True, "out of stock"),
        ("The shop cannot say now.", "The shop cannot say now."),
        (lambda error: f"handled: {error}", "handled: out of stock"),
    ],
)
async def test_a_handled_tool_keeps_its_results_whole_and_its_handlers_text(
    run_loop: Any, handler: Any, seen: str
) -> None:
    """A dict result stays a dict (for `$N`); each kind of handler's text is the failure."""

    @tool
    def get_stock(item: str) -> dict[str, Any]:
        """The stock of an item."""
        if item == "gone":
            raise ToolException("out of stock")
        return {"item": item, "count": 3}

    get_stock.handle_tool_error = handler
    calls = [("get_stock", {"item": "pens"}), ("get_stock", {"item": "gone"})]
    model = _agent_model([calls])
    theirs = await run_loop(create_agent(model, [get_stock]), _question("Stock?"))
    graph = _loop(_planner([calls]), ScriptedChatModel(["the answer"]), [get_stock], "json")
    ours = await run_loop(graph, _question("Stock?"), _thread("handled-kinds"))

    their_results = [m for m in theirs["messages"] if isinstance(m, ToolMessage)]
    assert [m.status for m in their_results] == ["success", "error"]
    assert their_results[1].content == seen
    found, gone = ours["tool_logs"]
    assert found["status"] == "succeeded" and found["result"] == {"item": "pens", "count": 3}
    assert (gone["status"], gone["error_type"], gone["error"]) == ("failed", "internal_error", seen)
