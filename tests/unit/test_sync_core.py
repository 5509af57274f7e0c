"""Under `invoke`, one event loop and one thread pool per compiled loop, never one per call."""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import Callable
from typing import Any

import pytest
from langchain.agents.middleware import AgentMiddleware, ModelRequest, wrap_tool_call
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from agentloop import GovernanceOptions, ModelOptions, ToolPolicy, ToolThreads, create_tool_loop
from agentloop.testing import ScriptedChatModel, plan_reply

CITIES = ("Paris", "Oslo", "Lima", "Kyiv")


@tool
async def weather(city: str) -> str:
    """Read a city's weather (async only)."""
    await asyncio.sleep(0.001)
    return f"{city}: sunny"


@tool
def population(city: str) -> str:
    """Read a city's population (sync only)."""
    return f"{city}: {len(city)} million"


@wrap_tool_call
def audited(request: Any, handler: Any) -> Any:
    """Let every call through (a sync `wrap_tool_call` middleware)."""
    return handler(request)


class AsyncModelWatch(AgentMiddleware[Any, Any, Any]):
    """Wraps model calls with an async hook only (bridged under `invoke`)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    async def awrap_model_call(self, request: ModelRequest, handler: Any) -> Any:
        self.calls.append(request.state["agentloop_model_call"])
        return await handler(request)


class AsyncHooks(AgentMiddleware[Any, Any, Any]):
    """Node hooks with only their async form (run on the loop's event loop under `invoke`)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    async def abefore_agent(self, state: Any, runtime: Any) -> None:
        self.calls.append("before_agent")

    async def abefore_model(self, state: Any, runtime: Any) -> None:
        self.calls.append("before_model")

    async def aafter_model(self, state: Any, runtime: Any) -> None:
        self.calls.append("after_model")

    async def aafter_agent(self, state: Any, runtime: Any) -> None:
        self.calls.append("after_agent")


def _graph(
    tool_name: str,
    *,
    rounds: int = 1,
    threads: ToolThreads | None = None,
    middleware: bool = True,
    hooks: AsyncHooks | None = None,
    checkpointer: Any = None,
) -> Any:
    """A loop whose planner calls `tool_name` once per city, in one round, `rounds` times.

    With `middleware`, a sync `wrap_tool_call` one and an async-only model one.
    """
    calls = [{"tool_name": tool_name, "tool_kwargs": {"city": city}} for city in CITIES]
    plans = [plan_reply("execute", calls), plan_reply("response")]
    script = [reply for _ in range(rounds) for reply in plans]
    return create_tool_loop(
        ScriptedChatModel(script),
        [weather, population],
        models=ModelOptions(answer_model=ScriptedChatModel(["done"] * rounds)),
        governance=GovernanceOptions(default_retry=None, tool_threads=threads),
        middleware=[
            *([audited, AsyncModelWatch()] if middleware else []),
            *([hooks] if hooks is not None else []),
        ],
        checkpointer=checkpointer,
    )


def _results(out: dict[str, Any]) -> list[tuple[str, str, bool]]:
    records = out["round_state"]["done_plans"]
    return [(record["tool_name"], record["result"], record["success"]) for record in records]


@pytest.fixture
def loops_created(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the threads that created an event loop, from now on."""
    created: list[str] = []
    init = asyncio.BaseEventLoop.__init__

    def counting(self: asyncio.BaseEventLoop) -> None:
        created.append(threading.current_thread().name)
        init(self)

    monkeypatch.setattr(asyncio.BaseEventLoop, "__init__", counting)
    return created


@pytest.fixture
def threads_started(monkeypatch: pytest.MonkeyPatch) -> list[threading.Thread]:
    """The threads started from now on."""
    started: list[threading.Thread] = []
    start = threading.Thread.start

    def counting(self: threading.Thread) -> None:
        started.append(self)
        start(self)

    monkeypatch.setattr(threading.Thread, "start", counting)
    return started


def test_invoke_starts_one_event_loop_for_the_compiled_loop_not_one_per_call(
    loops_created: list[str],
) -> None:
    graph = _graph("weather", rounds=2)
    first = graph.invoke({"user_input": "weather in four cities"})
    assert _results(first) == [("weather", f"{city}: sunny", True) for city in CITIES]
    assert len(loops_created) <= 1  # four async tool calls, two middleware, one loop
    second = graph.invoke({"user_input": "weather in four cities again"})
    assert _results(second) == _results(first)
    assert len(loops_created) <= 1  # the same loop served the second run


def test_async_only_node_hooks_under_invoke_run_on_the_loops_one_event_loop(
    loops_created: list[str],
) -> None:
    hooks = AsyncHooks()
    graph = _graph("weather", rounds=2, hooks=hooks)
    for _ in range(2):
        out = graph.invoke({"user_input": "weather in four cities"})
        assert _results(out) == [("weather", f"{city}: sunny", True) for city in CITIES]
    # per run: before_agent, then before/after each of 2 planner calls and 1 answer call
    assert hooks.calls.count("before_agent") == hooks.calls.count("after_agent") == 2
    assert hooks.calls.count("before_model") == hooks.calls.count("after_model") == 6
    assert len(loops_created) <= 1


def test_sync_tools_and_model_streams_share_the_loops_thread_pool(
    threads_started: list[threading.Thread],
) -> None:
    threads = ToolThreads(max_running=2)
    graph = _graph("population", rounds=2, threads=threads, middleware=False)
    outs = [graph.invoke({"user_input": f"populations, run {n}"}) for n in (1, 2)]
    expected = [("population", f"{city}: {len(city)} million", True) for city in CITIES]
    assert [_results(out) for out in outs] == [expected, expected]
    # 8 tool calls and 4 streamed model replies over 2 runs: every thread started is
    # one of the pool's, at most its size
    assert 1 <= len(threads_started) <= threads.max_running
    assert all(thread.name.startswith("agentloop-tool") for thread in threads_started)
    assert threads.workers.started == len(threads_started)


def test_the_loops_threads_end_with_it(threads_started: list[threading.Thread]) -> None:
    graph = _graph("weather")  # an async tool and async middleware: the event loop starts
    graph.invoke({"user_input": "weather in four cities"})
    names = sorted(thread.name for thread in threads_started)
    assert "agentloop-loop" in names and "agentloop-tool-1" in names
    del graph
    gc.collect()
    for thread in threads_started:
        thread.join(5)
    assert not [thread.name for thread in threads_started if thread.is_alive()]


def test_a_hung_sync_tool_does_not_starve_later_calls() -> None:
    release = threading.Event()

    @tool
    def stuck(city: str) -> str:
        """Hang until released."""
        release.wait(10)
        return "late"

    plans = [
        plan_reply("execute", [{"tool_name": "stuck", "tool_kwargs": {"city": "Oslo"}}]),
        plan_reply("execute", [{"tool_name": "population", "tool_kwargs": {"city": "Lima"}}]),
        plan_reply("response"),
    ]
    threads = ToolThreads(max_running=1)
    graph = create_tool_loop(
        ScriptedChatModel(plans),
        [stuck, population],
        models=ModelOptions(answer_model=ScriptedChatModel(["done"])),
        governance=GovernanceOptions(
            default_retry=None,
            tool_threads=threads,
            policies={"stuck": ToolPolicy(timeout_s=0.2, read_only=True)},
        ),
    )
    try:
        out = graph.invoke({"user_input": "a hung tool, then another"})
        hung, later = out["round_state"]["done_plans"]
        assert not hung["success"] and "did not finish within 0.2s" in hung["error"]
        assert later["success"] and later["result"] == "Lima: 4 million"
        assert threads.abandoned("stuck") == 1  # its thread runs on, given up by the pool
    finally:
        release.set()


Entry = Callable[[Any, dict[str, Any]], dict[str, Any]]


def _invoke(graph: Any, payload: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = graph.invoke(payload)
    return out


def _ainvoke(graph: Any, payload: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = asyncio.run(graph.ainvoke(payload))
    return out


@pytest.mark.parametrize("tool_name", ["weather", "population"])
def test_invoke_and_ainvoke_give_the_same_records(tool_name: str) -> None:
    runs = {
        name: entry(_graph(tool_name, rounds=2), {"user_input": "four cities"})
        for name, entry in (("invoke", _invoke), ("ainvoke", _ainvoke))
    }
    assert _results(runs["invoke"]) == _results(runs["ainvoke"])
    assert len(_results(runs["invoke"])) == len(CITIES)
    assert runs["invoke"]["answer"] == runs["ainvoke"]["answer"] == "done"


@pytest.mark.parametrize("tool_name", ["weather", "population"])
async def test_invoke_from_a_thread_that_runs_an_event_loop_works_as_in_a_notebook(
    tool_name: str,
) -> None:
    """A notebook runs its cells on an event loop: `invoke` there blocks it, and must work.

    With a checkpointer and the app's middleware (a sync tool one, an async-only model
    one), as a notebook's loop would have; the records equal those of `ainvoke`.
    """
    graph = _graph(tool_name, rounds=2, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "notebook"}}
    out = graph.invoke({"user_input": "four cities"}, config)  # this thread runs a loop
    expected = (
        [("weather", f"{city}: sunny", True) for city in CITIES]
        if tool_name == "weather"
        else [("population", f"{city}: {len(city)} million", True) for city in CITIES]
    )
    assert _results(out) == expected
    assert out["answer"] == "done"
    again = await _graph(tool_name, rounds=2).ainvoke({"user_input": "four cities"})
    assert _results(again) == expected


@wrap_tool_call
async def passthrough(request: Any, handler: Any) -> Any:
    """Let every call through (an async `wrap_tool_call` middleware)."""
    return await handler(request)


def test_a_tools_own_timeout_error_is_its_outcome_not_a_hung_thread() -> None:
    @tool
    def send_report(to: str) -> str:
        """Send the report (its mail server never answers)."""
        raise TimeoutError("mail server did not answer")

    for _ in range(20):  # the tool's error once raced the pool's own deadline
        graph = create_tool_loop(
            ScriptedChatModel(
                [
                    plan_reply(
                        "execute", [{"tool_name": "send_report", "tool_kwargs": {"to": "a"}}]
                    ),
                    plan_reply("response"),
                ]
            ),
            [send_report],
            models=ModelOptions(answer_model=ScriptedChatModel(["not sent"])),
            middleware=[passthrough],  # async: the call is awaited on the loop's event loop
        )
        [record] = graph.invoke({"user_input": "send it"})["tool_logs"]
        assert record["error_type"] == "timeout", record["error"]
        assert "runs on" not in record["error"]


@pytest.mark.parametrize("saver", [None, "memory"])
async def test_ainvoke_with_async_tools_and_models_hands_nothing_to_a_worker_thread(
    monkeypatch: pytest.MonkeyPatch, saver: str | None
) -> None:
    # LangGraph runs a plain sync route in the default executor under `ainvoke`: a thread
    # hop per run, or per round, that an all-async run has no use for
    handed: list[Any] = []
    run_in_executor = asyncio.BaseEventLoop.run_in_executor

    def counting(self: asyncio.BaseEventLoop, executor: Any, func: Any, *args: Any) -> Any:
        handed.append(func)
        return run_in_executor(self, executor, func, *args)

    monkeypatch.setattr(asyncio.BaseEventLoop, "run_in_executor", counting)
    checkpointer = InMemorySaver() if saver else None
    graph = _graph("weather", rounds=2, middleware=False, checkpointer=checkpointer)
    for run in (1, 2):
        config = {"configurable": {"thread_id": f"t{run}"}}
        out = await graph.ainvoke({"user_input": "weather in four cities"}, config)
        assert _results(out) == [("weather", f"{city}: sunny", True) for city in CITIES]
    assert handed == []
