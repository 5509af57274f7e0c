"""`plan_mode="native"`: the planner calls the loop's tools, through the public API."""

from __future__ import annotations

import asyncio
import threading
from typing import Annotated, Any

import pytest
from langchain.agents.middleware import ModelRequest, wrap_model_call
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.checkpoint.memory import InMemorySaver
from parity import kinds

from agentloop import (
    ConfigurationError,
    GovernanceOptions,
    LoopContext,
    ModelOptions,
    PlanningOptions,
    ToolPolicy,
    create_tool_loop,
)
from agentloop.cli.parser import CliError, build_parser
from agentloop.testing import ScriptedChatModel, plan_reply


def calls(*specs: tuple[str, dict[str, Any]], text: str = "") -> AIMessage:
    """A planner reply calling tools natively: (tool name, arguments) pairs."""
    return AIMessage(
        text,
        tool_calls=[
            {"name": name, "args": args, "id": f"call_{index}"}
            for index, (name, args) in enumerate(specs)
        ],
    )


class Effects:
    """What the tools did, counted across threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.lookups: list[str] = []
        self.saved: list[str] = []


def tools_for(effects: Effects, lookup_s: float = 0.0) -> list[Any]:
    @tool
    async def lookup(query: str, call_ref: Annotated[str, InjectedToolCallId]) -> str:
        """Look something up (read-only)."""
        with effects.lock:
            effects.lookups.append(query)
        await asyncio.sleep(lookup_s)
        return f"found {query}"

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @tool
    def save_note(text: str) -> str:
        """Save a note (has side effects)."""
        with effects.lock:
            effects.saved.append(text)
        return f"saved {text}"

    return [lookup, add, save_note]


def native_loop(
    effects: Effects, plans: list[Any], *, chunk_size: int = 6, **options: Any
) -> tuple[Any, ScriptedChatModel, ScriptedChatModel]:
    planner = ScriptedChatModel(plans, chunk_size=chunk_size, **options.pop("planner", {}))
    answerer = ScriptedChatModel(["the final answer"], repeat_last=True)
    graph = create_tool_loop(
        planner,
        tools_for(effects, options.pop("lookup_s", 0.0)),
        models=ModelOptions(answer_model=answerer),
        plan_mode=options.pop("plan_mode", "native"),
        governance=GovernanceOptions(policies={"save_note": ToolPolicy(read_only=False)}),
        **options,
    )
    return graph, planner, answerer


async def collect_events(graph: Any, payload: Any, entry: str, **kwargs: Any) -> list[Any]:
    """Run through `stream` (in a worker thread) or `astream`; return the custom events."""
    if entry == "invoke":
        return await asyncio.to_thread(
            lambda: list(graph.stream(payload, stream_mode="custom", **kwargs))
        )
    return [event async for event in graph.astream(payload, stream_mode="custom", **kwargs)]


ENTRIES = pytest.mark.parametrize("entry", ["invoke", "ainvoke"])


async def test_two_rounds_then_answer(run_loop: Any) -> None:
    effects = Effects()
    graph, planner, answerer = native_loop(
        effects,
        [
            calls(("lookup", {"query": "cats"})),
            calls(("add", {"a": 3, "b": 4})),
            "I have what I need.",
        ],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "native-core"}}
    out = await run_loop(graph, {"user_input": "cats, then 3+4"}, config)
    assert out["status"] == "ok"
    assert out["answer"] == "the final answer"
    done = out["round_state"]["done_plans"]
    assert [(r["tool_name"], r["result"]) for r in done] == [
        ("lookup", "found cats"),
        ("add", 7),
    ]
    assert out["round_state"]["round_index"] == 2
    # bound to the real tools, with the injected argument hidden
    bound = {tool["function"]["name"]: tool["function"] for tool in planner.bound_tools}
    assert set(bound) == {"lookup", "add", "save_note"}
    assert set(bound["lookup"]["parameters"]["properties"]) == {"query"}
    assert "side effects" in bound["save_note"]["description"]
    # the rules ask for tool calls, not a JSON plan; then the transcript, as create_agent's
    system, *transcript = planner.requests[2]
    assert "JSON" not in system.text and "next_action" not in system.text
    assert transcript == out["messages"][: len(transcript)]
    shape = ["Human", "AI(tool_calls)", "Tool(success)", "AI(tool_calls)", "Tool(success)"]
    assert kinds(transcript) == shape
    assert transcript[2].content == "found cats" and transcript[3].tool_calls[0]["name"] == "add"
    assert len(answerer.requests) == 1


async def test_parallel_calls_of_one_reply_run_as_one_round(run_loop: Any) -> None:
    effects = Effects()
    graph, _, _ = native_loop(
        effects,
        [calls(("lookup", {"query": "news"}), ("lookup", {"query": "weather"})), "done"],
    )
    out = await run_loop(graph, {"user_input": "news and weather"})
    records = out["round_state"]["done_plans"]
    assert [(r["index"], r["result"]) for r in records] == [
        (0, "found news"),
        (1, "found weather"),
    ]
    assert {r["round_index"] for r in records} == {0}
    assert sorted(effects.lookups) == ["news", "weather"]


async def test_a_reference_in_native_arguments_waits_for_its_call(run_loop: Any) -> None:
    effects = Effects()
    graph, _, _ = native_loop(
        effects,
        [
            calls(
                ("add", {"a": 1, "b": 2}),
                ("add", {"a": "$1", "b": 10}),
                ("lookup", {"query": "total ${2}"}),
            ),
            "done",
        ],
    )
    out = await run_loop(graph, {"user_input": "1+2, +10, look it up"})
    records = out["round_state"]["done_plans"]
    assert [r["result"] for r in records] == [3, 13, "found total 13"]
    assert {r["round_index"] for r in records} == {0}  # one plan, in dependency order


async def test_invalid_arguments_are_refused_and_reported_to_the_planner(run_loop: Any) -> None:
    effects = Effects()
    graph, planner, _ = native_loop(
        effects,
        [calls(("save_note", {"txt": ["not", "text"]})), "I cannot save it."],
    )
    out = await run_loop(graph, {"user_input": "save a note"})
    record = out["round_state"]["done_plans"][0]
    assert record["success"] is False
    assert record["error_type"] == "invalid_arguments"
    assert effects.saved == []  # refused before it ran
    assert "Invalid arguments for save_note" in planner.requests[1][-1].text


@ENTRIES
async def test_replaying_every_snapshot_repeats_no_side_effect(entry: str) -> None:
    effects = Effects()
    graph, _, _ = native_loop(
        effects,
        [
            calls(("save_note", {"text": "first"}), ("lookup", {"query": "q"})),
            calls(("save_note", {"text": "second"})),
            "saved both",
        ],
        planner={"repeat_last": True},
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "native-durable"}}
    await collect_events(graph, {"user_input": "save two notes"}, entry, config=config)
    assert effects.saved == ["first", "second"]
    history = list(graph.get_state_history(config))
    assert len(history) > 5
    for snapshot in history[1:]:  # replay every snapshot but the last
        replayed = await collect_events(graph, None, entry, config=snapshot.config)
        assert not [e for e in replayed if e["type"] == "tool_started"]
    assert effects.saved == ["first", "second"]


@ENTRIES
async def test_a_complete_call_starts_while_the_reply_streams(entry: str) -> None:
    effects = Effects()
    graph, _, _ = native_loop(
        effects,
        [calls(("lookup", {"query": "tram news"}), ("lookup", {"query": "weather"})), "done"],
        chunk_size=4,
        planner={"chunk_delay_s": 0.01},
        lookup_s=0.05,
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "native-dispatch"}}
    events = await collect_events(graph, {"user_input": "news, weather"}, entry, config=config)
    types = [event["type"] for event in events]
    decided = types.index("plan_decided")
    dispatched = [e for e in events if e["type"] == "tool_dispatched"]
    # the first call is complete once the second starts; the last one only with the reply
    assert [e["index"] for e in dispatched] == [0]
    assert types.index("tool_dispatched") < decided
    assert types.index("tool_started") < decided
    assert sorted(effects.lookups) == ["tram news", "weather"]  # each ran once
    completed = [e for e in events if e["type"] == "round_completed"]
    assert completed[0]["succeeded"] == 2


async def test_a_text_reply_closes_the_planner_stream_at_once(run_loop: Any) -> None:
    # another answer model writes the answer from the results: the reply is not read on
    effects = Effects()
    long_reply = "Paris is the capital of France. " * 40
    graph, planner, answerer = native_loop(
        effects, [calls(("lookup", {"query": "France"})), long_reply], chunk_size=5
    )
    out = await run_loop(graph, {"user_input": "capital of France?"})
    assert out["decision"]["next_action"] == "response"
    assert out["decision"]["short_circuited"] is True
    assert planner.chunks_emitted <= 12  # the tool call's few, then a few of the text's 256
    assert out["answer"] == "the final answer"  # the answer node writes the answer
    assert len(answerer.requests) == 1
    assert effects.lookups == ["France"]


async def test_the_plan_mode_can_be_chosen_per_run(run_loop: Any) -> None:
    effects = Effects()
    graph, planner, _ = native_loop(
        effects,
        [calls(("lookup", {"query": "x"})), "done"],
        planning=PlanningOptions(),
    )
    out = await run_loop(graph, {"user_input": "x"}, context=LoopContext(plan_mode="native"))
    assert out["round_state"]["done_plans"][0]["result"] == "found x"
    assert planner.request_options[0]["tools"][0]["function"]["name"] == "lookup"


def test_a_model_without_tool_calling_is_refused_when_the_loop_is_built() -> None:
    model = GenericFakeChatModel(messages=iter([AIMessage(str(plan_reply("response")))]))
    with pytest.raises(ConfigurationError, match="plan_mode='native' needs a model with tool"):
        create_tool_loop(model, tools_for(Effects()), plan_mode="native")
    create_tool_loop(model, tools_for(Effects()))  # json mode needs no tool calling


def test_a_fallback_without_tool_calling_is_refused_too() -> None:
    fallback = GenericFakeChatModel(messages=iter([]))
    with pytest.raises(ConfigurationError, match="GenericFakeChatModel"):
        create_tool_loop(
            ScriptedChatModel([]),
            tools_for(Effects()),
            plan_mode="native",
            models=ModelOptions(fallbacks=[fallback]),
        )


def test_the_cli_accepts_native_plan_mode() -> None:
    args = build_parser().parse_args(["run", "--plan-mode", "native", "what", "time"])
    assert args.plan_mode == "native"
    with pytest.raises(CliError):
        build_parser().parse_args(["run", "--plan-mode", "xml", "q"])


async def test_model_middleware_sees_the_tools_and_the_tool_calls(run_loop: Any) -> None:
    seen: list[tuple[list[str], list[str]]] = []

    @wrap_model_call
    def record(request: ModelRequest, handler: Any) -> Any:
        """Record the tools of a planner request and the calls of its reply."""
        if request.state["agentloop_model_call"] != "plan":
            return handler(request)
        if seen:  # the second plan is written here, without the model
            return AIMessage("", tool_calls=[{"name": "add", "args": {"a": 2, "b": 2}, "id": "m"}])
        reply = handler(request)
        tools = [tool.name for tool in request.tools]  # the tools, as create_agent gives them
        seen.append((tools, [call["name"] for call in reply.result[0].tool_calls]))
        return reply

    effects = Effects()
    planner = ScriptedChatModel([calls(("lookup", {"query": "q"})), "done"])
    graph = create_tool_loop(
        planner,
        tools_for(effects),
        models=ModelOptions(answer_model=ScriptedChatModel(["fine"])),
        plan_mode="native",
        middleware=[record],
        max_rounds=2,
    )
    out = await run_loop(graph, {"user_input": "q"})
    assert seen == [(["lookup", "add", "save_note"], ["lookup"])]
    assert [r["result"] for r in out["round_state"]["done_plans"]] == ["found q", 4]
    assert out["answer"] == "fine"


async def test_a_call_of_an_unknown_tool_is_asked_again_without_a_json_example(
    run_loop: Any,
) -> None:
    effects = Effects()
    graph, planner, _ = native_loop(
        effects,
        [calls(("lookup_everything", {"query": "q"})), calls(("lookup", {"query": "q"})), "done"],
    )
    out = await run_loop(graph, {"user_input": "q"})
    assert out["round_state"]["done_plans"][0]["result"] == "found q"
    reask = planner.requests[1][-1].text
    assert "lookup_everything" in reask and "no command names an available tool" in reask
    assert "next_action" not in reask


async def test_native_chosen_per_run_for_a_model_without_tool_calling_fails_clearly(
    run_loop: Any,
) -> None:
    model = GenericFakeChatModel(messages=iter([AIMessage("unused")]))
    graph = create_tool_loop(model, tools_for(Effects()))
    out = await run_loop(graph, {"user_input": "x"}, context=LoopContext(plan_mode="native"))
    assert out["status"] == "planner_failed"
    assert "plan_mode='native' needs a model with tool calling" in out["status_reason"]


@ENTRIES
async def test_speculative_answers_follow_the_native_decision(entry: str) -> None:
    effects = Effects()
    graph, _, answerer = native_loop(
        effects,
        [calls(("lookup", {"query": "news"})), "That is enough."],
        plan_mode="native",
        planning=PlanningOptions(speculative_answer=True),
    )
    events = await collect_events(graph, {"user_input": "news?"}, entry)
    speculated = [e["outcome"] for e in events if e["type"] == "answer_speculated"]
    # an answer starts beside each plan: the first is cancelled by the plan's tool call,
    # the second is the answer
    assert speculated == ["cancelled", "adopted"]
    assert answerer.request_count == 2
    assert effects.lookups == ["news"]


def test_the_cli_offers_every_plan_mode() -> None:
    from typing import get_args

    from agentloop.cli.parser import PLAN_MODES
    from agentloop.settings import PlanMode

    assert get_args(PlanMode) == PLAN_MODES
