"""Real weak-model planner output: the loop reaches tool calls or stops with a plan error.

`tests/data/messy_plans.json` holds replies of a small instruct model (SmolLM2-135M) to
this library's plan prompts: code fences, prose, trailing commas, copied placeholders,
objects without a decision, cut streams, schema-shaped arguments, code instead of JSON.
Each reply is the planner's every answer (a weak model asked again tends to write the
same kind of thing), and the loop must never present an answer made from nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from langchain_core.tools import BaseTool, StructuredTool

from agentloop import GovernanceOptions, ModelOptions, PlanningOptions, ToolPolicy, create_tool_loop
from agentloop.planning import extract_json_object
from agentloop.planning.check import schema_shaped
from agentloop.testing import ScriptedChatModel

DATA = json.loads((Path(__file__).parent.parent / "data" / "messy_plans.json").read_text())
CASES = DATA["cases"]
WRITERS = {"write_note", "git_commit"}


def toolset(name: str) -> list[BaseTool]:
    def make(tool_name: str, schema: dict[str, Any]) -> BaseTool:
        def run(**kwargs: Any) -> str:
            return f"{tool_name} result for {json.dumps(kwargs, sort_keys=True)}"

        return StructuredTool.from_function(
            func=run, name=tool_name, description=f"The {tool_name} tool.", args_schema=schema
        )

    return [make(tool_name, schema) for tool_name, schema in DATA["toolsets"][name].items()]


def loop_for(case: dict[str, Any]) -> tuple[Any, ScriptedChatModel]:
    tools = toolset(case["toolset"])
    policies = {
        tool.name: ToolPolicy(
            read_only=tool.name not in WRITERS, idempotent=tool.name not in WRITERS
        )
        for tool in tools
    }
    answerer = ScriptedChatModel(responder=lambda _messages: "an answer from the model")
    raw = case["raw"]
    graph = create_tool_loop(
        ScriptedChatModel(responder=lambda _messages: raw),
        tools,
        models=ModelOptions(answer_model=answerer),
        max_rounds=2,
        governance=GovernanceOptions(policies=policies),
        # the tests read every request the answer model received
        planning=PlanningOptions(speculative_answer=False),
    )
    return graph, answerer


def results_in(messages: list[BaseMessage]) -> bool:
    return "<action_results>" in str(messages[-1].content)


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_a_messy_plan_gives_tool_calls_or_a_plan_error(case: dict[str, Any]) -> None:
    graph, answerer = loop_for(case)
    out = graph.invoke({"user_input": case["question"]})
    offered = set(DATA["toolsets"][case["toolset"]])
    ran = [record for record in out["tool_logs"] if record["success"]]

    for record in ran:  # whatever ran is an offered tool with arguments that validated
        assert record["tool_name"] in offered
        assert not schema_shaped(record["kwargs"])
    if out["status"] == "planner_failed":
        assert out["decision"]["parse_error"]
        if not out["round_state"]["done_plans"]:
            assert answerer.requests == []
            assert out["answer"].startswith("I could not answer: ")
    for request in answerer.requests:  # the model answers from results, or a clean response
        assert results_in(request) or (
            out["status"] == "ok" and not out["decision"].get("parse_error")
        )


VALID = [case for case in CASES if case["primary"] == "VALID_PLAN"]


@pytest.mark.parametrize("case", VALID, ids=[case["id"] for case in VALID])
def test_a_valid_plan_inside_the_mess_is_run(case: dict[str, Any]) -> None:
    graph, _ = loop_for(case)
    out = graph.invoke({"user_input": case["question"]})
    decoded = extract_json_object(case["raw"])
    wanted = [command["tool_name"] for command in decoded["execution_commands"]]
    assert [record["tool_name"] for record in out["tool_logs"]][: len(wanted)] == wanted


def test_the_set_covers_the_damage_real_models_do() -> None:
    labels = {label for case in CASES for label in case["labels"]}
    assert {
        "code_fence",
        "prose_around",
        "trailing_comma_or_comment",
        "placeholder_copied",
        "no_next_action_no_commands",
        "cut_off",
        "schema_shaped_args",
        "pure_prose",
    } <= labels


async def test_messy_plans_through_ainvoke() -> None:
    for case in CASES[::7]:
        graph, answerer = loop_for(case)
        out = await graph.ainvoke({"user_input": case["question"]})
        if out["status"] == "planner_failed" and not out["round_state"]["done_plans"]:
            assert answerer.requests == []
