"""Conversations across turns, prompt overrides, bounded planning and the graph's schemas."""

from __future__ import annotations

import itertools
import json
import string
from pathlib import Path
from typing import Any

import pytest
from langchain.agents.middleware import ModelCallLimitMiddleware, before_model
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from parity import agent_of, ask, kinds, loop_of, thread, tool_calls
from pydantic import BaseModel, Field

from agentloop import (
    ConfigurationError,
    GovernanceOptions,
    ModelOptions,
    PlanningOptions,
    ToolPolicy,
    create_tool_loop,
)
from agentloop.errors import PromptTemplateError
from agentloop.planning.templates import PromptFile
from agentloop.testing import ScriptedChatModel, plan_reply, planning_round


@tool
def get_weather(city: str) -> str:
    """Today's weather of a city."""
    return {"lumen bay": "Lumen Bay: clear, 18 C", "paris": "Paris: rain, 11 C"}.get(
        city.lower(), "unknown city"
    )


def weather_planner(messages: list[BaseMessage]) -> str:
    """Plans one weather call for the city the request names, then responds."""
    if planning_round(messages) != 0:
        return plan_reply("response")
    city = "Paris" if "Paris" in asked(messages) else "Lumen Bay"
    return plan_reply("execute", [{"tool_name": "get_weather", "tool_kwargs": {"city": city}}])


def asked(messages: list[BaseMessage]) -> str:
    """The request a planner or answer request is for: its last message from the user."""
    return next(text for role, text in reversed(turns_of(messages)) if role == "user")


def turns_of(request: list[BaseMessage]) -> list[tuple[str, str]]:
    """The conversation a request shows: the user's messages and the answers, in order.

    The loop's own messages are left out: its system message, a JSON planner's plans
    (`{...}`), results (`<tool_results>`, the answer's results) and round (`<round>`).
    """
    turns = []
    for message in request[1:]:
        text = str(message.content)
        if message.type == "human" and not text.startswith(("<", "The tools' results")):
            turns.append(("user", text))
        elif isinstance(message, AIMessage) and text and not text.startswith("{"):
            turns.append(("assistant", text))
    return turns


def chat_app(planner: ScriptedChatModel, answerer: ScriptedChatModel, **options: Any) -> Any:
    loop = create_tool_loop(
        planner, [get_weather], models=ModelOptions(answer_model=answerer), **options
    )
    app = StateGraph(MessagesState)
    app.add_node("agent", loop)
    app.add_edge(START, "agent")
    return app.compile(checkpointer=InMemorySaver())


def section(message: BaseMessage, tag: str) -> str:
    return str(message.content).split(f"<{tag}>")[1].split(f"</{tag}>")[0].strip()


# --- conversation context ------------------------------------------------------------------


async def test_a_follow_up_question_is_planned_and_answered_with_the_first_turn(
    run_loop: Any,
) -> None:
    planner = ScriptedChatModel(responder=weather_planner)

    def answer(messages: list[BaseMessage]) -> str:
        if asked(messages) == "And in Paris?":
            return "In Paris it rains, 11 C."
        return "In Lumen Bay it is clear, 18 C."

    answerer = ScriptedChatModel(responder=answer)
    app = chat_app(planner, answerer)
    config = {"configurable": {"thread_id": "chat"}}

    await run_loop(app, {"messages": [HumanMessage("What is the weather in Lumen Bay?")]}, config)
    out = await run_loop(app, {"messages": [HumanMessage("And in Paris?")]}, config)

    assert out["messages"][-1].content == "In Paris it rains, 11 C."
    follow_up_plan = planner.requests[2]
    assert turns_of(follow_up_plan) == [
        ("user", "What is the weather in Lumen Bay?"),
        ("assistant", "In Lumen Bay it is clear, 18 C."),
        ("user", "And in Paris?"),
    ]
    # the first turn's call and result too, as the transcript holds them
    shown = "\n".join(str(message.content) for message in follow_up_plan)
    assert '"tool_name": "get_weather"' in shown and "Lumen Bay: clear" in shown
    answer_request = answerer.requests[-1]
    assert turns_of(answer_request)[0] == ("user", "What is the weather in Lumen Bay?")
    assert "Paris: rain, 11 C" in str(answer_request[-1].content)
    assert "Lumen Bay: clear" not in str(answer_request)  # the answer reads its own results
    assert turns_of(planner.requests[0]) == [("user", "What is the weather in Lumen Bay?")]


async def test_by_default_the_models_see_the_whole_conversation(run_loop: Any) -> None:
    planner = ScriptedChatModel(responder=weather_planner)
    answerer = ScriptedChatModel(responder=lambda messages: f"answer to {asked(messages)}")
    app = chat_app(planner, answerer)  # as create_agent's model, every earlier turn in view
    config = {"configurable": {"thread_id": "chat"}}
    questions = [f"question {n} about Lumen Bay" for n in range(1, 8)]
    for question in questions:
        await run_loop(app, {"messages": [HumanMessage(question)]}, config)
    earlier = []
    for question in questions[:-1]:
        earlier += [("user", question), ("assistant", f"answer to {question}")]
    for request in (planner.requests[-2], answerer.requests[-1]):
        assert turns_of(request) == [*earlier, ("user", questions[-1])]  # none trimmed

    trimmed = ScriptedChatModel(responder=weather_planner)
    answerer = ScriptedChatModel(responder=lambda messages: "noted")
    app = chat_app(trimmed, answerer, planning=PlanningOptions(history_turns=2))
    for question in questions:
        await run_loop(app, {"messages": [HumanMessage(question)]}, config)
    for request in (trimmed.requests[-2], answerer.requests[-1]):
        assert [text for _, text in turns_of(request)] == [
            questions[4],
            "noted",
            questions[5],
            "noted",
            questions[6],
        ]


async def test_the_conversation_budget_keeps_the_newest_turns(run_loop: Any) -> None:
    planner = ScriptedChatModel(responder=weather_planner)
    answerer = ScriptedChatModel(responder=lambda _messages: "noted")
    app = chat_app(planner, answerer, planning=PlanningOptions(history_turns=1))
    config = {"configurable": {"thread_id": "chat"}}
    for question in ("first question", "second question", "third question"):
        await run_loop(app, {"messages": [HumanMessage(question)]}, config)
    conversation = str(planner.requests[-2])  # the third run's first plan
    assert "second question" in conversation
    assert "first question" not in conversation


@before_model
def keep_five_messages(state: Any, runtime: Any) -> dict[str, Any] | None:
    """Trim the thread to its newest five messages, as an app's own trimming hook would."""
    messages = state["messages"]
    if len(messages) <= 5:
        return None
    return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *messages[-5:]]}


async def test_a_before_model_hook_trims_the_conversation_as_under_create_agent(
    run_loop: Any,
) -> None:
    agent = agent_of([], [], [keep_five_messages], turns=5)
    loop = loop_of([], [], [keep_five_messages], turns=5)
    for n in range(1, 6):
        theirs = await run_loop(agent.graph, ask(f"question {n}"), thread("agent"))
        ours = await run_loop(loop.graph, ask(f"question {n}"), thread("loop"))
    kept = ["question 3", "Done.", "question 4", "Done.", "question 5", "Done."]
    assert [m.content for m in theirs["messages"]] == kept
    assert [m.content for m in ours["messages"]] == kept
    assert [m.content for m in agent.model.requests[-1]] == kept[:-1]
    for request in (loop.planner.requests[-1], loop.answerer.requests[-1]):
        assert [text for _, text in turns_of(request)] == kept[:-1]


async def test_the_conversation_character_budget_drops_the_oldest_turns(run_loop: Any) -> None:
    planner = ScriptedChatModel(responder=weather_planner)
    answerer = ScriptedChatModel(responder=lambda _messages: "noted")
    app = chat_app(planner, answerer, planning=PlanningOptions(history_chars=60))
    config = {"configurable": {"thread_id": "chat"}}
    for question in ("a" * 50, "b" * 20, "the request"):
        await run_loop(app, {"messages": [HumanMessage(question)]}, config)
    for request in (planner.requests[-2], answerer.requests[-1]):
        assert [text for _, text in turns_of(request)] == ["b" * 20, "noted", "the request"]


# --- PlanningOptions(prompts=) ------------------------------------------------------------


TERSE = "Plan tersely. At most $max_rounds rounds. Shape: $plan_example"


async def test_a_prompt_given_as_text_replaces_the_shipped_one(run_loop: Any) -> None:
    planner = ScriptedChatModel([plan_reply("response"), "ok"])
    graph = create_tool_loop(
        planner,
        [get_weather],
        planning=PlanningOptions(prompts={"plan_system": TERSE}),
    )
    await run_loop(graph, {"user_input": "hi"})
    system = str(planner.requests[0][0].content)
    assert system.startswith("Plan tersely. At most 5 rounds. Shape: {")
    assert '"tool_name": "get_weather"' in system


async def test_a_prompt_file_replaces_the_shipped_one(run_loop: Any, tmp_path: Path) -> None:
    template = tmp_path / "answer_system.md"
    template.write_text("Answer like a pirate. $user_extra_requirement\n", encoding="utf-8")
    answerer = ScriptedChatModel(["arr"])
    graph = create_tool_loop(
        ScriptedChatModel([plan_reply("response")]),
        [get_weather],
        models=ModelOptions(answer_model=answerer),
        planning=PlanningOptions(prompts={"answer_system": str(template)}),
    )
    await run_loop(graph, {"user_input": "hi"})
    assert answerer.requests[0][0].content == "Answer like a pirate."


@pytest.mark.parametrize(
    ("prompts", "message"),
    [
        ({"plan_system": "Round $round_nubmer"}, r"uses \$round_nubmer, which it may not"),
        ({"plan_sytem": "text"}, "no template named 'plan_sytem'"),
        ({"answer_results": "broken $"}, "invalid placeholder"),
        ({"answer_results": "/nowhere/answer.md"}, "cannot read /nowhere/answer.md"),
        ({"answer_results": "  "}, "must be non-empty text"),
        ({"answer_user": "Asked: $user_input"}, "no template named 'answer_user'"),
    ],
)
def test_a_bad_prompt_is_refused_when_the_loop_is_built(
    prompts: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        planning = PlanningOptions(prompts=prompts)
        create_tool_loop(ScriptedChatModel([]), [get_weather], planning=planning)


# --- the plan prompt's example -------------------------------------------------------------


async def test_the_plan_example_uses_the_loops_real_tool_and_argument_names(
    run_loop: Any,
) -> None:
    planner = ScriptedChatModel([plan_reply("response"), "ok"])
    await run_loop(create_tool_loop(planner, [get_weather]), {"user_input": "hi"})
    system = str(planner.requests[0][0].content)
    assert '"tool_name": "get_weather", "tool_kwargs": {"city": ' in system
    assert "one of the available tool names" not in system
    assert '"argument": "value"' not in system


class _Order(BaseModel):
    title: str = Field(description="The book's title")
    copies: int = Field(default=1, description="How many")


async def test_the_plan_prompts_tool_list_is_compact_json(run_loop: Any) -> None:
    @tool(args_schema=_Order)
    def order_book(title: str, copies: int = 1) -> str:
        """Order a book."""
        return "ordered"

    planner = ScriptedChatModel([plan_reply("response"), "ok"])
    governance = GovernanceOptions(policies={"order_book": ToolPolicy(read_only=False)})
    graph = create_tool_loop(planner, [get_weather, order_book], governance=governance)
    await run_loop(graph, {"user_input": "hi"})
    prompt = str(planner.requests[0][0].content)  # the list is the system message's end
    listed = prompt.split("<available_tools>\n")[1].split("\n</available_tools>")[0]
    assert len(listed.splitlines()) == 2  # one tool per line
    weather, order = json.loads(listed)
    assert weather == {
        "name": "get_weather",
        "description": "Today's weather of a city.",
        "args_schema": {"properties": {"city": {"type": "string"}}, "required": ["city"]},
        "side_effects": False,
    }
    # a property named "title" is an argument, not an annotation: it stays
    assert order["args_schema"]["properties"] == {
        "title": {"description": "The book's title", "type": "string"},
        "copies": {"default": 1, "description": "How many", "type": "integer"},
    }
    assert order["side_effects"] is True and order["idempotent"] is False
    assert "read_only" not in weather and "title" not in json.dumps(
        order["args_schema"]["properties"]["copies"]
    )


async def test_native_planners_bound_tools_have_compact_schemas(run_loop: Any) -> None:
    @tool(args_schema=_Order)
    def order_book(title: str, copies: int = 1) -> str:
        """Order a book."""
        return "ordered"

    planner = ScriptedChatModel(["Nothing to call."])
    governance = GovernanceOptions(policies={"order_book": ToolPolicy(read_only=False)})
    graph = create_tool_loop(
        planner,
        [get_weather, order_book],
        models=ModelOptions(answer_model=ScriptedChatModel(["ok"])),
        governance=governance,
        plan_mode="native",
    )
    await run_loop(graph, {"user_input": "hi"})
    bound = {item["function"]["name"]: item["function"] for item in planner.bound_tools}
    assert bound["get_weather"] == {
        "name": "get_weather",
        "description": "Today's weather of a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    }
    order = bound["order_book"]
    assert order["description"].startswith("Order a book.\n(has side effects")
    assert order["parameters"]["properties"]["title"] == {
        "description": "The book's title",
        "type": "string",
    }


async def test_the_plan_system_prompt_is_the_same_every_round(run_loop: Any) -> None:
    planner = ScriptedChatModel(responder=weather_planner)
    out = await run_loop(
        create_tool_loop(
            planner, [get_weather], models=ModelOptions(answer_model=ScriptedChatModel(["ok"]))
        ),
        {"user_input": "weather in Paris?"},
    )
    assert out["round_state"]["round_index"] == 1
    first, second = planner.requests
    assert first[0].content == second[0].content
    # what changes between rounds comes last: the requests share all but the round
    assert second[: len(first) - 1] == first[:-1]


async def test_the_plan_request_only_grows_at_its_end(run_loop: Any) -> None:
    @tool
    def get_page(n: int) -> str:
        """Page n of a report."""
        return f"PAGE-{n} " * 40

    plans = [plan_reply("execute", [{"tool_name": "get_page", "tool_kwargs": {"n": n}}])
             for n in range(1, 5)]  # fmt: skip
    planner = ScriptedChatModel([*plans, plan_reply("response")])
    await run_loop(
        create_tool_loop(
            planner,
            [get_page],
            models=ModelOptions(answer_model=ScriptedChatModel(["ok"])),
            planning=PlanningOptions(keep_tool_results=4),  # no block omitted yet
        ),
        {"user_input": "read pages 1 to 4"},
    )
    for before, after in itertools.pairwise(planner.requests):
        assert after[: len(before) - 1] == before[:-1]  # all but the round is reused
        assert len(after) == len(before) + 2  # the round's plan and its results


# --- bounded planning ----------------------------------------------------------------------


def weather_plan(city: str) -> str:
    return plan_reply("execute", [{"tool_name": "get_weather", "tool_kwargs": {"city": city}}])


async def test_planner_calls_per_run_are_bounded(run_loop: Any) -> None:
    # each city twice: the repeat is a duplicate, so its round is rolled back and replanned
    cities = ["Paris", "Paris", "Lumen Bay", "Lumen Bay", "Rome", "Rome"]
    planner = ScriptedChatModel([weather_plan(city) for city in cities])
    graph = create_tool_loop(
        planner,
        [get_weather],
        models=ModelOptions(answer_model=ScriptedChatModel(["partial"])),
        max_rounds=3,
        planning=PlanningOptions(max_consecutive_rollbacks=1, plan_reasks=0),
    )
    out = await run_loop(graph, {"user_input": "weather everywhere"})
    # (max_rounds + max_consecutive_rollbacks) * (1 + plan_reasks) = (3 + 1) * 1
    assert len(planner.requests) == 4
    assert len(out["rollbacks"]) == 2  # two rounds ran, two were rolled back
    assert out["status"] == "planner_failed"
    assert out["status_reason"] == "the run reached its limit of 4 planner calls"
    assert out["answer"] == "partial"  # rounds ran: the answer uses their results


async def test_model_call_limit_middleware_ends_a_run_as_create_agent_ends_it(
    run_loop: Any,
) -> None:
    endless = [[("get_weather", {"city": city})] for city in ("Paris", "Lumen Bay", "Rome", "Oslo")]

    def limit() -> ModelCallLimitMiddleware:
        return ModelCallLimitMiddleware(run_limit=3, exit_behavior="end")

    # work that never ends: three model calls on both sides, then the same ending
    agent = agent_of([get_weather], endless, [limit()])
    theirs = await run_loop(agent.graph, ask("Weather everywhere?"), thread("agent"))
    loop = loop_of([get_weather], endless, [limit()])
    ours = await run_loop(loop.graph, ask("Weather everywhere?"), thread("loop"))
    assert agent.model.request_count == loop.planner.request_count == 3
    assert loop.answerer.request_count == 0
    assert ours["status"] == "ended"
    ending = "Model call limits exceeded: run limit (3/3)"
    assert ours["answer"] == ours["messages"][-1].content == theirs["messages"][-1].content
    assert ours["answer"] == ending
    assert tool_calls(ours["messages"]) == tool_calls(theirs["messages"])
    assert tool_calls(ours["messages"]) == [calls[0] for calls in endless[:3]]

    # two rounds of work: create_agent answers in its third call; the loop asks one call
    # more (the plan that decides to answer, then the answer), so it needs a limit of 4
    two_rounds = endless[:2]
    agent = agent_of([get_weather], two_rounds, [limit()])
    theirs = await run_loop(agent.graph, ask("Weather in two cities?"), thread("agent"))
    assert agent.model.request_count == 3 and theirs["messages"][-1].content == "Done."
    loop = loop_of([get_weather], two_rounds, [limit()])
    ours = await run_loop(loop.graph, ask("Weather in two cities?"), thread("loop"))
    assert (loop.planner.request_count, loop.answerer.request_count) == (3, 0)
    assert (ours["status"], ours["answer"]) == ("ended", ending)
    loop = loop_of([get_weather], two_rounds, [ModelCallLimitMiddleware(run_limit=4)])
    ours = await run_loop(loop.graph, ask("Weather in two cities?"), thread("loop"))
    assert (ours["status"], ours["answer"]) == ("ok", "Done.")
    assert kinds(ours["messages"]) == kinds(theirs["messages"])


async def test_a_tool_mode_planner_that_keeps_failing_is_bounded(run_loop: Any) -> None:
    junk = plan_reply("execute", [{"tool_name": "no_such_tool", "tool_kwargs": {}}])
    planner = ScriptedChatModel(responder=lambda _messages: junk)
    answerer = ScriptedChatModel(["never"])
    graph = create_tool_loop(
        planner, [get_weather], models=ModelOptions(answer_model=answerer), plan_mode="tool"
    )
    out = await run_loop(graph, {"user_input": "hi"})
    assert len(planner.requests) == 3  # the first plan and two re-asks (the default)
    assert out["status"] == "planner_failed"
    assert "unknown: no_such_tool" in out["status_reason"]
    assert answerer.requests == []


def test_planning_options_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="plan_reasks must be an int >= 0"):
        create_tool_loop(ScriptedChatModel([]), planning=PlanningOptions(plan_reasks=-1))
    with pytest.raises(ConfigurationError, match="max_consecutive_rollbacks must be an int >= 0"):
        PlanningOptions(max_consecutive_rollbacks=-1)
    with pytest.raises(TypeError, match="max_plan_calls"):  # ModelCallLimitMiddleware instead
        PlanningOptions(max_plan_calls=3)  # type: ignore[call-arg]


# --- plan_mode="tool" ----------------------------------------------------------------------


class StrictToolModel(ScriptedChatModel):
    """A model whose tool binding offers `strict`, as OpenAI's does."""

    def bind_tools(
        self, tools: Any, *, tool_choice: Any = None, strict: Any = None, **kw: Any
    ) -> Any:
        self.__dict__.setdefault("bindings", []).append((tools, tool_choice, strict))
        return super().bind_tools(tools, tool_choice=tool_choice, **kw)


async def test_tool_mode_asks_for_strict_output_where_the_model_offers_it(run_loop: Any) -> None:
    command = {"purpose": "p", "tool_name": "get_weather", "tool_kwargs": '{"city": "Paris"}',
               "todo_suggestion": ""}  # fmt: skip
    from langchain_core.messages import AIMessage

    plan = AIMessage("", tool_calls=[{"name": "PlanDecision", "id": "1",
                                      "args": {"next_action": "execute",
                                               "execution_commands": [command]}}])  # fmt: skip
    done = AIMessage("", tool_calls=[{"name": "PlanDecision", "id": "2",
                                      "args": {"next_action": "response",
                                               "execution_commands": []}}])  # fmt: skip
    model = StrictToolModel([plan, done, "Paris: rain."])
    out = await run_loop(
        create_tool_loop(model, [get_weather], plan_mode="tool"),
        {"user_input": "?"},
    )
    assert out["round_state"]["done_plans"][0]["result"] == "Paris: rain, 11 C"
    tools, choice, strict = model.__dict__["bindings"][0]
    assert (choice, strict) == ("PlanDecision", True)
    schema = tools[0]["function"]["parameters"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["execution_commands"]["items"]["additionalProperties"] is False


# --- schemas -------------------------------------------------------------------------------


def test_input_and_output_json_schemas() -> None:
    graph = create_tool_loop(ScriptedChatModel([]), [get_weather])
    inputs = graph.get_input_jsonschema()
    assert {"user_input", "user_extra_requirement", "messages"} <= set(inputs["properties"])
    outputs = graph.get_output_jsonschema()
    assert {"answer", "status", "status_reason", "round_state", "messages"} <= set(
        outputs["properties"]
    )
    assert "context" not in inputs["properties"]
    context = graph.get_context_jsonschema()
    assert context is not None
    assert {"model", "max_rounds", "plan_mode"} <= set(context["properties"])
    app = StateGraph(MessagesState)
    app.add_node("agent", graph)
    app.add_edge(START, "agent")
    assert "messages" in app.compile().get_input_jsonschema()["properties"]


# --- what each request holds -------------------------------------------------------------


@pytest.mark.parametrize("plan_mode", ["json", "native"])
async def test_a_plan_request_shows_no_empty_section(run_loop: Any, plan_mode: str) -> None:
    planner = ScriptedChatModel(responder=weather_planner)
    answerer = ScriptedChatModel(["ok", "ok"])
    graph = create_tool_loop(
        planner, [get_weather], models=ModelOptions(answer_model=answerer), plan_mode=plan_mode
    )
    await run_loop(graph, {"user_input": "weather in Paris?"})
    first = "\n".join(str(message.content) for message in planner.requests[0])
    for tag in ("user_extra_requirement", "tool_results", "conversation", "rounds"):
        assert f"<{tag}>\n" not in first
    assert "(none" not in first
    await run_loop(graph, {"user_input": "weather in Paris?", "user_extra_requirement": "in C"})
    system = str(planner.requests[-1][0].content)
    assert '<user_extra_requirement>\n"in C"\n</user_extra_requirement>' in system


def test_the_answer_request_explains_only_what_its_results_hold() -> None:
    from agentloop.nodes.answer_call import to_action_results
    from agentloop.planning.templates import result_notes, to_prompt_json

    plain = result_notes(to_prompt_json(to_action_results([_record("fine")])))
    assert plain == ""
    failed = {**_record("boom"), "success": False, "error": "boom"}
    stub = {**_record("x"), "fallback": "stub"}
    noted = result_notes(to_prompt_json(to_action_results([failed, stub])))
    assert '"error" key' in noted and '"fallback" key' in noted
    assert "attachment HANDLE" not in noted


def _record(purpose: str) -> Any:
    return {
        "call_id": f"run:0:{purpose}", "round_index": 0, "purpose": purpose,
        "tool_name": "get_weather", "kwargs": {"city": "Paris"}, "success": True,
        "result": "Paris: rain", "error": None,
    }  # fmt: skip


async def test_the_last_round_asks_for_only_what_is_essential(run_loop: Any) -> None:
    plans = [plan_reply("execute", [{"tool_name": "get_weather", "tool_kwargs": {"city": c}}])
             for c in ("Paris", "Rome", "Oslo")]  # fmt: skip
    planner = ScriptedChatModel(plans)
    graph = create_tool_loop(
        planner,
        [get_weather],
        models=ModelOptions(answer_model=ScriptedChatModel(["ok"])),
        max_rounds=3,
    )
    await run_loop(graph, {"user_input": "weather everywhere"})
    rounds = [str(request[-1].content) for request in planner.requests]
    assert "round_index: 0, max_rounds: 3\n" in rounds[0]
    assert "essential" not in rounds[1].split("</round>")[0]
    assert "round_index: 2, max_rounds: 3 (the last round" in rounds[2]


def test_a_prompt_file_fills_its_placeholders_as_string_template_does() -> None:
    text = "a $x, ${y}z $$ not $$x; $x again ${z}"
    values = {"x": 1, "y": "<why>", "z": None}
    assert PromptFile("t", text).render(**values) == string.Template(text).substitute(values)
    assert PromptFile("t", "no placeholder $$").render() == "no placeholder $"
    with pytest.raises(PromptTemplateError, match=r"missing variables \['z'\], unknown \[\]"):
        PromptFile("t", text).render(x=1, y=2)
    with pytest.raises(PromptTemplateError, match=r"unknown \['w'\]"):
        PromptFile("t", text).render(w=0, **values)
