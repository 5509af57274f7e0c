"""Each knob has one home, is checked in one place, and reaches the loop unchanged."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import pytest
from langchain_core.tools import tool

from agentloop import ConfigurationError, LoopContext, PlanningOptions, create_tool_loop
from agentloop.settings import LoopSettings
from agentloop.testing import ScriptedChatModel, plan_reply


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def test_every_planning_option_reaches_the_settings_unchanged() -> None:
    planning = PlanningOptions(
        prompts={"answer_system": "Hi."},
        keep_tool_results=7,
        max_consecutive_rollbacks=1,
        max_commands_per_round=3,
        plan_reasks=0,
        history_turns=2,
        history_chars=100,
        speculative_answer=True,
        streaming_dispatch=False,
        stream_plan_tokens=True,
    )
    settings = LoopSettings.build(
        planning, model_middleware=False, reviews_plan=False, max_rounds=4, plan_mode="tool"
    )
    for item in fields(PlanningOptions):
        assert getattr(settings, item.name) == getattr(planning, item.name), item.name
    assert (settings.max_rounds, settings.plan_mode, settings.concurrency) == (4, "tool", None)
    # derived: (max_rounds + max_consecutive_rollbacks) * (1 + plan_reasks)
    assert settings.plan_call_limit == (4 + 1) * (1 + 0)


def test_settings_turn_off_what_the_loop_cannot_honour() -> None:
    planning = PlanningOptions(speculative_answer=True, streaming_dispatch=True)
    settings = LoopSettings.build(planning, model_middleware=True, reviews_plan=True)
    assert settings.speculative_answer is False  # it would bypass wrap_model_call
    assert settings.streaming_dispatch is False  # a person reviews the plan first


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"keep_tool_results": -1}, "keep_tool_results must be an int >= 0"),
        ({"max_commands_per_round": 0}, "max_commands_per_round must be an int >= 1"),
        ({"history_chars": True}, "history_chars must be None or an int >= 0"),
        ({"history_turns": -1}, "history_turns must be None or an int >= 0"),
        ({"streaming_dispatch": "yes"}, "streaming_dispatch must be True or False"),
    ],
)
def test_planning_options_check_their_values_when_made(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        PlanningOptions(**options)


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        ({"max_rounds": -1}, "max_rounds must be an int >= 0"),
        ({"concurrency": 0}, "concurrency must be None or an int >= 1"),
        ({"plan_mode": "yaml"}, "plan_mode must be 'json', 'tool' or 'native'"),
    ],
)
def test_factory_knobs_are_checked_when_the_loop_is_built(
    knobs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        create_tool_loop(ScriptedChatModel([]), [add], **knobs)


def test_a_runs_override_is_checked_like_the_loops_value() -> None:
    graph = create_tool_loop(ScriptedChatModel([plan_reply("response"), "ok"]), [add])
    with pytest.raises(ConfigurationError, match="concurrency must be None or an int >= 1"):
        graph.invoke({"user_input": "hi"}, context=LoopContext(concurrency=0))
