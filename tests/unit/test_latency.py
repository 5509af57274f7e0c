"""Latency features through the public API: streaming dispatch and the speculative answer."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from agentloop import (
    GovernanceOptions,
    ModelOptions,
    PlanningOptions,
    ToolPolicy,
    create_tool_loop,
)
from agentloop.models.stream import ModelLimits
from agentloop.testing import ScriptedChatModel, plan_reply


def cmd(tool_name: str, **kwargs: Any) -> dict[str, Any]:
    return {"purpose": f"use {tool_name}", "tool_name": tool_name, "tool_kwargs": kwargs}


class Clock:
    """What the tools and models did, by label, in the order they did it."""

    def __init__(self) -> None:
        self.marks: list[str] = []
        self.lock = threading.Lock()

    def mark(self, label: str) -> None:
        with self.lock:
            self.marks.append(label)

    def count(self, label: str) -> int:
        return self.marks.count(label)

    def first(self, label: str) -> int:
        """Where `label` was first marked: a smaller place came earlier."""
        return self.marks.index(label)


def tools_for(clock: Clock, lookup_s: float = 0.2) -> list[Any]:
    @tool
    async def lookup(query: str) -> str:
        """Look something up (read-only)."""
        clock.mark("lookup started")
        try:
            await asyncio.sleep(lookup_s)
        except asyncio.CancelledError:
            clock.mark("lookup cancelled")
            raise
        clock.mark("lookup ended")
        return f"found {query}"

    @tool
    async def save_note(text: str) -> str:
        """Save a note (has side effects)."""
        clock.mark("save started")
        return f"saved {text}"

    return [lookup, save_note]


def timed_planner(clock: Clock, plans: list[str], **options: Any) -> ScriptedChatModel:
    """A planner that streams slowly and marks when each request starts."""

    def reply(text: str) -> Any:
        def start(messages: list[BaseMessage]) -> str:
            clock.mark("plan requested")
            return text

        return start

    return ScriptedChatModel(
        [reply(text) for text in plans], chunk_size=4, chunk_delay_s=0.01, **options
    )


def timed_answerer(clock: Clock, text: str = "the final answer") -> ScriptedChatModel:
    def start(messages: list[BaseMessage]) -> str:
        clock.mark("answer requested")
        return text

    return ScriptedChatModel([], responder=start, chunk_size=4, chunk_delay_s=0.005)


async def collect_events(graph: Any, payload: Any, entry: str, **kwargs: Any) -> list[Any]:
    """Run through `stream` (in a worker thread) or `astream`; return the custom events."""
    if entry == "invoke":
        return await asyncio.to_thread(
            lambda: list(graph.stream(payload, stream_mode="custom", **kwargs))
        )
    return [event async for event in graph.astream(payload, stream_mode="custom", **kwargs)]


ENTRIES = pytest.mark.parametrize("entry", ["invoke", "ainvoke"])
FOREVER_S = 3600.0
"""Longer than any test runs: a lookup this slow ends only when it is cancelled."""
TWO_LOOKUPS = str(
    plan_reply("execute", [cmd("lookup", query="tram news"), cmd("lookup", query="weather")])
)


@ENTRIES
async def test_read_only_calls_start_while_the_plan_streams(entry: str) -> None:
    clock = Clock()
    planner = timed_planner(clock, [TWO_LOOKUPS, str(plan_reply("response"))])
    graph = create_tool_loop(
        planner, tools_for(clock), models=ModelOptions(answer_model=timed_answerer(clock))
    )
    events = await collect_events(graph, {"user_input": "news and weather"}, entry)
    types = [event["type"] for event in events]
    decided = types.index("plan_decided")
    dispatched = [e for e in events if e["type"] == "tool_dispatched"]
    # the first starts as soon as its object is complete; the last one, complete only
    # with the plan, is started by execute
    assert [e["index"] for e in dispatched] == [0]
    assert types.index("tool_dispatched") < decided
    assert types.index("tool_started") < decided
    # each call ran once, and its record is the one the round kept
    assert clock.count("lookup started") == 2
    completed = [e for e in events if e["type"] == "round_completed"]
    assert completed[0]["succeeded"] == 2


@ENTRIES
async def test_dispatched_records_are_the_round_records(entry: str) -> None:
    clock = Clock()
    planner = timed_planner(clock, [TWO_LOOKUPS, str(plan_reply("response"))])
    graph = create_tool_loop(
        planner, tools_for(clock), models=ModelOptions(answer_model=timed_answerer(clock))
    )
    payload = {"user_input": "news and weather"}
    if entry == "invoke":
        result = await asyncio.to_thread(graph.invoke, payload)
    else:
        result = await graph.ainvoke(payload)
    assert [r["result"] for r in result["tool_logs"]] == ["found tram news", "found weather"]
    assert [r["index"] for r in result["tool_logs"]] == [0, 1]
    assert clock.count("lookup started") == 2


async def test_a_call_with_side_effects_keeps_its_place_in_the_order() -> None:
    clock = Clock()
    plan = plan_reply("execute", [cmd("save_note", text="x"), cmd("lookup", query="after")])
    planner = timed_planner(clock, [str(plan), str(plan_reply("response"))])
    graph = create_tool_loop(
        planner, tools_for(clock), models=ModelOptions(answer_model=timed_answerer(clock))
    )
    events = await collect_events(graph, {"user_input": "save then look up"}, "ainvoke")
    assert not [e for e in events if e["type"] == "tool_dispatched"]
    assert clock.first("save started") < clock.first("lookup started")


@pytest.mark.parametrize(
    "options",
    [
        {"planning": PlanningOptions(streaming_dispatch=False)},
        {"interrupt_before": ["execute"], "checkpointer": InMemorySaver()},
    ],
    ids=["option", "plan-review"],
)
async def test_streaming_dispatch_is_off_by_option_and_when_a_person_reviews_the_plan(
    options: dict[str, Any],
) -> None:
    clock = Clock()
    planner = timed_planner(clock, [TWO_LOOKUPS, str(plan_reply("response"))])
    graph = create_tool_loop(
        planner,
        tools_for(clock),
        models=ModelOptions(answer_model=timed_answerer(clock)),
        **options,
    )
    config = {"configurable": {"thread_id": "review"}}
    events = [e async for e in graph.astream({"user_input": "q"}, config, stream_mode="custom")]
    if "interrupt_before" in options:
        assert clock.count("lookup started") == 0  # stopped before execute: nothing ran
        events += [e async for e in graph.astream(None, config, stream_mode="custom")]
    assert not [e for e in events if e["type"] == "tool_dispatched"]
    assert clock.count("lookup started") == 2


@ENTRIES
async def test_calls_of_a_plan_that_is_asked_again_are_not_kept(entry: str) -> None:
    clock = Clock()
    first = cmd("lookup", query="early")
    long_plan = str(plan_reply("execute", [first, cmd("lookup", query="x" * 400)]))
    cut_at = long_plan.index("x" * 10)  # past the first command, inside the second
    planner = timed_planner(clock, [long_plan, str(plan_reply("response"))])
    graph = create_tool_loop(
        planner,
        tools_for(clock, lookup_s=FOREVER_S),  # a lookup ends only when cancelled
        models=ModelOptions(
            answer_model=timed_answerer(clock), limits=ModelLimits(max_plan_chars=cut_at + 20)
        ),
        governance=GovernanceOptions(policies={"lookup": ToolPolicy(timeout_s=FOREVER_S)}),
    )
    events = await collect_events(graph, {"user_input": "q"}, entry)
    types = [event["type"] for event in events]
    assert "tool_dispatched" in types
    assert "plan_reasked" in types  # the plan was cut: asked again
    assert "round_completed" not in types
    # until every lookup that started was cancelled, under `invoke` too, where it runs on
    # the loop's own event loop (the guard only bounds a hang)
    deadline = time.monotonic() + 30
    while clock.count("lookup started") != clock.count("lookup cancelled"):
        assert time.monotonic() < deadline, f"an early lookup was never cancelled: {clock.marks}"
        await asyncio.sleep(0.01)
    assert clock.count("lookup ended") == 0


@ENTRIES
async def test_speculative_answer_runs_alongside_the_final_plan(entry: str) -> None:
    clock = Clock()
    thinking = "Let me think about what the user needs here. " * 4  # a slow plan
    planner = timed_planner(clock, [thinking + str(plan_reply("response"))])
    answerer = timed_answerer(clock, "welcome aboard")
    graph = create_tool_loop(
        planner,
        tools_for(clock),
        models=ModelOptions(answer_model=answerer),
        planning=PlanningOptions(speculative_answer=True),
    )
    payload = {"user_input": "write a welcome"}
    modes = ["custom", "values"]

    def stamp(chunks: Any) -> list[Any]:
        seen = []
        for mode, chunk in chunks:
            if mode == "custom" and chunk["type"] == "plan_decided":
                clock.mark("plan decided")
            seen.append((mode, chunk))
        return seen

    if entry == "invoke":
        chunks = await asyncio.to_thread(lambda: stamp(graph.stream(payload, stream_mode=modes)))
    else:
        chunks = []
        async for item in graph.astream(payload, stream_mode=modes):
            chunks.extend(stamp([item]))
    result = [chunk for mode, chunk in chunks if mode == "values"][-1]
    assert result["answer"] == "welcome aboard"
    assert clock.count("answer requested") == 1
    # requested with the plan, before the plan was decided
    assert clock.first("answer requested") < clock.first("plan decided")
    usage = result["usage"]["tool_loop"]
    assert usage["model_calls"] == 2


@ENTRIES
async def test_a_speculative_answer_is_cancelled_when_the_plan_executes(entry: str) -> None:
    clock = Clock()
    plans = [str(plan_reply("execute", [cmd("lookup", query="news")])), str(plan_reply("response"))]
    planner = timed_planner(clock, plans)
    graph = create_tool_loop(
        planner,
        tools_for(clock),
        models=ModelOptions(answer_model=timed_answerer(clock, "the news")),
        planning=PlanningOptions(speculative_answer=True),
    )
    events = await collect_events(graph, {"user_input": "news?"}, entry)
    speculated = [e["outcome"] for e in events if e["type"] == "answer_speculated"]
    assert speculated == ["cancelled", "adopted"]
    cancelled = next(e for e in events if e["type"] == "answer_speculated")
    assert cancelled["input_tokens"] > 0  # what the cancelled answer cost is counted
    assert clock.count("answer requested") == 2
    completed = next(e for e in events if e["type"] == "answer_completed")
    assert completed["chars"] == len("the news")


async def test_cancelled_answers_count_in_usage() -> None:
    clock = Clock()
    plans = [str(plan_reply("execute", [cmd("lookup", query="news")])), str(plan_reply("response"))]

    def build(speculative: bool) -> Any:
        return create_tool_loop(
            timed_planner(clock, plans),
            tools_for(clock),
            models=ModelOptions(answer_model=timed_answerer(clock, "the news")),
            planning=PlanningOptions(speculative_answer=speculative),
        )

    plain = await build(False).ainvoke({"user_input": "news?"})
    speculative = await build(True).ainvoke({"user_input": "news?"})
    assert speculative["answer"] == plain["answer"] == "the news"
    spent, base = speculative["usage"]["tool_loop"], plain["usage"]["tool_loop"]
    assert spent["model_calls"] == base["model_calls"] + 1
    assert spent["input_tokens"] > base["input_tokens"]


async def test_the_adopted_answer_streams_from_the_answer_node() -> None:
    clock = Clock()
    graph = create_tool_loop(
        timed_planner(clock, [str(plan_reply("response"))]),
        tools_for(clock),
        models=ModelOptions(answer_model=timed_answerer(clock, "a streamed welcome")),
        planning=PlanningOptions(speculative_answer=True),
    )
    chunks = [
        (chunk.content, metadata["langgraph_node"])
        async for chunk, metadata in graph.astream({"user_input": "hi"}, stream_mode="messages")
    ]
    answer_chunks = [text for text, node in chunks if node == "answer"]
    assert "".join(answer_chunks) == "a streamed welcome"
    assert len(answer_chunks) > 1  # token by token, not only the node's final message
    assert "welcome" not in "".join(str(text) for text, node in chunks if node == "plan")


@ENTRIES
async def test_the_apps_callbacks_see_the_adopted_answer_as_the_answer_nodes_model_call(
    entry: str,
) -> None:
    class Seen(BaseCallbackHandler):
        def __init__(self) -> None:
            self.calls: list[tuple[str, list[str]]] = []
            self.replies: list[str] = []

        def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
            self.calls.append((kwargs.get("name") or "", kwargs.get("tags") or []))

        def on_llm_end(self, response: Any, **kwargs: Any) -> None:
            self.replies.append(response.generations[0][0].text)

    def build() -> Any:
        clock = Clock()
        return create_tool_loop(
            timed_planner(clock, [str(plan_reply("response"))]),
            tools_for(clock),
            models=ModelOptions(answer_model=timed_answerer(clock, "seen and adopted")),
            planning=PlanningOptions(speculative_answer=True),
        )

    seen = Seen()
    config: dict[str, Any] = {"callbacks": [seen]}
    payload = {"user_input": "hi"}
    if entry == "invoke":
        watched = await asyncio.to_thread(build().invoke, payload, config)
    else:
        watched = await build().ainvoke(payload, config)
    unwatched = await build().ainvoke(payload)  # no handler: the answer is taken as it came
    assert watched["answer"] == unwatched["answer"] == "seen and adopted"
    assert ("answer", ["agentloop:answer"]) in [(name, tags[-1:]) for name, tags in seen.calls]
    assert "seen and adopted" in seen.replies
    assert watched["messages"][-1].content == unwatched["messages"][-1].content


async def test_a_speculative_answer_that_fails_is_asked_again() -> None:
    clock = Clock()
    answerer = ScriptedChatModel([RuntimeError("overloaded"), "second try"], chunk_size=4)
    graph = create_tool_loop(
        timed_planner(clock, [str(plan_reply("response"))]),
        tools_for(clock),
        models=ModelOptions(answer_model=answerer),
        planning=PlanningOptions(speculative_answer=True),
    )
    events = [e async for e in graph.astream({"user_input": "hi"}, stream_mode="custom")]
    assert [e["outcome"] for e in events if e["type"] == "answer_speculated"] == ["unusable"]
    completed = next(e for e in events if e["type"] == "answer_completed")
    assert completed["status"] == "ok"


@ENTRIES
async def test_streaming_dispatch_runs_with_a_checkpointer_and_replays_repeat_nothing(
    entry: str,
) -> None:
    clock = Clock()
    planner = timed_planner(clock, [TWO_LOOKUPS, str(plan_reply("response"))], repeat_last=True)
    graph = create_tool_loop(
        planner,
        tools_for(clock),
        models=ModelOptions(answer_model=timed_answerer(clock)),
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "durable"}}
    events = await collect_events(graph, {"user_input": "news and weather"}, entry, config=config)
    dispatched = [e for e in events if e["type"] == "tool_dispatched"]
    assert [e["index"] for e in dispatched] == [0]  # started early, through the ledger guard
    assert clock.count("lookup started") == 2
    history = list(graph.get_state_history(config))
    for snapshot in history[1:]:  # replay every snapshot but the last
        replayed = await collect_events(graph, None, entry, config=snapshot.config)
        assert not [e for e in replayed if e["type"] == "tool_started"]
    assert clock.count("lookup started") == 2  # the recorded outcomes were returned


async def test_every_event_a_run_emits_is_declared() -> None:
    from agentloop import EVENT_TYPES

    clock = Clock()
    planner = timed_planner(clock, [TWO_LOOKUPS, str(plan_reply("response"))])
    graph = create_tool_loop(
        planner,
        tools_for(clock),
        models=ModelOptions(answer_model=timed_answerer(clock)),
        planning=PlanningOptions(speculative_answer=True),
    )
    events = await collect_events(graph, {"user_input": "news and weather"}, "ainvoke")
    types = {event["type"] for event in events}
    assert {"tool_dispatched", "answer_speculated"} <= types
    assert types <= set(EVENT_TYPES)


def test_invoke_starts_no_thread_per_early_call_or_speculative_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Under `invoke`, work started ahead runs on threads of the loop's pool."""
    started: list[str] = []
    start = threading.Thread.start

    def counted(thread: threading.Thread) -> None:
        started.append(thread.name)
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", counted)

    @tool
    def lookup(query: str) -> str:
        """Look something up (read-only)."""
        time.sleep(0.02)
        return f"found {query}"

    three = plan_reply("execute", [cmd("lookup", query=q) for q in ("a", "b", "c")])
    planner = ScriptedChatModel(
        [str(three), str(plan_reply("response"))] * 2, chunk_size=4, chunk_delay_s=0.002
    )
    answerer = ScriptedChatModel([], responder=lambda _: "the answer", chunk_size=4)
    graph = create_tool_loop(
        planner,
        [lookup],
        models=ModelOptions(answer_model=answerer),
        planning=PlanningOptions(speculative_answer=True, streaming_dispatch=True),
        checkpointer=InMemorySaver(),
    )
    per_run: list[list[str]] = []
    for run in ("first", "second"):
        config = {"configurable": {"thread_id": run}}
        payload = {"user_input": "a, b and c"}
        events = list(graph.stream(payload, config, stream_mode="custom"))
        types = [e["type"] for e in events]
        early = types[: types.index("plan_decided")]
        assert early.count("tool_dispatched") >= 2  # started while the plan streamed
        speculated = [e["outcome"] for e in events if e["type"] == "answer_speculated"]
        assert speculated == ["cancelled", "adopted"]  # on `execute`, then on `response`
        per_run.append([n for n in started if not n.startswith("ThreadPoolExecutor-")])
        started.clear()
    # LangGraph's own executor aside, only the loop's pool starts threads: the second
    # run reuses the first's (no thread per early call or speculative answer)
    assert all(name.startswith("agentloop-tool-") for names in per_run for name in names)
    assert len(per_run[1]) <= len(per_run[0]) <= 9, per_run
