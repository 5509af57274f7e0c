"""LangChain `AgentMiddleware` around the loop's model calls and tool calls."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents.middleware import (
    AgentMiddleware,
    ModelFallbackMiddleware,
    ModelRequest,
    ToolCallLimitMiddleware,
    ToolRetryMiddleware,
    wrap_model_call,
    wrap_tool_call,
)
from langchain.agents.middleware.types import ExtendedModelResponse
from langchain_core.messages import AIMessage, SystemMessage, ToolCall, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from agentloop import (
    ConfigurationError,
    GovernanceOptions,
    ModelOptions,
    PlanningOptions,
    ToolPolicy,
    create_tool_loop,
)
from agentloop.testing import ScriptedChatModel, plan_reply

deleted: list[str] = []


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    deleted.append(path)
    return f"deleted {path}"


def _plans(*commands: dict[str, Any]) -> list[Any]:
    return [plan_reply("execute", list(commands)), plan_reply("response")]


def _call(name: str, **kwargs: Any) -> dict[str, Any]:
    return {"tool_name": name, "tool_kwargs": kwargs}


async def test_model_fallback_middleware_rescues_a_failing_planner(run_loop: Any) -> None:
    failing = ScriptedChatModel([ValueError("planner is down")], repeat_last=True)
    backup = ScriptedChatModel(_plans(_call("read_file", path="a.txt")))
    answerer = ScriptedChatModel(["It says hello."])
    graph = create_tool_loop(
        failing,
        [read_file],
        models=ModelOptions(answer_model=answerer),
        middleware=[ModelFallbackMiddleware(backup)],
    )
    out = await run_loop(graph, {"user_input": "What is in a.txt?"})
    assert out["status"] == "ok"
    assert out["answer"] == "It says hello."
    assert out["tool_logs"][0]["result"] == "contents of a.txt"
    assert failing.request_count == 2 and backup.request_count == 2


async def test_a_failing_planner_without_the_middleware_fails_the_run(run_loop: Any) -> None:
    failing = ScriptedChatModel([ValueError("planner is down")], repeat_last=True)
    graph = create_tool_loop(
        failing, [read_file], models=ModelOptions(answer_model=ScriptedChatModel(["x"]))
    )
    out = await run_loop(graph, {"user_input": "What is in a.txt?"})
    assert out["status"] == "planner_failed"


@wrap_tool_call
def no_deletes(request: Any, handler: Any) -> Any:
    """Block deleting; let everything else through."""
    if request.tool_call["name"] == "delete_file":
        return ToolMessage(
            "deleting files is not allowed", tool_call_id=request.tool_call["id"], status="error"
        )
    return handler(request)


async def test_wrap_tool_call_blocks_one_call_and_lets_another_through(run_loop: Any) -> None:
    deleted.clear()
    planner = ScriptedChatModel(
        _plans(_call("read_file", path="a.txt"), _call("delete_file", path="a.txt"))
    )
    graph = create_tool_loop(
        planner,
        [read_file, delete_file],
        models=ModelOptions(answer_model=ScriptedChatModel(["done"])),
        middleware=[no_deletes],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": f"guarded-{run_loop.entry}"}}
    out = await run_loop(graph, {"user_input": "read then delete a.txt"}, config)
    read, delete = out["round_state"]["done_plans"]
    assert read["success"] and read["result"] == "contents of a.txt"
    assert not delete["success"]
    assert delete["error"] == "deleting files is not allowed"
    assert deleted == []


async def test_tool_retry_middleware_retries_a_failing_tool(run_loop: Any) -> None:
    attempts: list[str] = []

    @tool
    def send_report(to: str) -> str:
        """Send the report (fails twice, then works)."""
        attempts.append(to)
        if len(attempts) < 3:
            raise ConnectionError("mail server busy")
        return f"sent to {to}"

    retry = ToolRetryMiddleware(max_retries=2, initial_delay=0.0, jitter=False)
    graph = create_tool_loop(
        ScriptedChatModel(_plans(_call("send_report", to="ops"))),
        [send_report],
        models=ModelOptions(answer_model=ScriptedChatModel(["sent"])),
        middleware=[retry],
    )
    out = await run_loop(graph, {"user_input": "send it"})
    [record] = out["tool_logs"]
    assert record["success"] and record["result"] == "sent to ops"
    assert attempts == ["ops", "ops", "ops"]  # not idempotent: only the middleware retried


async def test_a_failure_no_middleware_handles_keeps_its_record(run_loop: Any) -> None:
    @tool
    def send_report(to: str) -> str:
        """Send the report (always times out)."""
        raise TimeoutError("mail server did not answer")

    @wrap_tool_call
    async def passthrough(request: Any, handler: Any) -> Any:
        """Let everything through."""
        return await handler(request)

    graph = create_tool_loop(
        ScriptedChatModel(_plans(_call("send_report", to="ops"))),
        [send_report],
        models=ModelOptions(answer_model=ScriptedChatModel(["not sent"])),
        middleware=[passthrough],
    )
    out = await run_loop(graph, {"user_input": "send it"})
    [record] = out["tool_logs"]
    assert not record["success"]
    assert record["error_type"] == "timeout"
    assert record["error"].startswith("send_report did not finish")


async def test_wrap_tool_call_sees_the_call_the_tool_and_a_tool_runtime(run_loop: Any) -> None:
    seen: list[Any] = []

    class Recorder(AgentMiddleware):
        async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
            seen.append(request)
            message = await handler(
                request.override(tool_call={**request.tool_call, "args": {"path": "b.txt"}})
            )
            return message  # fmt: skip

    planner = ScriptedChatModel(_plans(_call("read_file", path="a.txt")))
    graph = create_tool_loop(
        planner,
        [read_file],
        models=ModelOptions(answer_model=ScriptedChatModel(["ok"])),
        middleware=[Recorder()],
    )
    out = await run_loop(graph, {"user_input": "read a.txt"})
    [request] = seen
    assert request.tool_call["name"] == "read_file"
    assert request.tool_call["args"] == {"path": "a.txt"}
    assert request.tool is not None and request.tool.name == "read_file"
    assert request.runtime.tool_call_id == out["tool_logs"][0]["tool_call_id"]
    assert request.tool_call["id"] == out["tool_logs"][0]["tool_call_id"]
    assert request.state["user_input"] == "read a.txt"
    assert out["tool_logs"][0]["result"] == "contents of b.txt"  # the overridden call ran


async def test_wrap_model_call_wraps_every_planner_and_answer_call(run_loop: Any) -> None:
    seen: list[tuple[str, str]] = []

    @wrap_model_call
    def record(request: ModelRequest, handler: Any) -> Any:
        """Record which call it is and what it is asked."""
        assert isinstance(request.system_message, SystemMessage)
        seen.append((request.state["agentloop_model_call"], request.system_message.text[:12]))
        return handler(request)

    planner = ScriptedChatModel(_plans(_call("read_file", path="a.txt")))
    graph = create_tool_loop(
        planner,
        [read_file],
        models=ModelOptions(answer_model=ScriptedChatModel(["fine"])),
        system_prompt="House rules.",
        middleware=[record],
    )
    out = await run_loop(graph, {"user_input": "read a.txt"})
    assert out["answer"] == "fine"
    assert seen == [("plan", "House rules."), ("plan", "House rules."), ("answer", "House rules.")]


class BothHooks(AgentMiddleware[Any, Any, Any]):
    """Records which of its two hooks wrapped each model call."""

    def __init__(self) -> None:
        super().__init__()
        self.hooks: list[tuple[str, str]] = []

    def wrap_model_call(self, request: ModelRequest, handler: Any) -> Any:
        self.hooks.append(("wrap_model_call", request.state["agentloop_model_call"]))
        return handler(request)

    async def awrap_model_call(self, request: ModelRequest, handler: Any) -> Any:
        self.hooks.append(("awrap_model_call", request.state["agentloop_model_call"]))
        return await handler(request)


class AsyncOnly(AgentMiddleware[Any, Any, Any]):
    """Wraps model calls with an async hook only."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    async def awrap_model_call(self, request: ModelRequest, handler: Any) -> Any:
        self.calls.append(request.state["agentloop_model_call"])
        return await handler(request)


async def test_invoke_runs_wrap_model_call_and_ainvoke_awrap_model_call(run_loop: Any) -> None:
    both, async_only = BothHooks(), AsyncOnly()
    reply_call = ToolCall(name="Reply", args={"ok": True}, id="call_reply")
    graph = create_tool_loop(
        ScriptedChatModel(_plans(_call("read_file", path="a.txt"))),
        [read_file],
        models=ModelOptions(
            answer_model=ScriptedChatModel(["fine", AIMessage("", tool_calls=[reply_call])])
        ),
        response_format={"title": "Reply", "type": "object", "properties": {"ok": {}}},
        middleware=[both, async_only],
    )
    out = await run_loop(graph, {"user_input": "read a.txt"})
    assert out["answer"] == "fine" and out["structured_response"] == {"ok": True}
    hook = "wrap_model_call" if run_loop.entry == "invoke" else "awrap_model_call"
    calls = ["plan", "plan", "answer", "structured_response"]
    assert both.hooks == [(hook, call) for call in calls]
    assert async_only.calls == calls  # bridged under invoke


async def test_model_middleware_sees_the_answer_even_with_speculative_answers(
    run_loop: Any,
) -> None:
    calls: list[str] = []

    @wrap_model_call
    async def count(request: ModelRequest, handler: Any) -> Any:
        """Count the calls by kind."""
        calls.append(request.state["agentloop_model_call"])
        return await handler(request)

    graph = create_tool_loop(
        ScriptedChatModel([plan_reply("response")]),
        [read_file],
        models=ModelOptions(answer_model=ScriptedChatModel(["hi"])),
        middleware=[count],
        planning=PlanningOptions(speculative_answer=True),
    )
    out = await run_loop(graph, {"user_input": "hello"})
    assert out["answer"] == "hi"
    assert calls == ["plan", "answer"]


async def test_model_settings_reach_the_model_like_prompt_cache_markers(run_loop: Any) -> None:
    @wrap_model_call
    def cache_marker(request: ModelRequest, handler: Any) -> Any:
        """Ask the provider to cache the prompt (as provider caching middleware does)."""
        settings = {**request.model_settings, "cache_control": {"type": "ephemeral"}}
        return handler(request.override(model_settings=settings))

    planner = ScriptedChatModel(_plans(_call("read_file", path="a.txt")))
    answerer = ScriptedChatModel(["done"])
    graph = create_tool_loop(
        planner, [read_file], models=ModelOptions(answer_model=answerer), middleware=[cache_marker]
    )
    await run_loop(graph, {"user_input": "read"})
    marker = {"type": "ephemeral"}
    assert [options.get("cache_control") for options in planner.request_options] == [marker] * 2
    assert answerer.request_options[0]["cache_control"] == marker


async def test_a_command_from_wrap_model_call_fails_the_plan_clearly(run_loop: Any) -> None:
    @wrap_model_call
    def commanding(request: ModelRequest, handler: Any) -> Any:
        """Try to update the state from a model call."""
        return ExtendedModelResponse(model_response=handler(request), command=Command(update={}))

    graph = create_tool_loop(
        ScriptedChatModel(_plans()),
        [read_file],
        models=ModelOptions(answer_model=ScriptedChatModel(["x"])),
        middleware=[commanding],
    )
    out = await run_loop(graph, {"user_input": "hi"})
    assert out["status"] == "planner_failed"
    assert "does not apply Command updates" in out["status_reason"]


async def test_a_reply_written_by_middleware_is_used(run_loop: Any) -> None:
    @wrap_model_call
    async def canned(request: ModelRequest, handler: Any) -> Any:
        """Answer from a cache; plan with the model."""
        if request.state["agentloop_model_call"] == "answer":
            return AIMessage("From the cache.")
        return await handler(request)

    answerer = ScriptedChatModel(["never asked"])
    graph = create_tool_loop(
        ScriptedChatModel(_plans(_call("read_file", path="a.txt"))),
        [read_file],
        models=ModelOptions(answer_model=answerer),
        middleware=[canned],
    )
    out = await run_loop(graph, {"user_input": "read a.txt"})
    assert out["answer"] == "From the cache."
    assert answerer.request_count == 0


async def test_middleware_tools_join_the_loops_tools(run_loop: Any) -> None:
    @tool
    def clock() -> str:
        """The time."""
        return "12:00"

    class ClockMiddleware(AgentMiddleware):
        def __init__(self) -> None:
            super().__init__()
            self.tools = [clock]

    planner = ScriptedChatModel(_plans(_call("clock")))
    graph = create_tool_loop(
        planner,
        [read_file],
        models=ModelOptions(answer_model=ScriptedChatModel(["noon"])),
        middleware=[ClockMiddleware()],
    )
    out = await run_loop(graph, {"user_input": "time?"})
    assert out["tool_logs"][0]["result"] == "12:00"
    assert '"clock"' in planner.requests[0][0].content  # the tool list, in the rules


def test_node_hooks_build_and_only_non_middleware_is_refused() -> None:
    """`before_*` / `after_*` hooks run now (tests/unit/test_middleware_hooks.py)."""

    @wrap_model_call
    def fine(request: ModelRequest, handler: Any) -> Any:
        """Wraps only."""
        return handler(request)

    class Trims(AgentMiddleware):
        def before_model(self, state: Any, runtime: Any) -> Any:
            return None

    for middleware in ([ToolCallLimitMiddleware(run_limit=1)], [fine, Trims()]):
        graph = create_tool_loop(ScriptedChatModel([]), [read_file], middleware=middleware)
        assert {"plan", "answer"} <= set(graph.get_graph().nodes)
    with pytest.raises(ConfigurationError, match="AgentMiddleware"):
        create_tool_loop(ScriptedChatModel([]), [read_file], middleware=[object()])  # type: ignore[list-item]


async def test_middleware_wraps_in_list_order_around_the_loops_cache(run_loop: Any) -> None:
    order: list[str] = []

    @wrap_tool_call
    def audit(request: Any, handler: Any) -> Any:
        """First in the list: the outermost, as a mandatory audit."""
        order.append("first")
        return handler(request)

    @wrap_tool_call
    async def middle(request: Any, handler: Any) -> Any:
        """Between the two."""
        order.append("middleware")
        return await handler(request)

    @wrap_tool_call
    def last(request: Any, handler: Any) -> Any:
        """Last in the list: the innermost app layer, outside the loop's cache."""
        order.append("last")
        result = handler(request)
        order.append(f"from_cache={result.response_metadata.get('from_cache', False)}")
        return result

    graph = create_tool_loop(
        ScriptedChatModel(_plans(_call("read_file", path="a.txt")) * 2),
        [read_file],
        models=ModelOptions(answer_model=ScriptedChatModel(["ok"], repeat_last=True)),
        middleware=[audit, middle, last],
        governance=GovernanceOptions(policies={"read_file": ToolPolicy(cache_ttl_s=60)}),
    )
    await run_loop(graph, {"user_input": "read"})
    assert order == ["first", "middleware", "last", "from_cache=False"]
    order.clear()
    await run_loop(graph, {"user_input": "read"})
    assert order == ["first", "middleware", "last", "from_cache=True"]  # the cache is inside
