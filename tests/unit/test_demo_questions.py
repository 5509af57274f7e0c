"""The demo loop answers the question it is given, from its local tools (no MCP servers)."""

from __future__ import annotations

from typing import Any

import pytest

from agentloop.cli.demo import DEMO_QUESTION, build_demo_loop


def calls(out: dict[str, Any]) -> list[tuple[int, str, dict[str, Any]]]:
    return [
        (record["round_index"], record["tool_name"], record["kwargs"])
        for record in out["round_state"]["done_plans"]
    ]


@pytest.fixture(scope="module")
def graph() -> Any:
    return build_demo_loop(use_mcp=False)


def test_the_default_question_searches_then_computes_from_the_found_figures(graph: Any) -> None:
    out = graph.invoke({"user_input": DEMO_QUESTION})
    assert calls(out) == [
        (0, "search_facts", {"query": "Lumen Bay tram network km line"}),
        (1, "calculate", {"expression": "42 / 4"}),
    ]  # and nothing unrelated: no weather
    assert out["round_state"]["round_index"] == 2
    assert out["action_results"]["Compute km per line"] == 10.5
    answer = out["answer"]
    assert answer.startswith("Here is what the tools found:")
    assert "4 lines and 61 stops, with 42 kilometers of track" in answer
    assert "Compute km per line: 10.5" in answer
    assert "°C" not in answer


async def test_the_local_facts_are_the_bundled_documents() -> None:
    """`search_facts` quotes the documents the MCP `docs` server serves: one set of facts."""
    from agentloop.cli.demo import search_facts
    from agentloop.cli.servers.docsearch import load_documents

    fact = await search_facts.ainvoke({"query": "Lumen Bay tram network km line"})
    assert fact in " ".join(load_documents()["lumen-bay-tram-network"].text.split())
    assert "42 kilometers" in fact


def test_a_follow_up_takes_its_city_from_the_conversation() -> None:
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver

    loop = build_demo_loop(use_mcp=False, checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "follow-up"}}
    loop.invoke({"messages": [HumanMessage(DEMO_QUESTION)]}, thread)
    out = loop.invoke({"messages": [HumanMessage("And what is the weather there?")]}, thread)
    assert [(name, kwargs) for round_, name, kwargs in calls(out) if round_ == 0][-1:] == [
        ("get_weather", {"city": "Lumen Bay"})
    ]
    assert "clear, 18 °C in Lumen Bay" in out["answer"]


def test_a_weather_question_asks_for_the_city_it_names(graph: Any) -> None:
    out = graph.invoke({"user_input": "What's the weather like in Lumen Bay today?"})
    assert calls(out) == [(0, "get_weather", {"city": "Lumen Bay"})]
    assert "clear, 18 °C in Lumen Bay" in out["answer"]


def test_the_weather_of_an_unknown_city_is_not_invented(graph: Any) -> None:
    out = graph.invoke({"user_input": "Is it raining in Paris?"})
    assert calls(out) == [(0, "get_weather", {"city": "Paris"})]
    assert out["answer"].startswith("I found nothing")
    assert "no weather data for Paris" in out["answer"]
    assert "°C" not in out["answer"]


@pytest.mark.parametrize(
    ("question", "expression", "shown"),
    [
        ("What is 6*7?", "6*7", "42"),
        ("How much is 12 times 7 plus 3?", "12 * 7 + 3", "87"),
        ("What is 15% of 80?", "15 / 100 * 80", "12"),
    ],
)
def test_arithmetic_goes_to_the_calculator(
    graph: Any, question: str, expression: str, shown: str
) -> None:
    out = graph.invoke({"user_input": question})
    assert calls(out) == [(0, "calculate", {"expression": expression})]
    assert out["answer"].splitlines()[1] == f"- Compute {expression}: {shown}"


async def test_a_fact_question_is_looked_up_and_quoted(graph: Any) -> None:
    out = await graph.ainvoke({"user_input": "When is the Lumen Bay lantern festival held?"})
    assert calls(out) == [(0, "search_facts", {"query": "Lumen Bay lantern festival held"})]
    assert out["answer"].startswith("Here is what the tools found:")
    assert '"It is held on the second weekend of September' in out["answer"]


def test_a_combined_question_runs_its_independent_calls_in_one_round(graph: Any) -> None:
    out = graph.invoke({"user_input": "What's the weather in Lumen Bay, and what is 2 * 21?"})
    assert calls(out) == [
        (0, "get_weather", {"city": "Lumen Bay"}),
        (0, "calculate", {"expression": "2 * 21"}),
    ]
    assert "clear, 18 °C" in out["answer"]
    assert "2 * 21: 42" in out["answer"]


@pytest.mark.parametrize(
    ("question", "reply"),
    [
        ("Hello there!", "Hello! I am the agentloop demo"),
        ("Thanks a lot!", "You're welcome!"),
        ("Who are you?", "I am the agentloop demo"),
    ],
)
def test_a_question_that_needs_no_tool_is_answered_at_once(
    graph: Any, question: str, reply: str
) -> None:
    events: list[dict[str, Any]] = []
    out: dict[str, Any] = {}
    for mode, chunk in graph.stream({"user_input": question}, stream_mode=["custom", "values"]):
        if mode == "custom":
            events.append(chunk)
        else:
            out = chunk
    decided = [event for event in events if event["type"] == "plan_decided"]
    assert [(event["next_action"], event["short_circuited"]) for event in decided] == [
        ("response", True)
    ]
    assert not [event for event in events if event["type"] == "tool_started"]
    assert calls(out) == []
    assert out["answer"].startswith(reply)


def test_an_unknown_topic_says_nothing_was_found(graph: Any) -> None:
    out = graph.invoke({"user_input": "Who won the 1998 World Cup?"})
    assert calls(out) == [(0, "search_facts", {"query": "won 1998 World Cup"})]
    answer = out["answer"]
    assert answer.startswith("I found nothing to answer this:")
    assert "nothing found about 'won 1998 World Cup'" in answer
    assert "Here is what" not in answer


def test_a_fact_that_does_not_answer_the_question_is_not_quoted(graph: Any) -> None:
    # the search returns its closest sentence (about the festival), which is not about the zoo
    out = graph.invoke({"user_input": "When does the Lumen Bay zoo open?"})
    assert [name for _, name, _ in calls(out)] == ["search_facts"]
    assert out["answer"].startswith("I found nothing")
    assert "Lantern" not in out["answer"]


def test_the_same_loop_answers_each_question_it_is_given(graph: Any) -> None:
    tools_used = [
        [name for _, name, _ in calls(graph.invoke({"user_input": question}))]
        for question in ("Hi!", "What is 2 + 2?", "What's the weather in Lumen Bay?", DEMO_QUESTION)
    ]
    assert tools_used == [
        [],
        ["calculate"],
        ["get_weather"],
        ["search_facts", "calculate"],
    ]


@pytest.mark.parametrize("speculative", [False, "auto"])
@pytest.mark.parametrize("question", ["Hello!", "thanks!", "What is 6*7?"])
async def test_the_native_demo_answers_for_real_without_a_speculative_answer(
    run_loop: Any, question: str, speculative: Any
) -> None:
    from agentloop import PlanningOptions
    from agentloop.testing._native import NATIVE_RESPONSE_TEXT

    graph = build_demo_loop(
        use_mcp=False,
        plan_mode="native",
        planning=PlanningOptions(speculative_answer=speculative),
    )
    out = await run_loop(graph, {"user_input": question})
    assert out["status"] == "ok"
    assert NATIVE_RESPONSE_TEXT not in out["answer"]
    expected = {"Hello!": "Hello! I am the agentloop demo", "thanks!": "You're welcome!"}
    assert out["answer"].startswith(expected.get(question, "Here is what the tools found"))
