"""200 loop runs at once on one event loop: all correct, nothing leaks between them."""

from __future__ import annotations

import asyncio
import gc
import re
import tracemalloc
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from agentloop import create_tool_loop
from agentloop.testing import ScriptedChatModel, plan_reply

pytestmark = pytest.mark.integration

RUNS = 200


@tool
async def get_greeting(user: str) -> str:
    """Greets one user."""
    await asyncio.sleep(0.01)
    return f"hello {user}"


def plan(messages: list[Any]) -> str:
    prompt = str(messages[-1].content)
    user = re.search(r'<user_input>\s*"I am (\w+)', prompt)
    assert user is not None
    if "round_index: 0" in prompt:
        command = {"tool_name": "get_greeting", "tool_kwargs": {"user": user.group(1)}}
        return str(plan_reply("execute", [command]))
    return str(plan_reply("response"))


def answer(messages: list[Any]) -> str:
    found = re.search(r'"Use get_greeting": "(hello \w+)"', str(messages[-1].content))
    return found.group(1) if found else "no result"


def build(**options: Any) -> Any:
    return create_tool_loop(
        ScriptedChatModel(responder=plan),
        [get_greeting],
        answer_model=ScriptedChatModel(responder=answer),
        **options,
    )


async def run_all(graph: Any, *, threads: bool) -> list[Any]:
    async def one(i: int) -> Any:
        config = {"configurable": {"thread_id": f"user-{i}"}} if threads else None
        return await graph.ainvoke({"user_input": f"I am user{i}, greet me"}, config)

    return await asyncio.gather(*(one(i) for i in range(RUNS)))


def check(outputs: list[Any]) -> None:
    for i, out in enumerate(outputs):
        assert out["answer"] == f"hello user{i}"
        [record] = out["tool_logs"]
        assert record["kwargs"] == {"user": f"user{i}"}
        assert record["success"] and not record["duplicate"] and not record["from_cache"]


async def test_200_concurrent_runs_with_a_checkpointer() -> None:
    saver = InMemorySaver()
    graph = build(checkpointer=saver)
    check(await run_all(graph, threads=True))
    state = await graph.aget_state({"configurable": {"thread_id": "user-7"}})
    assert state.values["answer"] == "hello user7"


async def test_200_concurrent_runs_release_their_memory() -> None:
    graph = build()
    check(await run_all(graph, threads=False))  # warm up caches and imports
    gc.collect()
    tracemalloc.start()
    try:
        start, _ = tracemalloc.get_traced_memory()
        outputs = await run_all(graph, threads=False)
        check(outputs)
        peak = tracemalloc.get_traced_memory()[1]
        del outputs
        gc.collect()
        end, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    grown = end - start
    assert grown < 0.1 * (peak - start) + 2_000_000, (start, peak, end)
