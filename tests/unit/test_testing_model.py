from __future__ import annotations

import asyncio
import copy
import json
import threading
from functools import reduce
from operator import add
from typing import Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableBinding

from agentloop.testing import ScriptedChatModel, ScriptExhaustedError, plan_reply, tool_call_turns

LONG_TEXT = "The quick brown fox jumps over the lazy dog. " * 3


class Command(TypedDict):
    purpose: str
    tool_name: str
    tool_kwargs: dict[str, Any]
    todo_suggestion: str


class PlanDecision(TypedDict):
    """Decide the next action."""

    next_action: str
    execution_commands: list[Command]


def _join(chunks: list[AIMessageChunk]) -> AIMessageChunk:
    return reduce(add, chunks)


# --- invoke / ainvoke ---------------------------------------------------------


def test_invoke_returns_scripted_text_in_order() -> None:
    model = ScriptedChatModel(["first", "second"])

    assert model.invoke("hi").content == "first"
    assert model.invoke([HumanMessage("again")]).content == "second"
    assert [[m.content for m in request] for request in model.requests] == [["hi"], ["again"]]


async def test_ainvoke_returns_scripted_text() -> None:
    model = ScriptedChatModel(["hello"])

    reply = await model.ainvoke("hi")

    assert isinstance(reply, AIMessage)
    assert reply.content == "hello"
    assert reply.response_metadata["finish_reason"] == "stop"
    assert reply.response_metadata["model_name"] == "scripted"


def test_invoke_replays_scripted_tool_calls() -> None:
    scripted = AIMessage(
        content="", tool_calls=[{"name": "search", "args": {"q": "x"}, "id": "call_1"}]
    )
    model = ScriptedChatModel([scripted])

    reply = model.invoke("hi")

    assert reply.tool_calls == [
        {"name": "search", "args": {"q": "x"}, "id": "call_1", "type": "tool_call"}
    ]


def test_missing_tool_call_ids_are_filled_in() -> None:
    scripted = AIMessage(content="", tool_calls=[{"name": "search", "args": {}, "id": None}])
    model = ScriptedChatModel([scripted, scripted])

    invoked = model.invoke("hi")
    streamed = _join(list(model.stream("hi")))

    assert invoked.tool_calls[0]["id"]
    assert streamed.tool_calls[0]["id"]


# --- streaming ----------------------------------------------------------------


def test_stream_splits_text_into_chunks_that_reassemble() -> None:
    model = ScriptedChatModel([LONG_TEXT], chunk_size=8)

    chunks = list(model.stream("hi"))

    assert [c.content for c in chunks[:-1]] == [
        LONG_TEXT[i : i + 8] for i in range(0, len(LONG_TEXT) - 8, 8)
    ]
    assert all(len(c.content) <= 8 for c in chunks)
    assert "".join(str(c.content) for c in chunks) == LONG_TEXT
    assert len({c.id for c in chunks}) == 1
    assert chunks[-1].chunk_position == "last"
    assert all(c.chunk_position is None for c in chunks[:-1])
    assert _join(chunks).content == LONG_TEXT
    assert model.chunks_emitted == len(chunks)


async def test_astream_splits_text_into_chunks_that_reassemble() -> None:
    model = ScriptedChatModel([LONG_TEXT], chunk_size=5)

    chunks = [chunk async for chunk in model.astream("hi")]

    assert len(chunks) == -(-len(LONG_TEXT) // 5)
    assert _join(chunks).content == LONG_TEXT
    assert len({c.id for c in chunks}) == 1
    assert model.chunks_emitted == len(chunks)


def test_empty_reply_streams_one_last_chunk() -> None:
    model = ScriptedChatModel([""])

    chunks = list(model.stream("hi"))

    assert len(chunks) == 1
    assert chunks[0].content == ""
    assert chunks[0].chunk_position == "last"


def test_stream_reassembles_tool_calls() -> None:
    scripted = AIMessage(
        content="Let me look.",
        tool_calls=[
            {"name": "search", "args": {"query": "langgraph streaming"}, "id": "call_a"},
            {"name": "fetch", "args": {"url": "https://example.com", "n": 3}, "id": "call_b"},
        ],
    )
    model = ScriptedChatModel([scripted], chunk_size=4)

    chunks = list(model.stream("hi"))
    merged = _join(chunks)

    assert merged.content == "Let me look."
    assert merged.tool_calls == [
        {
            "name": "search",
            "args": {"query": "langgraph streaming"},
            "id": "call_a",
            "type": "tool_call",
        },
        {
            "name": "fetch",
            "args": {"url": "https://example.com", "n": 3},
            "id": "call_b",
            "type": "tool_call",
        },
    ]
    call_chunks = [tc for c in chunks for tc in c.tool_call_chunks]
    assert all(tc["args"] is not None and len(tc["args"]) <= 4 for tc in call_chunks)
    firsts = [tc for tc in call_chunks if tc["name"] is not None]
    assert [(tc["name"], tc["id"], tc["index"]) for tc in firsts] == [
        ("search", "call_a", 0),
        ("fetch", "call_b", 1),
    ]
    assert all(tc["id"] is None for tc in call_chunks if tc["name"] is None)
    assert {tc["index"] for tc in call_chunks} == {0, 1}


async def test_astream_reassembles_tool_calls() -> None:
    scripted = plan_reply("execute", [{"tool_name": "search"}], as_tool_call=True)
    assert isinstance(scripted, AIMessage)
    model = ScriptedChatModel([scripted], chunk_size=3)

    merged = _join([chunk async for chunk in model.astream("hi")])

    assert merged.tool_calls[0]["name"] == "PlanDecision"
    assert merged.tool_calls[0]["args"] == scripted.tool_calls[0]["args"]
    assert merged.tool_calls[0]["id"] == scripted.tool_calls[0]["id"]


# --- structured output --------------------------------------------------------


async def test_with_structured_output_streams_partial_dicts() -> None:
    full: dict[str, Any] = {
        "next_action": "execute",
        "execution_commands": [
            {
                "purpose": "find it",
                "tool_name": "search",
                "tool_kwargs": {"q": "x"},
                "todo_suggestion": "",
            }
        ],
    }
    reply = plan_reply("execute", full["execution_commands"], as_tool_call=True)
    model = ScriptedChatModel([reply], chunk_size=6)

    structured = model.with_structured_output(PlanDecision)
    parts: list[Any] = [part async for part in structured.astream("plan")]

    assert len(parts) > 3
    assert parts[-1] == full
    assert any(
        isinstance(p, dict) and "next_action" in p and "execution_commands" not in p for p in parts
    )
    names = [tool["function"]["name"] for tool in model.bound_tools]
    assert names == ["PlanDecision"]


def test_with_structured_output_invoke_and_sync_stream() -> None:
    reply = plan_reply("respond", as_tool_call=True)
    model = ScriptedChatModel([reply, reply], chunk_size=4)
    structured = model.with_structured_output(PlanDecision)

    assert structured.invoke("plan") == {"next_action": "respond", "execution_commands": []}
    parts = list(structured.stream("plan"))
    assert len(parts) > 2
    assert parts[-1] == {"next_action": "respond", "execution_commands": []}


def test_bind_tools_returns_binding_and_records_tools() -> None:
    def search(query: str) -> str:
        """Search the web."""
        return query

    model = ScriptedChatModel(["no tool call"])

    bound = model.bind_tools([search], tool_choice="auto")

    assert isinstance(bound, RunnableBinding)
    assert bound.kwargs["tool_choice"] == "auto"
    assert model.bound_tools[0]["function"]["name"] == "search"
    assert bound.invoke("hi").content == "no tool call"


# --- early close --------------------------------------------------------------


async def test_early_close_of_astream_counts_only_pulled_chunks() -> None:
    model = ScriptedChatModel(["x" * 400], chunk_size=4)

    pulled = 0
    async for _ in model.astream("hi"):
        pulled += 1
        if pulled == 3:
            break

    assert pulled == 3
    assert model.chunks_emitted <= 4


def test_early_close_of_stream_counts_only_pulled_chunks() -> None:
    model = ScriptedChatModel(["x" * 400], chunk_size=4)

    for pulled, _ in enumerate(model.stream("hi"), start=1):
        if pulled == 3:
            break

    assert model.chunks_emitted <= 4


def test_reply_is_chosen_when_first_chunk_is_pulled() -> None:
    model = ScriptedChatModel(["a", "b"])

    stream_one = model.stream("one")
    stream_two = model.stream("two")
    assert model.requests == []

    assert next(stream_two).content == "a"
    assert [r[0].content for r in model.requests] == ["two"]
    assert _join(list(stream_one)).content == "b"
    assert list(stream_two) == []


# --- errors, responder, exhaustion -------------------------------------------


def test_scripted_exception_is_raised_and_script_moves_on() -> None:
    model = ScriptedChatModel([TimeoutError("slow"), "recovered"])

    with pytest.raises(TimeoutError, match="slow"):
        model.invoke("hi")
    assert model.invoke("hi").content == "recovered"


async def test_scripted_exception_raised_when_stream_starts() -> None:
    model = ScriptedChatModel([ConnectionError("reset")])

    with pytest.raises(ConnectionError, match="reset"):
        async for _ in model.astream("hi"):
            pass
    assert model.chunks_emitted == 0


def test_callable_reply_receives_request_messages() -> None:
    def echo(messages: list[BaseMessage]) -> str:
        return f"echo: {messages[-1].content}"

    model = ScriptedChatModel([echo])

    assert model.invoke("ping").content == "echo: ping"


def test_responder_used_after_script() -> None:
    seen: list[int] = []

    def responder(messages: list[BaseMessage]) -> AIMessage:
        seen.append(len(messages))
        return AIMessage(content=f"computed {len(messages)}")

    model = ScriptedChatModel(["scripted"], responder=responder)

    assert model.invoke("a").content == "scripted"
    assert model.invoke([HumanMessage("a"), HumanMessage("b")]).content == "computed 2"
    assert _join(list(model.stream("c"))).content == "computed 1"
    assert seen == [2, 1]


def test_responder_alone_serves_every_request() -> None:
    model = ScriptedChatModel(responder=lambda messages: str(messages[-1].content).upper())

    assert model.invoke("abc").content == "ABC"
    assert model.invoke("def").content == "DEF"


def test_repeat_last() -> None:
    model = ScriptedChatModel(["one", "again"], repeat_last=True)

    assert [model.invoke("x").content for _ in range(4)] == ["one", "again", "again", "again"]


def test_exhausted_script_raises_clear_error() -> None:
    model = ScriptedChatModel(["only"])
    model.invoke("x")

    with pytest.raises(ScriptExhaustedError) as caught:
        model.invoke("x")

    assert isinstance(caught.value, IndexError)
    assert str(caught.value) == (
        "ScriptedChatModel has no reply left for request #2; it was given 1 replies"
    )


async def test_exhausted_empty_script_raises_on_astream() -> None:
    model = ScriptedChatModel([])

    with pytest.raises(ScriptExhaustedError, match="request #1; it was given 0 replies"):
        async for _ in model.astream("x"):
            pass


# --- concurrency --------------------------------------------------------------


async def test_concurrent_ainvoke_gets_distinct_replies() -> None:
    replies = [f"reply {i}" for i in range(20)]
    model = ScriptedChatModel(replies)

    results = await asyncio.gather(*(model.ainvoke(f"q{i}") for i in range(20)))

    assert sorted(str(r.content) for r in results) == sorted(replies)
    assert len(model.requests) == 20


async def test_concurrent_astream_gets_distinct_replies() -> None:
    replies = [f"reply number {i}" for i in range(20)]
    model = ScriptedChatModel(replies, chunk_size=3)

    async def consume(i: int) -> str:
        chunks = [c async for c in model.astream(f"q{i}")]
        return str(_join(chunks).content)

    results = await asyncio.gather(*(consume(i) for i in range(20)))

    assert sorted(results) == sorted(replies)


def test_threaded_invoke_gets_distinct_replies() -> None:
    replies = [f"reply {i}" for i in range(20)]
    model = ScriptedChatModel(replies)
    results: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        content = str(model.invoke("q").content)
        with lock:
            results.append(content)

    threads = [threading.Thread(target=worker) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(results) == sorted(replies)


# --- metadata -----------------------------------------------------------------


def test_finish_reason_length_propagates_to_aggregated_message() -> None:
    scripted = AIMessage(content="truncated answ", response_metadata={"finish_reason": "length"})
    model = ScriptedChatModel([scripted, scripted], chunk_size=4)

    merged = _join(list(model.stream("hi")))

    assert merged.response_metadata["finish_reason"] == "length"
    assert merged.response_metadata["model_name"] == "scripted"
    assert model.invoke("hi").response_metadata["finish_reason"] == "length"


def test_usage_metadata_present_once() -> None:
    model = ScriptedChatModel(["x" * 40, "x" * 40], chunk_size=8)

    chunks = list(model.stream("y" * 80))
    merged = _join(chunks)

    assert [c.usage_metadata is not None for c in chunks] == [False] * 4 + [True]
    assert merged.usage_metadata == {"input_tokens": 20, "output_tokens": 10, "total_tokens": 30}
    assert model.invoke("y" * 80).usage_metadata == merged.usage_metadata


def test_usage_can_be_disabled() -> None:
    model = ScriptedChatModel(["x"], usage=False)

    assert model.invoke("hi").usage_metadata is None


# --- plan_reply ---------------------------------------------------------------


def test_plan_reply_text_puts_next_action_first_and_fills_defaults() -> None:
    text = plan_reply("execute", [{"tool_name": "search", "tool_kwargs": {"q": "x"}}])

    assert isinstance(text, str)
    assert text.startswith('{"next_action": "execute"')
    assert json.loads(text) == {
        "next_action": "execute",
        "execution_commands": [
            {"purpose": "", "tool_name": "search", "tool_kwargs": {"q": "x"}, "todo_suggestion": ""}
        ],
    }


def test_plan_reply_tool_call() -> None:
    message = plan_reply("respond", as_tool_call=True, tool_name="Plan")

    assert isinstance(message, AIMessage)
    assert len(message.tool_calls) == 1
    call = message.tool_calls[0]
    assert call["name"] == "Plan"
    assert call["args"] == {"next_action": "respond", "execution_commands": []}
    assert call["id"]
    assert list(call["args"]) == ["next_action", "execution_commands"]


def test_deep_copy_keeps_script_position() -> None:
    model = ScriptedChatModel(["a", "b"])
    model.invoke("x")

    clone = copy.deepcopy(model)

    assert clone.invoke("y").content == "b"
    assert model.invoke("z").content == "b"


def test_tool_call_turns_script_a_tool_calling_model_round_by_round() -> None:
    turns = tool_call_turns([[("get_a", {"q": 1}), ("get_b", {})], [("get_c", {"q": 2})]])
    assert [[(c["name"], c["args"], c["id"]) for c in t.tool_calls] for t in turns] == [
        [("get_a", {"q": 1}, "call_0_0"), ("get_b", {}, "call_0_1")],
        [("get_c", {"q": 2}, "call_1_0")],
    ]
    assert tool_call_turns([[("get_a", {})]], prefix="x")[0].tool_calls[0]["id"] == "x_0_0"
