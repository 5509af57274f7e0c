"""What a node says before its model call is said once, also when a hook interrupts there.

The `plan` node ends the round and starts the next before it asks the planner, the
`answer` node says `answer_started` before it asks its model, and each runs again from
its start when a `before_model` hook's `interrupt()` is answered: those events wait
until the hooks let the call go ahead, so the resumed run does not say them again.
"""

from __future__ import annotations

from typing import Any

from langchain.agents.middleware import before_model
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, interrupt

from agentloop import ModelOptions, create_tool_loop
from agentloop.testing import ScriptedChatModel, plan_reply

ROUND_END = ("queue_drained", "round_completed", "round_started")


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def _loop(hook: Any) -> tuple[Any, ScriptedChatModel]:
    command = {"tool_name": "lookup", "tool_kwargs": {"key": "a"}}
    planner = ScriptedChatModel([plan_reply("execute", [command]), plan_reply("response")])
    graph = create_tool_loop(
        planner,
        [lookup],
        middleware=[hook],
        models=ModelOptions(answer_model=ScriptedChatModel(["done"])),
        checkpointer=InMemorySaver(),
    )
    return graph, planner


async def test_the_round_end_is_said_once_when_a_hook_interrupts_the_next_plan(
    run_loop: Any,
) -> None:
    asked: list[Any] = []

    @before_model
    def confirm(state: Any, runtime: Any) -> dict[str, Any] | None:
        ran = any(isinstance(message, ToolMessage) for message in state["messages"])
        if ran and not asked:  # before the second plan: asked, answered on resume
            asked.append(interrupt("go on?"))
        return None

    graph, planner = _loop(confirm)
    config = {"configurable": {"thread_id": "t"}}
    first = await run_loop.stream(graph, {"user_input": "look a up"}, config, stream_mode="custom")
    assert graph.get_state(config).next == ("plan",)  # stopped by the hook, after round 1
    second = await run_loop.stream(graph, Command(resume="yes"), config, stream_mode="custom")
    said = [(e["type"], e.get("round_index")) for e in [*first, *second] if e["type"] in ROUND_END]
    # round 0 started and ended once; round 1's start once, on the resumed run
    assert said == [
        ("round_started", 0),
        ("queue_drained", 0),
        ("round_completed", 0),
        ("round_started", 1),
    ]
    assert [e["type"] for e in first if e["type"] in ROUND_END] == ["round_started"]
    out = graph.get_state(config).values
    assert (out["answer"], out["round_state"]["round_index"]) == ("done", 1)
    assert planner.request_count == 2


async def test_without_an_interrupt_the_round_end_comes_before_the_next_plan(
    run_loop: Any,
) -> None:
    @before_model
    def look(state: Any, runtime: Any) -> dict[str, Any] | None:
        return None

    graph, _ = _loop(look)
    config = {"configurable": {"thread_id": "t"}}
    events = await run_loop.stream(graph, {"user_input": "look a up"}, config, stream_mode="custom")
    kinds = [event["type"] for event in events]
    said = [kind for kind in kinds if kind in ROUND_END]
    assert said == ["round_started", "queue_drained", "round_completed", "round_started"]
    decided = [i for i, kind in enumerate(kinds) if kind == "plan_decided"]
    assert decided[0] < kinds.index("queue_drained") < kinds.index("round_completed") < decided[1]
    assert kinds.index("round_completed") < len(kinds) - 1 - kinds[::-1].index("round_started")


async def test_the_answer_start_is_said_once_when_a_hook_interrupts_the_answer(
    run_loop: Any,
) -> None:
    asked: list[Any] = []

    @before_model
    def confirm(state: Any, runtime: Any) -> dict[str, Any] | None:
        answering = (state.get("decision") or {}).get("next_action") == "response"
        if answering and state.get("round_state", {}).get("round_index") and not asked:
            asked.append(interrupt("answer now?"))
        return None

    graph, _ = _loop(confirm)
    config = {"configurable": {"thread_id": "t"}}
    first = await run_loop.stream(graph, {"user_input": "look a up"}, config, stream_mode="custom")
    assert graph.get_state(config).next == ("answer",)  # stopped by the hook
    second = await run_loop.stream(graph, Command(resume="yes"), config, stream_mode="custom")
    started = [event for event in [*first, *second] if event["type"] == "answer_started"]
    assert len(started) == 1 and started[0] in second
    assert [event["type"] for event in second][-1] == "answer_completed"
    assert graph.get_state(config).values["answer"] == "done"
