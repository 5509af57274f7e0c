"""The decision to request the answer alongside a plan (`speculative_answer="auto"`)."""

from __future__ import annotations

from typing import Any

import pytest

from agentloop import PlanningOptions, create_tool_loop
from agentloop.errors import ConfigurationError
from agentloop.nodes.accelerate import (
    MIN_RESPONSE_RATE,
    PRIORS,
    SpeculationEstimate,
    names_a_tool,
    plan_point,
    replies_in_order,
    should_speculate,
    tool_words,
)
from agentloop.testing import ScriptedChatModel

ANSWERER = ScriptedChatModel(responder=lambda _messages: "an answer")
"""Answers each request from its messages, as a real model does."""
WORDS = tool_words(["get_weather", "read_page", "searchWeb", "get_exchange_rate"])


def record(success: bool) -> dict[str, Any]:
    return {"tool_name": "get_weather", "success": success}


def state(user_input: str = "hello", *records: dict[str, Any], **extra: Any) -> Any:
    round_state = {
        "done_plans": list(records),
        "last_round_records": list(records),
        "round_index": 1 if records else 0,
    }
    return {"user_input": user_input, "round_state": round_state, **extra}


def test_tool_words_leave_out_words_that_say_nothing() -> None:
    assert {"weather", "read", "page", "search", "web", "exchange", "rate"} == WORDS


@pytest.mark.parametrize(
    ("request_text", "named"),
    [
        ("What's the weather in Lyon?", True),
        ("Read pages 1 to 3", True),  # "pages" starts with the tool word "page"
        ("Write a two-sentence welcome for new passengers", False),
        ("Tell me a joke", False),
    ],
)
def test_a_request_names_a_tool_by_a_word_of_its_name(request_text: str, named: bool) -> None:
    assert names_a_tool(request_text, WORDS) is named


def test_each_plan_is_placed_from_the_state() -> None:
    assert plan_point(state("weather?"), WORDS, tools=False) == "no_tools"
    assert plan_point(state("Tell me a joke"), WORDS, tools=True) == "chat"
    assert plan_point(state("weather in Lyon?"), WORDS, tools=True) == "tool_request"
    assert plan_point(state("x", record(True), record(True)), WORDS, tools=True) == (
        "after_success"
    )
    assert plan_point(state("x", record(True), record(False)), WORDS, tools=True) == (
        "after_failure"
    )
    rolled_back = state("Tell me a joke", run_book={"rollback_note": "every call was flagged"})
    assert plan_point(rolled_back, WORDS, tools=True) == "after_failure"


def test_true_and_false_are_always_and_never() -> None:
    for point in PRIORS:
        assert should_speculate(True, point, 0.0)
        assert not should_speculate(False, point, 1.0)


def test_auto_speculates_when_a_response_is_likely_enough() -> None:
    assert should_speculate("auto", "no_tools", 0.0)  # it can only say `response`
    assert should_speculate("auto", "chat", MIN_RESPONSE_RATE)
    assert not should_speculate("auto", "after_success", MIN_RESPONSE_RATE / 2)


def test_auto_asks_no_answer_ahead_of_a_model_that_replies_in_order() -> None:
    scripted = ScriptedChatModel(["the answer"])
    assert replies_in_order(scripted)
    assert not replies_in_order(ANSWERER)
    assert not should_speculate("auto", "no_tools", 1.0, in_order=True)
    assert should_speculate(True, "chat", 0.0, in_order=True)  # always is always
    assert not SpeculationEstimate().wanted("auto", "chat", scripted)


def test_the_priors_favour_chat_and_successful_rounds_only() -> None:
    estimate = SpeculationEstimate()
    wanted = {point for point in PRIORS if estimate.wanted("auto", point, ANSWERER)}
    assert wanted == {"no_tools", "chat", "after_success"}


def test_the_estimate_learns_from_the_plans_it_sees() -> None:
    estimate = SpeculationEstimate()
    for _ in range(3):  # a loop whose successful rounds keep going
        estimate.observe("after_success", responded=False)
    assert not estimate.wanted("auto", "after_success", ANSWERER)
    for _ in range(3):  # then they answer
        estimate.observe("after_success", responded=True)
    assert estimate.wanted("auto", "after_success", ANSWERER)
    for _ in range(6):  # requests that name a tool, answered without one
        estimate.observe("tool_request", responded=True)
    assert estimate.wanted("auto", "tool_request", ANSWERER)


def test_the_estimate_forgets_slowly() -> None:
    estimate = SpeculationEstimate()
    for _ in range(200):
        estimate.observe("chat", responded=False)
    for _ in range(60):
        estimate.observe("chat", responded=True)
    assert estimate.rate("chat") > 0.5  # recent plans weigh more than a long past


def test_the_estimate_rebuilds_tool_words_when_the_tools_change() -> None:
    estimate = SpeculationEstimate()
    assert estimate.point(state("weather?"), ["get_weather"]) == "tool_request"
    assert estimate.point(state("weather?"), ["get_page"]) == "chat"
    assert estimate.point(state("weather?"), []) == "no_tools"


@pytest.mark.parametrize("value", ["always", 1, None])
def test_a_bad_setting_is_a_configuration_error(value: Any) -> None:
    with pytest.raises(ConfigurationError, match="speculative_answer"):
        create_tool_loop(ScriptedChatModel([]), planning=PlanningOptions(speculative_answer=value))
