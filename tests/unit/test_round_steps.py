"""A round is `plan`, `execute` and its `call_tool` tasks: the next `plan` ends it."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from agentloop import ModelOptions, create_tool_loop
from agentloop.testing import ScriptedChatModel, plan_reply


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def _command(key: str) -> dict[str, Any]:
    return {"tool_name": "lookup", "tool_kwargs": {"key": key}}


def _loop(rounds: list[list[dict[str, Any]]], **options: Any) -> tuple[Any, ScriptedChatModel]:
    planner = ScriptedChatModel(
        [*(plan_reply("execute", commands) for commands in rounds), plan_reply("response")]
    )
    answerer = ScriptedChatModel(["done"])
    graph = create_tool_loop(
        planner, [lookup], models=ModelOptions(answer_model=answerer), **options
    )
    return graph, planner


async def _steps(run_loop: Any, graph: Any, config: dict[str, Any] | None = None) -> list[str]:
    """The nodes of each step the run took, in order (LangGraph's `debug` stream)."""
    payload = {"user_input": "look a and b up"}
    events = await run_loop.stream(graph, payload, config, stream_mode="debug")
    steps: dict[int, list[str]] = {}
    for event in events:
        if event["type"] == "task":
            steps.setdefault(event["step"], []).append(event["payload"]["name"])
    return ["+".join(sorted(set(names))) for _, names in sorted(steps.items())]


async def test_two_rounds_take_three_steps_each(run_loop: Any) -> None:
    graph, planner = _loop([[_command("a"), _command("b")], [_command("c")]])
    steps = await _steps(run_loop, graph)
    # create_agent takes two steps a round (model, tools); the loop's third is `execute`,
    # where the round is prepared (and a person may edit the plan before it runs)
    assert steps == [
        "prepare",
        "plan",
        "execute",
        "call_tool",
        "plan",  # ends round 1, plans round 2
        "execute",
        "call_tool",
        "plan",  # ends round 2, says `response`
        "answer",
    ]
    assert planner.request_count == 3


async def test_the_last_round_ends_in_plan_without_a_planner_call(run_loop: Any) -> None:
    graph, planner = _loop(
        [[_command("a")], [_command("b")]], max_rounds=1, checkpointer=InMemorySaver()
    )
    steps = await _steps(run_loop, graph, {"configurable": {"thread_id": "t"}})
    assert steps == ["prepare", "plan", "execute", "call_tool", "plan", "answer"]
    assert planner.request_count == 1  # the plan node only ended the round
    out = graph.get_state({"configurable": {"thread_id": "t"}}).values
    assert out["round_state"]["round_index"] == 1
    assert [record["tool_name"] for record in out["tool_logs"]] == ["lookup"]


async def test_each_call_writes_its_tool_message_as_it_ends(run_loop: Any) -> None:
    graph, _ = _loop([[_command("a"), _command("b")]], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    await run_loop(graph, {"user_input": "look a and b up"}, config)
    # the checkpoint after the calls ran, before `plan` ended the round
    after_calls = next(
        snapshot
        for snapshot in graph.get_state_history(config)
        if snapshot.next == ("plan",) and snapshot.values.get("call_results")
    )
    outcomes = [m for m in after_calls.values["messages"] if isinstance(m, ToolMessage)]
    assert [m.content for m in outcomes] == ["value of a", "value of b"]  # command order
    assert after_calls.values["round_state"]["round_index"] == 0  # the round is not ended
    assert after_calls.values.get("tool_logs") == []
