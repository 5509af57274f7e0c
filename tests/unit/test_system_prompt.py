"""`system_prompt=`: the app's instructions, first in every planner and answer request."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import SystemMessage
from langchain_core.tools import tool

from agentloop import (
    ConfigurationError,
    GovernanceOptions,
    ModelOptions,
    PlanningOptions,
    create_tool_loop,
)
from agentloop.testing import ScriptedChatModel, plan_reply

APP_RULES = "You are Lumen Bay's transit desk. Always answer in metres."


@tool
def tram_length(line: str) -> float:
    """Length of a tram line in km."""
    return 3.5


def _loop(system_prompt: Any) -> tuple[Any, ScriptedChatModel, ScriptedChatModel]:
    planner = ScriptedChatModel(
        [
            "not a plan at all",  # re-asked: the re-ask keeps the app's instructions
            plan_reply("execute", [{"tool_name": "tram_length", "tool_kwargs": {"line": "A"}}]),
            plan_reply("response"),
        ]
    )
    answerer = ScriptedChatModel(["3500 metres."])
    graph = create_tool_loop(
        planner,
        [tram_length],
        models=ModelOptions(answer_model=answerer),
        system_prompt=system_prompt,
    )
    return graph, planner, answerer


async def test_text_system_prompt_comes_first_for_planner_and_answer(run_loop: Any) -> None:
    graph, planner, answerer = _loop(APP_RULES)
    out = await run_loop(graph, {"user_input": "How long is line A?"})
    assert out["answer"] == "3500 metres."
    requests = [*planner.requests, *answerer.requests]
    assert len(requests) == 4
    for request in requests:
        system = request[0]
        assert isinstance(system, SystemMessage)
        assert isinstance(system.content, str)
        assert system.content.startswith(APP_RULES + "\n\n")
        assert len(system.content) > len(APP_RULES) + 40  # the loop's own rules follow
        assert sum(APP_RULES in str(message.content) for message in request) == 1
    # static first: every planner request of the run starts with the same system message
    assert len({request[0].content for request in planner.requests}) == 1


async def test_system_message_blocks_and_cache_markers_are_kept(run_loop: Any) -> None:
    block = {"type": "text", "text": APP_RULES, "cache_control": {"type": "ephemeral"}}
    graph, planner, answerer = _loop(SystemMessage(content=[block]))
    await run_loop(graph, {"user_input": "How long is line A?"})
    for request in [planner.requests[0], answerer.requests[0]]:
        content = request[0].content
        assert isinstance(content, list)
        assert content[0] == block
        assert content[1]["type"] == "text" and len(content[1]["text"]) > 40


def test_system_prompt_must_be_text_or_a_system_message() -> None:
    with pytest.raises(ConfigurationError, match="system_prompt must be text or a SystemMessage"):
        create_tool_loop(ScriptedChatModel([]), [], system_prompt=42)  # type: ignore[arg-type]


async def test_without_system_prompt_the_loops_rules_come_alone(run_loop: Any) -> None:
    graph, planner, _ = _loop(None)
    await run_loop(graph, {"user_input": "How long is line A?"})
    assert APP_RULES not in str(planner.requests[0][0].content)


@pytest.mark.parametrize(
    "flat",
    [
        {"prompts": {"answer_system": "Hi."}},
        {"answer_model": ScriptedChatModel([])},
        {"mcp_servers": {"mcpServers": {}}},
        {"policies": {}},
    ],
)
def test_options_live_in_their_groups(flat: dict[str, Any]) -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        create_tool_loop(ScriptedChatModel([]), [tram_length], **flat)
    create_tool_loop(
        ScriptedChatModel([]),
        [tram_length],
        concurrency=2,
        plan_mode="tool",
        planning=PlanningOptions(prompts={"answer_system": "Hi."}),
        models=ModelOptions(answer_model=ScriptedChatModel([])),
    )


@pytest.mark.parametrize(
    ("group", "knob"),
    [(GovernanceOptions, {"concurrency": 2}), (PlanningOptions, {"plan_mode": "tool"})],
)
def test_the_factory_knobs_have_no_second_home(group: Any, knob: dict[str, Any]) -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        group(**knob)


def test_the_factory_takes_create_agents_parameters_three_knobs_and_three_groups() -> None:
    ours = set(inspect.signature(create_tool_loop).parameters)
    theirs = set(inspect.signature(create_agent).parameters)
    knobs = {"max_rounds", "concurrency", "plan_mode"}
    assert ours - theirs == {*knobs, "governance", "planning", "models"}
    assert theirs - ours == set()
