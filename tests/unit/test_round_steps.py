"""A round is `plan` and its `call_tool` tasks, as create_agent's: the next `plan` ends it.

In a run with a checkpointer (where an interrupt, set on the loop or on one run, may
stop it before the calls and `update_state` may edit the plan) and with `after_model`
hooks, a round takes a third step, `execute`, where it is prepared from the plan as
left; and the run starts with a `prepare` step. Without one, the run starts in `plan`,
as create_agent's starts in its model node.
"""

from __future__ import annotations

from typing import Any

from langchain.agents.middleware import AgentMiddleware
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


async def test_two_rounds_take_two_steps_each(run_loop: Any) -> None:
    graph, planner = _loop([[_command("a"), _command("b")], [_command("c")]])
    steps = await _steps(run_loop, graph)
    # as create_agent's (model, tools): `plan` prepares its round and sends the calls
    assert steps == [
        "plan",  # prepares the run, plans round 1
        "call_tool",
        "plan",  # ends round 1, plans round 2
        "call_tool",
        "plan",  # ends round 2, says `response`
        "answer",
    ]
    assert planner.request_count == 3


async def test_with_a_checkpointer_the_round_is_prepared_in_execute(run_loop: Any) -> None:
    graph, planner = _loop([[_command("a")], [_command("b")]], checkpointer=InMemorySaver())
    steps = await _steps(run_loop, graph, {"configurable": {"thread_id": "t"}})
    assert steps == [
        "prepare",
        "plan",
        "execute",
        "call_tool",
        "plan",
        "execute",
        "call_tool",
        "plan",
        "answer",
    ]
    assert planner.request_count == 3


async def test_an_interrupt_of_one_run_stops_before_execute(run_loop: Any) -> None:
    # as LangGraph Studio sets a breakpoint: on the run, not on the loop
    graph, planner = _loop([[_command("a")]], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    payload = {"user_input": "look a up"}
    await run_loop(graph, payload, config, interrupt_before=["execute"])
    paused = graph.get_state(config)
    assert paused.next == ("execute",)
    assert paused.values["round_calls"] == []  # nothing prepared: the plan may be edited
    decision = paused.values["decision"]
    decision["execution_commands"][0]["tool_kwargs"] = {"key": "z"}
    graph.update_state(config, {"decision": decision})
    out = await run_loop(graph, None, config)
    assert [record["result"] for record in out["tool_logs"]] == ["value of z"]
    assert planner.request_count == 2


async def test_the_last_round_ends_in_plan_without_a_planner_call(run_loop: Any) -> None:
    graph, planner = _loop([[_command("a")], [_command("b")]], max_rounds=1)
    steps = await _steps(run_loop, graph)
    assert steps == ["plan", "call_tool", "plan", "answer"]
    assert planner.request_count == 1  # the plan node only ended the round
    graph, _ = _loop([[_command("a")], [_command("b")]], max_rounds=1)
    out = await run_loop(graph, {"user_input": "look a and b up"})
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


async def test_a_run_without_a_checkpointer_starts_in_plan_as_prepare_would(
    run_loop: Any,
) -> None:
    graph, _ = _loop([[_command("a")]])
    first = await run_loop(graph, {"user_input": "look a up"})
    assert [m.type for m in first["messages"]] == ["human", "ai", "tool", "ai"]
    # the last output given back as input: a new run, with the per-run state reset
    graph, planner = _loop([[_command("b")]])
    second = await run_loop(graph, {**first, "user_input": "look b up"})
    assert [record["result"] for record in second["tool_logs"]] == ["value of b"]
    assert second["round_state"]["round_index"] == 1
    assert second["answer"] == "done"
    assert planner.request_count == 2


async def test_a_run_allowed_no_round_answers_at_once(run_loop: Any) -> None:
    graph, planner = _loop([[_command("a")]], max_rounds=0)
    steps = await _steps(run_loop, graph)
    assert steps == ["plan", "answer"]  # `plan` prepared the run and asked no planner
    assert planner.request_count == 0
    graph, planner = _loop([[_command("a")]], max_rounds=0, checkpointer=InMemorySaver())
    steps = await _steps(run_loop, graph, {"configurable": {"thread_id": "t"}})
    assert steps == ["prepare", "answer"]
    assert planner.request_count == 0


async def test_a_before_agent_hook_runs_before_prepare(run_loop: Any) -> None:
    class Greeter(AgentMiddleware):
        def before_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
            return None

    graph, _ = _loop([[_command("a")]], middleware=[Greeter()])
    steps = await _steps(run_loop, graph)
    assert steps[:3] == ["Greeter.before_agent", "prepare", "plan"]


async def test_an_interrupt_before_prepare_keeps_the_prepare_step(run_loop: Any) -> None:
    # without a checkpointer the run stops there and cannot resume, as in LangGraph
    graph, planner = _loop([[_command("a")]], interrupt_before=["prepare"])
    out = await run_loop(graph, {"user_input": "look a up"})
    assert not out.get("answer") and not out.get("messages")  # nothing ran yet
    assert not out.get("round_state") and planner.request_count == 0
