"""The plan / execute / answer loop, end to end, through the public API."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from timeline import Timeline

from agentloop import (
    ModelOptions,
    PlanningOptions,
    create_tool_loop,
)
from agentloop.models.calls import ModelRetryPolicy
from agentloop.testing import ScriptedChatModel, plan_reply


def cmd(tool_name: str, purpose: str = "", **kwargs: Any) -> dict[str, Any]:
    return {"purpose": purpose, "tool_name": tool_name, "tool_kwargs": kwargs}


@tool
async def search_web(query: str) -> str:
    """Search the web."""
    await asyncio.sleep(0.01)
    return f"results for {query}"


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def explode(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(f"boom: {reason}")


Builder = Callable[..., tuple[Any, Any, Any]]


def build_loop(plans: list[Any], tools: list[Any], **options: Any) -> tuple[Any, Any, Any]:
    planner = ScriptedChatModel(plans, chunk_size=7)
    answerer = ScriptedChatModel(repeat_last=True, replies=["final answer"])
    graph = create_tool_loop(planner, tools, models=ModelOptions(answer_model=answerer), **options)
    return graph, planner, answerer


@pytest.fixture
def loop_with(planning_for: Callable[..., dict[str, Any]]) -> Builder:
    """`build_loop` in the test's plan mode (options given override it)."""

    def build(plans: list[Any], tools: list[Any], **options: Any) -> tuple[Any, Any, Any]:
        return build_loop(plans, tools, **{**planning_for(), **options})

    return build


RECORD_KEYS = {
    "purpose",
    "tool_name",
    "kwargs",
    "todo_suggestion",
    "next",
    "success",
    "result",
    "error",
}


async def test_two_rounds_then_answer(run_loop: Any, loop_with: Builder, plan_mode: str) -> None:
    graph, planner, answerer = loop_with(
        [
            plan_reply(
                "execute", [cmd("search_web", "find it", query="cats"), cmd("add", a=1, b=2)]
            ),
            plan_reply(
                "execute", [{**cmd("add", "sum again", a=3, b=4), "todo_suggestion": "done"}]
            ),
            plan_reply("response"),
        ],
        [search_web, add],
    )
    out = await run_loop(graph, {"user_input": "tell me", "user_extra_requirement": "be brief"})
    state = out["round_state"]
    assert state["round_index"] == 2
    assert len(state["done_plans"]) == 3
    assert [r["tool_name"] for r in state["last_round_records"]] == ["add"]
    for record in state["done_plans"]:
        assert record.keys() >= RECORD_KEYS
        assert record["success"] is True
        assert record["error"] == ""
        assert record["next"] == record["todo_suggestion"]
    assert state["done_plans"][0]["result"] == "results for cats"
    assert state["done_plans"][1]["purpose"] == "Use add"
    if plan_mode == "json":
        assert state["last_round_records"][0]["todo_suggestion"] == "done"
        assert out["action_results"] == {
            "find it": "results for cats",
            "Use add": 3,
            "sum again": 7,
        }
    else:  # a native tool call has no purpose or todo of its own
        assert state["last_round_records"][0]["todo_suggestion"] == ""
        assert out["action_results"] == {
            "Use search_web": "results for cats",
            "Use add": 3,
            "Use add (2)": 7,
        }
    assert out["answer"] == "final answer"
    assert isinstance(out["messages"][-1], AIMessage)
    assert out["messages"][-1].content == "final answer"
    assert len(out["tool_logs"]) == 3
    assert len(planner.requests) == 3
    # the planner saw everything it needs
    first_prompt = "\n".join(str(m.content) for m in planner.requests[0])
    for needle in ("tell me", "be brief", "5 rounds"):
        assert needle in first_prompt
    assert ("round_index: 0" in first_prompt) is (plan_mode == "json")  # native: the transcript
    if plan_mode == "json":  # the tools are listed in the prompt, or bound to the planner
        assert "search_web" in first_prompt
    else:
        bound = [tool["function"]["name"] for tool in planner.request_options[0]["tools"]]
        assert bound == ["search_web", "add"]
    second_prompt = "\n".join(str(m.content) for m in planner.requests[1])
    assert "results for cats" in second_prompt
    # the answer got the results and the instruction to cite them
    answer_prompt = str(answerer.requests[0][-1].content)
    assert "<action_results>" in answer_prompt
    assert "results for cats" in answer_prompt
    assert "quote" in answer_prompt.lower()


async def test_no_tools_needed_injects_no_results(
    run_loop: Any, loop_with: Builder, plan_mode: str
) -> None:
    graph, _, answerer = loop_with([plan_reply("response")], [add])
    out = await run_loop(graph, {"user_input": "hello"})
    assert out["action_results"] == {}
    assert out["round_state"] == {"done_plans": [], "last_round_records": [], "round_index": 0}
    if plan_mode == "native":  # no tool ran: the planner's text reply is the answer
        assert answerer.requests == []
        assert out["answer"]
    else:
        assert "<action_results>" not in str(answerer.requests[0][-1].content)
    assert out["tool_logs"] == []


@pytest.mark.json_only("a native text reply before any tool ran is the answer, so it is read whole")
async def test_short_circuit_stops_reading_the_stream(loop_with: Builder) -> None:
    padding = [cmd("add", "x" * 200, a=1, b=1) for _ in range(20)]
    reply = json.dumps({"next_action": "response", "execution_commands": padding})
    graph, planner, _ = loop_with([reply], [add])
    events = [chunk async for chunk in graph.astream({"user_input": "hi"}, stream_mode="custom")]
    total_chunks = -(-len(reply) // 7)
    assert planner.chunks_emitted <= 6 < total_chunks
    decided = [e for e in events if e["type"] == "plan_decided"]
    assert decided[0]["short_circuited"] is True
    assert decided[0]["next_action"] == "response"


@pytest.mark.json_only(
    "a native reply has no next_action value to misspell; this reads the JSON one"
)
async def test_partial_response_value_does_not_decide(run_loop: Any, loop_with: Builder) -> None:
    # "responsive" starts like "response" but the value is only known when complete
    reply = json.dumps({"next_action": "responsive", "execution_commands": [cmd("add", a=1, b=2)]})
    graph, _, _ = loop_with([reply, plan_reply("response")], [add])
    out = await run_loop(graph, {"user_input": "hi"})
    assert out["round_state"]["round_index"] == 1  # invalid action with commands -> execute
    assert out["round_state"]["done_plans"][0]["result"] == 3


@pytest.mark.json_only(
    "counts the chunks of the JSON plan text; a native reply never short-circuits on tool calls"
)
async def test_execute_does_not_short_circuit_and_reads_everything(
    run_loop: Any, loop_with: Builder
) -> None:
    reply = plan_reply("execute", [cmd("add", a=1, b=2)])
    graph, planner, _ = loop_with([reply, plan_reply("response")], [add])
    await run_loop(graph, {"user_input": "hi"})
    assert planner.chunks_emitted >= -(-len(str(reply)) // 7)


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_parallel_round_is_concurrent(run_loop: Any, loop_with: Builder, kind: str) -> None:
    timeline = Timeline()
    names = [f"call {n}" for n in range(4)]

    @tool
    async def get_slow(n: int) -> int:
        """Run until the round's other calls have started too."""
        await timeline.meet(names[n], *names)
        timeline.end(names[n])
        return n

    @tool
    def get_slow_sync(n: int) -> int:
        """Run (in a thread) until the round's other calls have started too."""
        timeline.meet_blocking(names[n], *names)
        timeline.end(names[n])
        return n

    slow = get_slow if kind == "async" else get_slow_sync
    graph, _, _ = loop_with(
        [plan_reply("execute", [cmd(slow.name, n=i) for i in range(4)]), plan_reply("response")],
        [slow],
    )
    out = await run_loop(graph, {"user_input": "go"})
    assert [r["result"] for r in out["round_state"]["done_plans"]] == [0, 1, 2, 3]
    # all four ran at once: one after the other, the first would wait for the rest in vain
    timeline.assert_met()
    last_start = max(timeline.at(f"start {name}") for name in names)
    assert last_start < min(timeline.at(f"end {name}") for name in names), timeline.steps


async def test_concurrency_limit(run_loop: Any, loop_with: Builder) -> None:
    running = 0
    peak = 0
    lock = threading.Lock()
    timeline = Timeline()

    @tool
    async def get_item(n: int) -> int:
        """Track how many run at once."""
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        if n < 2:  # the first two wait for each other: the limit lets two run at once
            await timeline.meet(str(n), "0", "1")
        await asyncio.sleep(0.05)  # room for a third wrongly started beside them to show
        with lock:
            running -= 1
        return n

    graph, _, _ = loop_with(
        [plan_reply("execute", [cmd("get_item", n=i) for i in range(6)]), plan_reply("response")],
        [get_item],
        concurrency=2,
    )
    out = await run_loop(graph, {"user_input": "go"})
    timeline.assert_met()
    assert peak == 2
    assert [r["result"] for r in out["round_state"]["done_plans"]] == list(range(6))


async def test_records_keep_command_order_whatever_finishes_first(
    run_loop: Any, loop_with: Builder
) -> None:
    @tool
    async def get_delayed(delay: float, label: str) -> str:
        """Sleep, then return the label."""
        await asyncio.sleep(delay)
        return label

    commands = [cmd("get_delayed", delay=0.2 - 0.05 * i, label=f"c{i}") for i in range(4)]
    graph, _, _ = loop_with(
        [plan_reply("execute", commands), plan_reply("response")], [get_delayed]
    )
    out = await run_loop(graph, {"user_input": "go"})
    assert [r["result"] for r in out["round_state"]["last_round_records"]] == [
        "c0",
        "c1",
        "c2",
        "c3",
    ]
    assert [r["index"] for r in out["tool_logs"]] == [0, 1, 2, 3]


async def test_unsafe_tools_run_alone_in_order(run_loop: Any, loop_with: Builder) -> None:
    timeline = Timeline()
    pairs = {"r1": "r2", "r2": "r1", "r3": "r4", "r4": "r3"}

    @tool
    async def read_a(key: str) -> str:
        """A safe read."""
        await timeline.meet(key, pairs[key])  # runs until its neighbour has started too
        timeline.end(key)
        return key

    @tool
    async def save_b(key: str) -> str:
        """An unsafe write."""
        timeline.start(key)
        await asyncio.sleep(0.05)  # room for a read wrongly started beside it to show
        timeline.end(key)
        return key

    commands = [
        cmd("read_a", key="r1"),
        cmd("read_a", key="r2"),
        cmd("save_b", key="w1"),
        cmd("read_a", key="r3"),
        cmd("read_a", key="r4"),
    ]
    graph, _, _ = loop_with(
        [plan_reply("execute", commands), plan_reply("response")], [read_a, save_b]
    )
    out = await run_loop(graph, {"user_input": "go"})
    assert [r["result"] for r in out["round_state"]["done_plans"]] == ["r1", "r2", "w1", "r3", "r4"]
    # safe neighbours still overlap: each pair met (both running at once)
    timeline.assert_met()
    assert timeline.overlapped("r1", "r2") and timeline.overlapped("r3", "r4"), timeline.steps
    # the write runs alone, in its place: after both reads before it, before both after it
    assert timeline.before("end r1", "start w1") and timeline.before("end r2", "start w1")
    assert timeline.before("end w1", "start r3") and timeline.before("end w1", "start r4")


async def test_errors_are_isolated(run_loop: Any, loop_with: Builder) -> None:
    commands = [
        cmd("explode", reason="x"),
        cmd("no_such_tool", q=1),
        cmd("add", a=2, b=2),
    ]
    graph, _, _ = loop_with(
        [plan_reply("execute", commands), plan_reply("response")], [explode, add]
    )
    out = await run_loop(graph, {"user_input": "go"})
    failed, unknown, good = out["tool_logs"]
    assert failed["success"] is False
    assert "boom: x" in failed["error"]
    assert unknown["success"] is False
    assert unknown["error_type"] == "tool_not_found"
    assert "add" in unknown["error"] and "explode" in unknown["error"]
    assert good["success"] is True and good["result"] == 4
    assert out["action_results"]["Use explode"]["error"]
    assert out["answer"] == "final answer"


async def test_max_rounds_stops_without_a_wasted_plan_call(
    run_loop: Any, planning_for: Callable[..., dict[str, Any]]
) -> None:
    asked = iter(range(100))

    def always_more(messages: Any) -> str:
        return str(plan_reply("execute", [cmd("add", a=next(asked), b=1)]))

    planner = ScriptedChatModel(responder=always_more)
    answerer = ScriptedChatModel(["done"], repeat_last=True)
    graph = create_tool_loop(
        planner, [add], models=ModelOptions(answer_model=answerer), max_rounds=2, **planning_for()
    )
    events = [e async for e in graph.astream({"user_input": "go"}, stream_mode="custom")]
    assert len(planner.requests) == 2
    assert sum(1 for e in events if e["type"] == "round_completed") == 2
    state = await run_loop(graph, {"user_input": "go"})
    assert len(planner.requests) == 4
    assert state["round_state"]["round_index"] == 2
    assert state["answer"] == "done"


async def test_max_rounds_zero_answers_directly(run_loop: Any, loop_with: Builder) -> None:
    graph, planner, _ = loop_with([], [add], max_rounds=0)
    out = await run_loop(graph, {"user_input": "hi"})
    assert planner.requests == []
    assert out["answer"] == "final answer"


async def test_tool_plan_mode_with_streamed_tool_calls(run_loop: Any) -> None:
    graph, planner, _ = build_loop(
        [
            plan_reply("execute", [cmd("add", a=5, b=6)], as_tool_call=True),
            plan_reply("response", as_tool_call=True),
        ],
        [add],
        plan_mode="tool",
    )
    out = await run_loop(graph, {"user_input": "sum"})
    assert out["round_state"]["done_plans"][0]["result"] == 11
    assert planner.bound_tools[0]["function"]["name"] == "PlanDecision"


async def test_tool_plan_mode_short_circuits(run_loop: Any) -> None:
    reply = plan_reply("response", [cmd("add", "y" * 300, a=1, b=1)] * 5, as_tool_call=True)
    graph, planner, _ = build_loop([reply], [add], plan_mode="tool")
    out = await run_loop(graph, {"user_input": "hi"})
    assert out["round_state"]["round_index"] == 0
    assert planner.chunks_emitted < 10


@pytest.mark.json_only(
    "prose is a valid native reply (a response), so there is nothing to ask again"
)
async def test_an_unusable_plan_is_asked_again_then_reported(
    run_loop: Any, loop_with: Builder
) -> None:
    prose = "I think I'd rather chat about the weather."
    graph, planner, answerer = loop_with([prose] * 3, [add])
    out = await run_loop(graph, {"user_input": "hi"})
    assert out["decision"]["next_action"] == "response"
    assert out["decision"]["parse_error"] == "planner output holds no JSON object"
    assert out["status"] == "planner_failed"
    assert len(planner.requests) == 3  # the first reply and two re-asks
    assert 'could not be used: "planner output holds no JSON object"' in str(
        planner.requests[1][-1].content
    )
    assert answerer.requests == []  # no answer is made up from nothing
    assert out["usage"]["tool_loop"]["model_calls"] == 3


@pytest.mark.json_only(
    "prose is a valid native reply (a response), so there is nothing to ask again"
)
async def test_a_reasked_planner_that_recovers_runs_its_plan(
    run_loop: Any, loop_with: Builder
) -> None:
    replies = [
        "Let me think.",
        plan_reply("execute", [cmd("add", a=2, b=3)]),
        plan_reply("response"),
    ]
    graph, planner, _ = loop_with(replies, [add])
    out = await run_loop(graph, {"user_input": "2+3?"})
    assert len(planner.requests) == 3
    assert out["status"] == "ok"
    assert out["round_state"]["done_plans"][0]["result"] == 5
    assert out["usage"]["tool_loop"]["model_calls"] == 4  # 3 plans (one re-ask) + answer


@pytest.mark.json_only("'{}' is a valid native reply (a text response), not a broken JSON plan")
async def test_a_reask_is_an_event(loop_with: Builder) -> None:
    graph, _, _ = loop_with(["{}", plan_reply("response")], [add])
    events = [
        event
        async for event in graph.astream({"user_input": "hi"}, stream_mode="custom")
        if event["type"] in ("plan_reasked", "plan_decided")
    ]
    assert [(e["type"], e.get("reason"), e.get("reasks")) for e in events] == [
        (
            "plan_reasked",
            'the JSON object has neither "next_action" nor "execution_commands"',
            None,
        ),
        ("plan_decided", None, 1),
    ]


@pytest.mark.json_only("tests the repair of JSON plan text; a native plan is tool calls")
async def test_fenced_json_with_prose_is_accepted(run_loop: Any, loop_with: Builder) -> None:
    body = plan_reply("execute", [cmd("add", a=1, b=1)])
    graph, _, _ = loop_with(
        [f"Sure! Here is my plan:\n```json\n{body}\n```\nDone.", plan_reply("response")], [add]
    )
    out = await run_loop(graph, {"user_input": "hi"})
    assert out["round_state"]["done_plans"][0]["result"] == 2


async def test_planner_model_failure_does_not_crash(run_loop: Any, loop_with: Builder) -> None:
    graph, _, _ = loop_with([RuntimeError("provider down")], [add])
    out = await run_loop(graph, {"user_input": "hi"})
    assert "provider down" in out["decision"]["parse_error"]
    assert out["status"] == "planner_failed"
    assert out["answer"].startswith("I could not answer: planner model failed")


async def test_answer_model_failure_gives_a_clear_answer(
    run_loop: Any, planning_for: Callable[..., dict[str, Any]]
) -> None:
    # a round of tools first: in native mode the answer model then writes the answer
    planner = ScriptedChatModel(
        [plan_reply("execute", [cmd("add", a=1, b=2)]), plan_reply("response")]
    )
    answerer = ScriptedChatModel([ConnectionError("network unreachable")] * 2)
    graph = create_tool_loop(
        planner,
        [add],
        models=ModelOptions(
            answer_model=answerer, retry=ModelRetryPolicy(max_attempts=2, initial_delay_s=0.01)
        ),
        **planning_for(),
    )
    out = await run_loop(graph, {"user_input": "hi"})
    assert "network unreachable" in out["answer"]


def test_sync_invoke_works(loop_with: Builder) -> None:
    graph, _, _ = loop_with(
        [
            plan_reply("execute", [cmd("add", a=1, b=2), cmd("search_web", query="q")]),
            plan_reply("response"),
        ],
        [add, search_web],
    )
    out = graph.invoke({"user_input": "sum"})
    assert [r["result"] for r in out["tool_logs"]] == [3, "results for q"]
    assert out["answer"] == "final answer"


async def test_sync_invoke_inside_a_running_event_loop(loop_with: Builder) -> None:
    graph, _, _ = loop_with(
        [plan_reply("execute", [cmd("search_web", query="q")]), plan_reply("response")],
        [search_web],
    )
    out = await asyncio.to_thread(graph.invoke, {"user_input": "x"})
    assert out["tool_logs"][0]["result"] == "results for q"
    # and directly on the loop's thread, as a notebook cell would
    graph2, _, _ = loop_with(
        [plan_reply("execute", [cmd("search_web", query="z")]), plan_reply("response")],
        [search_web],
    )
    out2 = graph2.invoke({"user_input": "x"})
    assert out2["tool_logs"][0]["result"] == "results for z"


async def test_events_on_the_custom_stream(loop_with: Builder) -> None:
    graph, _, _ = loop_with(
        [
            plan_reply("execute", [cmd("add", a=1, b=2), cmd("explode", reason="r")]),
            plan_reply("response"),
        ],
        [add, explode],
    )
    events = [e async for e in graph.astream({"user_input": "go"}, stream_mode="custom")]
    types = [e["type"] for e in events]
    for expected in (
        "round_started",
        "plan_decided",
        "tool_queued",
        "tool_started",
        "tool_completed",
        "tool_error",
        "queue_drained",
        "round_completed",
    ):
        assert expected in types, expected
    completed = [e for e in events if e["type"] == "tool_completed"]
    assert {e["success"] for e in completed} == {True, False}
    assert all(e["duration_ms"] >= 0 for e in completed)
    decided = [e for e in events if e["type"] == "plan_decided"]
    assert decided[0]["command_count"] == 2 and decided[0]["short_circuited"] is False


async def test_answer_tokens_stream_on_messages_mode(
    planning_for: Callable[..., dict[str, Any]],
) -> None:
    # a round of tools first: in native mode the answer model then writes the answer
    planner = ScriptedChatModel(
        [plan_reply("execute", [cmd("add", a=1, b=2)]), plan_reply("response")]
    )
    answerer = ScriptedChatModel(["a fairly long final answer text"], chunk_size=4)
    graph = create_tool_loop(
        planner, [add], models=ModelOptions(answer_model=answerer), **planning_for()
    )
    tokens = [
        chunk.content
        async for chunk, meta in graph.astream({"user_input": "hi"}, stream_mode="messages")
        if meta.get("langgraph_node") == "answer"
    ]
    assert len(tokens) > 3
    assert "".join(tokens) == "a fairly long final answer text"


async def test_input_from_messages_and_parent_composition(
    run_loop: Any, loop_with: Builder
) -> None:
    graph, planner, _ = loop_with(
        [plan_reply("execute", [cmd("add", a=2, b=3)]), plan_reply("response")], [add]
    )
    parent = StateGraph(MessagesState)
    parent.add_node("agent", graph)
    parent.add_edge(START, "agent")
    app = parent.compile()
    out = await run_loop(app, {"messages": [HumanMessage("what is 2+3?")]})
    assert isinstance(out["messages"][-1], AIMessage)
    assert out["messages"][-1].content == "final answer"
    assert planner.requests[0][1].content == "what is 2+3?"  # the transcript, after the rules


async def test_checkpointer_interrupt_inspect_edit_resume(
    run_loop: Any, loop_with: Builder
) -> None:
    graph, _, _ = loop_with(
        [plan_reply("execute", [cmd("add", a=1, b=1)]), plan_reply("response")],
        [add],
        checkpointer=InMemorySaver(),
        interrupt_before=["execute"],
    )
    config = {"configurable": {"thread_id": "t1"}}
    await run_loop(graph, {"user_input": "go"}, config)
    snapshot = await graph.aget_state(config)
    assert snapshot.next == ("execute",)
    decision = snapshot.values["decision"]
    assert decision["execution_commands"][0]["tool_kwargs"] == {"a": 1, "b": 1}
    decision["execution_commands"][0]["tool_kwargs"] = {"a": 40, "b": 2}
    await graph.aupdate_state(config, {"decision": decision})
    out = await run_loop(graph, None, config)
    assert out["round_state"]["done_plans"][0]["result"] == 42
    history = [s async for s in graph.aget_state_history(config)]
    assert len(history) > 3


def test_drawn_graph_matches_the_snapshot(loop_with: Builder) -> None:
    # a changed shape must be a reviewed change: update tests/unit/snapshots/tool_loop.mmd
    graph, _, _ = loop_with([], [add])
    snapshot = Path(__file__).with_name("snapshots") / "tool_loop.mmd"
    assert graph.get_graph().draw_mermaid() == snapshot.read_text()


def test_graph_shape_and_mermaid(loop_with: Builder) -> None:
    graph, _, _ = loop_with([], [add])
    nodes = set(graph.get_graph().nodes)
    assert {"plan", "execute", "answer"} <= nodes
    mermaid = graph.get_graph().draw_mermaid()
    for edge in (
        "plan -.-> execute",
        "plan -.-> answer",
        "call_tool --> plan",
        "answer --> __end__",
    ):
        assert edge in mermaid, edge


async def test_plain_langchain_fake_model(run_loop: Any) -> None:
    plans = iter(
        [
            AIMessage(plan_reply("execute", [cmd("add", a=7, b=8)])),  # type: ignore[arg-type]
            AIMessage(plan_reply("response")),  # type: ignore[arg-type]
        ]
    )
    planner = GenericFakeChatModel(messages=plans)
    answerer = GenericFakeChatModel(messages=iter([AIMessage("fifteen")]))
    # LangChain's fakes reply in order: no answer is requested ahead of time
    graph = create_tool_loop(
        planner,
        [add],
        models=ModelOptions(answer_model=answerer),
        planning=PlanningOptions(speculative_answer=False),
    )
    out = await run_loop(graph, {"user_input": "7+8?"})
    assert out["round_state"]["done_plans"][0]["result"] == 15
    assert out["answer"] == "fifteen"


def test_options_are_grouped_and_old_names_are_gone() -> None:
    import agentloop
    from agentloop import GovernanceOptions, ToolPolicy

    model = ScriptedChatModel([plan_reply("response"), "ok"])
    graph = create_tool_loop(
        model, [add], governance=GovernanceOptions(policies={"add": ToolPolicy(timeout_s=3)})
    )
    assert graph.invoke({"user_input": "hi"})["answer"] == "ok"
    with pytest.raises(TypeError, match="unexpected keyword argument 'policies'"):
        create_tool_loop(model, [add], policies={})  # type: ignore[call-arg]
    for old in ("ModelRetry", "ToolCall"):
        with pytest.raises(AttributeError, match=old):
            getattr(agentloop, old)


def test_retry_policies_accept_langgraphs_retry_policy() -> None:
    from langgraph.types import RetryPolicy

    from agentloop import ModelOptions, ToolPolicy, ToolRetry

    policy = ToolPolicy(retry=RetryPolicy(max_attempts=5, initial_interval=0.1))
    assert policy.retry == ToolRetry.of(RetryPolicy(max_attempts=5, initial_interval=0.1))
    assert policy.retry is not None and policy.retry.max_attempts == 5
    options = ModelOptions(retry=RetryPolicy(max_attempts=2, backoff_factor=3.0))
    assert options.retry.max_attempts == 2 and options.retry.multiplier == 3.0
