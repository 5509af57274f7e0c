"""The default speculative answer ("auto") through the public API, with a checkpointer.

The answer model here answers each request from its messages (as a real model does), so
the loop may request it ahead of time; the tests check what started before what, and
how many answers were requested, used and wasted.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from agentloop import ModelOptions, create_tool_loop
from agentloop.testing import ScriptedChatModel, plan_reply

ENTRIES = pytest.mark.parametrize("entry", ["invoke", "ainvoke"])
THINKING = "Let me think about what the user needs here. " * 4
"""Text before the decision: the plan streams for a while."""


class Clock:
    """The labelled things that happened, in order."""

    def __init__(self) -> None:
        self.marks: list[str] = []
        self.lock = threading.Lock()

    def mark(self, label: str) -> None:
        with self.lock:
            self.marks.append(label)

    def times(self, label: str) -> list[int]:
        """Where each mark of `label` is in the order: a smaller place came earlier."""
        return [at for at, name in enumerate(self.marks) if name == label]


def build(clock: Clock, plans: list[str]) -> Any:
    """A loop at its defaults, with a checkpointer, whose models mark their requests."""

    def planned(text: str) -> Any:
        def start(messages: list[BaseMessage]) -> str:
            clock.mark("plan requested")
            return text

        return start

    def answer(messages: list[BaseMessage]) -> str:
        clock.mark("answer requested")
        return "the answer"

    @tool
    def lookup(query: str) -> str:
        """Look something up."""
        if query == "broken":
            raise RuntimeError("the source is down")
        return f"found {query}"

    planner = ScriptedChatModel(
        [planned(THINKING + text) for text in plans], chunk_size=8, chunk_delay_s=0.005
    )
    answerer = ScriptedChatModel(responder=answer, chunk_size=4, chunk_delay_s=0.002)
    return create_tool_loop(
        planner, [lookup], models=ModelOptions(answer_model=answerer), checkpointer=InMemorySaver()
    )


async def run(clock: Clock, graph: Any, request: str, entry: str) -> tuple[list[Any], Any]:
    """Run a request on a new thread; return its custom events and its output."""
    config = {"configurable": {"thread_id": uuid.uuid4().hex}}
    payload = {"user_input": request}
    modes = ["custom", "values"]

    def stamp(items: list[Any]) -> list[Any]:
        for mode, chunk in items:
            if mode == "custom" and chunk["type"] == "plan_decided":
                clock.mark("plan decided")
        return items

    if entry == "invoke":
        items = await asyncio.to_thread(
            lambda: [stamp([item])[0] for item in graph.stream(payload, config, stream_mode=modes)]
        )
    else:
        items = []
        async for item in graph.astream(payload, config, stream_mode=modes):
            items.extend(stamp([item]))
    events = [chunk for mode, chunk in items if mode == "custom"]
    return events, [chunk for mode, chunk in items if mode == "values"][-1]


def speculated(events: list[Any]) -> list[Any]:
    return [event for event in events if event["type"] == "answer_speculated"]


def lookup(query: str) -> str:
    command = {"tool_name": "lookup", "tool_kwargs": {"query": query}}
    return str(plan_reply("execute", [command]))


RESPOND = str(plan_reply("response"))


@ENTRIES
async def test_a_chat_request_gets_its_answer_requested_with_the_plan(entry: str) -> None:
    clock = Clock()
    events, out = await run(clock, build(clock, [RESPOND]), "Write a short welcome", entry)
    assert out["answer"] == "the answer"
    assert len(clock.times("answer requested")) == 1  # requested once, and used
    assert clock.times("answer requested")[0] < clock.times("plan decided")[0]
    assert [(e["outcome"], e["adopted"]) for e in speculated(events)] == [("adopted", True)]
    usage = out["usage"]["tool_loop"]
    assert usage["model_calls"] == 2
    assert usage["wasted_answers"] == usage["wasted_input_tokens"] == 0


@ENTRIES
async def test_no_answer_is_requested_ahead_of_rounds_that_are_likely_to_execute(
    entry: str,
) -> None:
    clock = Clock()
    # a request that names the tool, then a round with a failed call: both plans execute
    plans = [lookup("broken"), lookup("news"), RESPOND]
    events, out = await run(clock, build(clock, plans), "Lookup the news", entry)
    assert [record["success"] for record in out["tool_logs"]] == [False, True]
    decided = clock.times("plan decided")
    assert len(decided) == 3
    # one answer request: the one ahead of the last plan, after a round that succeeded
    requested = clock.times("answer requested")
    assert len(requested) == 1
    assert decided[1] < requested[0] < decided[2]
    assert [e["outcome"] for e in speculated(events)] == ["adopted"]
    assert out["usage"]["tool_loop"]["wasted_answers"] == 0


@ENTRIES
async def test_a_cancelled_answer_is_counted_as_waste(entry: str) -> None:
    clock = Clock()
    # a chat-like request that needs the tool after all
    events, out = await run(clock, build(clock, [lookup("news"), RESPOND]), "Hello?", entry)
    assert out["answer"] == "the answer"
    assert len(clock.times("answer requested")) == 2  # with each plan
    cancelled, adopted = speculated(events)
    assert (cancelled["outcome"], cancelled["adopted"]) == ("cancelled", False)
    assert cancelled["input_tokens"] > 0
    assert cancelled["wasted_input_chars"] > len("Hello?")  # the whole answer prompt
    assert (adopted["outcome"], adopted["adopted"], adopted["wasted_input_chars"]) == (
        "adopted",
        True,
        0,
    )
    usage = out["usage"]["tool_loop"]
    assert usage["wasted_answers"] == 1
    assert usage["wasted_input_tokens"] == cancelled["input_tokens"]
    assert usage["model_calls"] == 4  # two plans, the answer, and the wasted answer
