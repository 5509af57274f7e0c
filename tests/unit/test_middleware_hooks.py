"""`before_agent`, `before_model`, `after_model`, `after_agent`, `jump_to` and `state_schema`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NotRequired

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import (
    AgentMiddleware,
    AgentState,
    ModelCallLimitMiddleware,
    after_model,
    before_model,
    hook_config,
)
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from agentloop import ModelOptions, create_tool_loop
from agentloop.testing import ScriptedChatModel, plan_reply

HOOKS = ("before_agent", "before_model", "after_model", "after_agent")


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


def _read(path: str) -> dict[str, Any]:
    return {"tool_name": "read_file", "tool_kwargs": {"path": path}}


def _thread(name: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


class _Seen(AgentState):
    greeting: NotRequired[str]


class Recorder(AgentMiddleware):
    """Records each hook it runs (sync and async twins), and writes its own state key."""

    state_schema = _Seen

    def __init__(self, name: str, log: list[str]) -> None:
        super().__init__()
        self._name = name
        self.log = log

    @property
    def name(self) -> str:
        return self._name

    def _record(self, hook: str) -> None:
        self.log.append(f"{self._name}.{hook}")

    def before_agent(self, state: Any, runtime: Any) -> dict[str, Any]:
        self._record("before_agent")
        return {"greeting": f"hello from {self._name}"}

    async def abefore_agent(self, state: Any, runtime: Any) -> dict[str, Any]:
        return self.before_agent(state, runtime)

    def before_model(self, state: Any, runtime: Any) -> None:
        self._record("before_model")

    async def abefore_model(self, state: Any, runtime: Any) -> None:
        self.before_model(state, runtime)

    def after_model(self, state: Any, runtime: Any) -> None:
        self._record("after_model")

    async def aafter_model(self, state: Any, runtime: Any) -> None:
        self.after_model(state, runtime)

    def after_agent(self, state: Any, runtime: Any) -> None:
        self._record("after_agent")

    async def aafter_agent(self, state: Any, runtime: Any) -> None:
        self.after_agent(state, runtime)


def _count(log: list[str], hook: str) -> int:
    return sum(entry.endswith(f".{hook}") for entry in log)


async def test_each_hook_runs_once_per_run_or_once_per_model_call(
    run_loop: Any, planning_for: Callable[..., dict[str, Any]]
) -> None:
    log: list[str] = []
    planner = ScriptedChatModel(
        [plan_reply("execute", [_read("a.txt")]), plan_reply("response")] * 2
    )
    answerer = ScriptedChatModel(["It says hello.", "Still hello."])
    graph = create_tool_loop(
        planner,
        [read_file],
        models=ModelOptions(answer_model=answerer),
        middleware=[Recorder("audit", log)],
        checkpointer=InMemorySaver(),
        **planning_for(),
    )
    for turn in (1, 2):
        out = await run_loop(graph, {"user_input": f"What is in a.txt? ({turn})"}, _thread("t"))
        assert out["status"] == "ok"
        model_calls = planner.request_count + answerer.request_count
        assert _count(log, "before_agent") == turn and _count(log, "after_agent") == turn
        assert _count(log, "before_model") == model_calls
        assert _count(log, "after_model") == model_calls
    assert planner.request_count == 4  # two planner calls per run, each with its hooks
    assert log[0] == "audit.before_agent" and log[-1] == "audit.after_agent"


async def test_a_state_schema_key_written_by_before_agent_is_kept(
    run_loop: Any, planning_for: Callable[..., dict[str, Any]]
) -> None:
    graph = create_tool_loop(
        ScriptedChatModel([plan_reply("response")]),
        [read_file],
        models=ModelOptions(answer_model=ScriptedChatModel(["Hi."])),
        middleware=[Recorder("greeter", [])],
        checkpointer=InMemorySaver(),
        **planning_for(),
    )
    out = await run_loop(graph, {"user_input": "Hello?"}, _thread("s"))
    assert out["greeting"] == "hello from greeter"
    assert graph.get_state(_thread("s")).values["greeting"] == "hello from greeter"


async def test_sync_only_and_async_only_hooks_run_under_invoke_and_ainvoke(
    run_loop: Any,
) -> None:
    seen: list[str] = []

    @before_model
    def count_before(state: Any, runtime: Any) -> None:
        seen.append("before")

    @after_model
    async def count_after(state: Any, runtime: Any) -> None:
        seen.append("after")

    planner = ScriptedChatModel([plan_reply("execute", [_read("a.txt")]), plan_reply("response")])
    answerer = ScriptedChatModel(["It says hello."])
    graph = create_tool_loop(
        planner,
        [read_file],
        models=ModelOptions(answer_model=answerer),
        middleware=[count_before, count_after],
        checkpointer=InMemorySaver(),
    )
    out = await run_loop(graph, {"user_input": "What is in a.txt?"}, _thread("d"))
    assert out["status"] == "ok"
    assert seen == ["before", "after"] * 3  # two planner calls and the answer


class Gate(AgentMiddleware):
    """Ends every run before its first model call, with a reply of its own."""

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: Any, runtime: Any) -> dict[str, Any]:
        return {"jump_to": "end", "messages": [AIMessage("Closed for maintenance.")]}


async def test_before_model_jumping_to_end_ends_the_run_without_a_model_call(
    run_loop: Any, planning_for: Callable[..., dict[str, Any]]
) -> None:
    log: list[str] = []
    planner = ScriptedChatModel([plan_reply("response")])
    answerer = ScriptedChatModel(["never"])
    graph = create_tool_loop(
        planner,
        [read_file],
        models=ModelOptions(answer_model=answerer),
        middleware=[Recorder("audit", log), Gate()],
        checkpointer=InMemorySaver(),
        **planning_for(),
    )
    out = await run_loop(graph, {"user_input": "Open?"}, _thread("g"))
    assert planner.request_count == 0 and answerer.request_count == 0
    assert out["status"] == "ended"
    assert out["status_reason"] == "Gate.before_model ended the run (jump_to='end')"
    assert out["answer"] == "Closed for maintenance."
    assert out["messages"][-1].content == "Closed for maintenance."
    # the hooks after the jump do not run; after_agent still does
    assert log == ["audit.before_agent", "audit.before_model", "audit.after_agent"]


class Closed(AgentMiddleware):
    """Ends every run before it starts."""

    @hook_config(can_jump_to=["end"])
    def before_agent(self, state: Any, runtime: Any) -> dict[str, Any]:
        return {"jump_to": "end", "messages": [AIMessage("Closed today.")]}


async def test_before_agent_jumping_to_end_skips_the_run_but_not_after_agent(
    run_loop: Any,
) -> None:
    log: list[str] = []
    planner = ScriptedChatModel([plan_reply("response")])
    graph = create_tool_loop(
        planner,
        [read_file],
        models=ModelOptions(answer_model=ScriptedChatModel(["never"])),
        middleware=[Closed(), Recorder("audit", log)],
        checkpointer=InMemorySaver(),
    )
    out = await run_loop(graph, {"user_input": "Open?"}, _thread("c"))
    assert planner.request_count == 0
    assert (out["status"], out["answer"]) == ("ended", "Closed today.")
    assert log == ["audit.after_agent"]  # the jump skipped the later before_agent too


class RejectFirstAnswer(AgentMiddleware):
    """Sends the loop back to plan once, after the first answer (it sees it in the state)."""

    def __init__(self) -> None:
        super().__init__()
        self.rejected: list[str] = []

    @hook_config(can_jump_to=["model"])
    def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        if state.get("answer") and not self.rejected:
            self.rejected.append(state["answer"])
            return {"jump_to": "model"}
        return None


@pytest.mark.json_only("a native planner's text reply is the answer: no answer model call")
async def test_after_model_jumping_to_model_after_the_answer_plans_again(
    run_loop: Any, planning_for: Callable[..., dict[str, Any]]
) -> None:
    planner = ScriptedChatModel([plan_reply("response"), plan_reply("response")])
    answerer = ScriptedChatModel(["First try.", "Second try."])
    reject = RejectFirstAnswer()
    graph = create_tool_loop(
        planner,
        [read_file],
        models=ModelOptions(answer_model=answerer),
        middleware=[reject],
        checkpointer=InMemorySaver(),
        **planning_for(),
    )
    out = await run_loop(graph, {"user_input": "Hello?"}, _thread("r"))
    assert out["status"] == "ok"
    assert reject.rejected == ["First try."]
    assert planner.request_count == 2 and answerer.request_count == 2
    assert out["answer"] == "Second try."
    assert [m.content for m in out["messages"][1:]] == ["First try.", "Second try."]


class WritesThePlan(AgentMiddleware):
    """Skips the first planner call: writes a plan itself and jumps to the tools."""

    @hook_config(can_jump_to=["tools"])
    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        if (state.get("round_state") or {}).get("round_index"):
            return None  # the round it wrote ran: the planner plans from here
        command = {**_read("b.txt"), "purpose": "read b", "todo_suggestion": "", "next": ""}
        decision = {"next_action": "execute", "execution_commands": [command]}
        return {"decision": decision, "jump_to": "tools"}


async def test_before_model_jumping_to_tools_runs_the_state_decision(
    run_loop: Any, planning_for: Callable[..., dict[str, Any]]
) -> None:
    planner = ScriptedChatModel([plan_reply("response")])
    graph = create_tool_loop(
        planner,
        [read_file],
        models=ModelOptions(answer_model=ScriptedChatModel(["b says hi."])),
        middleware=[WritesThePlan()],
        checkpointer=InMemorySaver(),
        **planning_for(),
    )
    out = await run_loop(graph, {"user_input": "What is in b.txt?"}, _thread("w"))
    assert out["status"] == "ok"
    assert [log["result"] for log in out["tool_logs"]] == ["contents of b.txt"]
    assert planner.request_count == 1  # only the call after the round


async def test_hook_order_of_two_middleware_matches_create_agent(run_loop: Any) -> None:
    agent_log: list[str] = []
    agent = create_agent(
        ScriptedChatModel(["Hi."]),
        middleware=[Recorder("first", agent_log), Recorder("second", agent_log)],
        checkpointer=InMemorySaver(),
    )
    await run_loop(agent, {"messages": [("user", "Hello?")]}, _thread("a"))
    loop_log: list[str] = []
    graph = create_tool_loop(
        ScriptedChatModel([plan_reply("response")]),
        [read_file],
        models=ModelOptions(answer_model=ScriptedChatModel(["Hi."])),
        middleware=[Recorder("first", loop_log), Recorder("second", loop_log)],
        checkpointer=InMemorySaver(),
    )
    await run_loop(graph, {"user_input": "Hello?"}, _thread("l"))
    # create_agent made one model call; the loop two (the planner's, the answer's)
    start, one_call, end = agent_log[:2], agent_log[2:6], agent_log[6:]
    assert one_call == [
        "first.before_model",
        "second.before_model",
        "second.after_model",
        "first.after_model",
    ]
    assert loop_log == [*start, *one_call, *one_call, *end]
    assert end == ["second.after_agent", "first.after_agent"]


async def test_model_call_limit_middleware_ends_the_run_at_its_limit(
    run_loop: Any, planning_for: Callable[..., dict[str, Any]]
) -> None:
    planner = ScriptedChatModel([plan_reply("execute", [_read("a.txt")]), plan_reply("response")])
    answerer = ScriptedChatModel(["never"])
    graph = create_tool_loop(
        planner,
        [read_file],
        models=ModelOptions(answer_model=answerer),
        middleware=[ModelCallLimitMiddleware(run_limit=1)],
        checkpointer=InMemorySaver(),
        **planning_for(),
    )
    out = await run_loop(graph, {"user_input": "What is in a.txt?"}, _thread("m"))
    assert planner.request_count == 1 and answerer.request_count == 0
    assert out["status"] == "ended"
    assert out["answer"] == "Model call limits exceeded: run limit (1/1)"
    assert [log["result"] for log in out["tool_logs"]] == ["contents of a.txt"]


def test_only_agent_hooks_add_nodes_and_only_jumps_add_edges() -> None:
    def build(middleware: list[Any]) -> Any:
        graph = create_tool_loop(
            ScriptedChatModel([]), [read_file], middleware=middleware, checkpointer=InMemorySaver()
        )
        return graph.get_graph()

    plain = build([])
    limited = build([ModelCallLimitMiddleware(run_limit=3)])
    # before_model runs inside plan and answer; after_model in a node after each
    assert set(limited.nodes) - set(plain.nodes) == {"plan.after_model", "answer.after_model"}
    added = {(e.source, e.target) for e in limited.edges} - {
        (e.source, e.target) for e in plain.edges
    }
    assert added == {
        ("plan", "__end__"),  # its before_model may end the run
        ("plan", "plan.after_model"),
        ("plan.after_model", "execute"),
        ("plan.after_model", "answer"),
        ("answer", "answer.after_model"),
        ("answer.after_model", "__end__"),
    }
    hooked = build([Recorder("audit", [])])
    assert set(hooked.nodes) - set(plain.nodes) == {
        "audit.before_agent",
        "audit.after_agent",
        "plan.after_model",
        "answer.after_model",
    }
