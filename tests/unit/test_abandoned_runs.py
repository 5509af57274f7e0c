"""A run that is cancelled stops the work it started ahead.

With the speculative answer, the answer call starts beside a plan, out of sight, and
the `answer` node relays it; with streaming dispatch, read-only calls start while the
plan streams. When the run is cancelled (a client goes away: LangGraph's server cancels
its run; a chat UI stops reading the stream), they stop too: otherwise the answer
streams to its end for nobody, at the model's price, and the calls run on.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.tools import tool

from agentloop import (
    GovernanceOptions,
    ModelOptions,
    PlanningOptions,
    ToolPolicy,
    create_tool_loop,
)
from agentloop.testing import ScriptedChatModel, plan_reply

ANSWER = "word " * 60
"""75 chunks of 4 characters, 5 ms apart: a stream that outlasts each check below."""


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def _answerer() -> ScriptedChatModel:
    return ScriptedChatModel([], responder=lambda _: ANSWER, chunk_size=4, chunk_delay_s=0.005)


def _loop(planner: ScriptedChatModel, answerer: ScriptedChatModel) -> Any:
    return create_tool_loop(
        planner,
        [lookup],
        models=ModelOptions(answer_model=answerer),
        planning=PlanningOptions(speculative_answer=True),
    )


async def _until(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        await asyncio.sleep(0.002)


def _others() -> list[asyncio.Task[Any]]:
    """The tasks of this event loop but the test's own."""
    return [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]


async def _assert_stopped(answerer: ScriptedChatModel) -> None:
    """The answer model streams no more, and nothing the run started still runs."""
    at_stop = answerer.chunks_emitted
    await _until(lambda: not _others())  # everything the run started has ended
    await asyncio.sleep(0.15)  # 30 chunks' time: room for an answer still streaming to show
    assert answerer.chunks_emitted - at_stop <= 1, "the answer went on streaming"
    assert answerer.chunks_emitted < len(ANSWER) // 4, "the answer streamed to its end"
    assert _others() == []


async def test_a_run_cancelled_while_its_plan_streams_stops_the_answer_beside_it() -> None:
    planner = ScriptedChatModel([plan_reply("response")], chunk_size=2, chunk_delay_s=0.02)
    answerer = _answerer()
    run = asyncio.create_task(_loop(planner, answerer).ainvoke({"user_input": "hello"}))
    await _until(lambda: answerer.chunks_emitted >= 1)
    assert not run.done()
    run.cancel()  # as LangGraph's server cancels the run of a client that went away
    with pytest.raises(asyncio.CancelledError):
        await run
    await _assert_stopped(answerer)


async def test_a_chat_ui_that_stops_reading_the_answer_stops_it() -> None:
    planner = ScriptedChatModel([plan_reply("response")])
    answerer = _answerer()
    graph = _loop(planner, answerer)
    read: list[str] = []
    stream = graph.astream({"user_input": "hello"}, stream_mode="messages")
    async for message, metadata in stream:  # the answer's tokens, as a chat UI shows them
        if metadata.get("langgraph_node") == "answer":
            read.append(message.text)
        if len(read) >= 10:
            break  # the user closed the tab: the stream is closed, its run cancelled
    await stream.aclose()
    assert "".join(read) == ANSWER[:40]
    await _assert_stopped(answerer)


async def test_a_run_cancelled_while_its_plan_streams_stops_the_calls_it_started() -> None:
    ran: list[str] = []

    @tool
    async def read_page(n: int) -> str:
        """Read a page."""
        ran.append("started")
        try:
            await asyncio.sleep(3600)  # it ends only when cancelled
        except asyncio.CancelledError:
            ran.append("cancelled")
            raise
        ran.append("finished")
        return f"page {n}"

    commands = [{"tool_name": "read_page", "tool_kwargs": {"n": n}} for n in range(3)]
    planner = ScriptedChatModel(
        [plan_reply("execute", commands), plan_reply("response"), "done"],
        chunk_size=4,
        chunk_delay_s=0.01,
    )
    policies = {"read_page": ToolPolicy(read_only=True, idempotent=True)}
    graph = create_tool_loop(planner, [read_page], governance=GovernanceOptions(policies=policies))
    run = asyncio.create_task(graph.ainvoke({"user_input": "read three pages"}))
    await _until(lambda: bool(ran))  # started while the plan streams (streaming dispatch)
    assert not run.done()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    await _until(lambda: len(ran) >= 2 and not _others())
    assert ran == ["started", "cancelled"]
