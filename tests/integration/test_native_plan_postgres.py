"""`plan_mode="native"` on the real PostgreSQL saver: replays repeat no side effect."""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from postgres import postgres_dsn

from agentloop import GovernanceOptions, ModelOptions, ToolPolicy, create_tool_loop
from agentloop.testing import ScriptedChatModel

pytestmark = pytest.mark.integration


def _calls(*specs: tuple[str, dict[str, Any]]) -> AIMessage:
    return AIMessage(
        "",
        tool_calls=[
            {"name": name, "args": args, "id": f"call_{index}"}
            for index, (name, args) in enumerate(specs)
        ],
    )


def _loop(saver: Any, effects: list[str], lock: threading.Lock) -> Any:
    @tool
    def lookup(query: str) -> str:
        """Look something up (read-only)."""
        with lock:
            effects.append(f"lookup {query}")
        return f"found {query}"

    @tool
    def save_note(text: str) -> str:
        """Save a note (has side effects)."""
        with lock:
            effects.append(f"save {text}")
        return f"saved {text}"

    planner = ScriptedChatModel(
        [
            _calls(("lookup", {"query": "a"}), ("lookup", {"query": "b"})),
            _calls(("save_note", {"text": "a and b"})),
            "done",
        ],
        repeat_last=True,
    )
    return create_tool_loop(
        planner,
        [lookup, save_note],
        models=ModelOptions(answer_model=ScriptedChatModel(["noted"], repeat_last=True)),
        plan_mode="native",
        governance=GovernanceOptions(policies={"save_note": ToolPolicy(read_only=False)}),
        checkpointer=saver,
    )


EXPECTED = ["lookup a", "lookup b", "save a and b"]


def test_native_replays_on_postgres_sync() -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    effects: list[str] = []
    with PostgresSaver.from_conn_string(postgres_dsn()) as saver:
        saver.setup()
        graph = _loop(saver, effects, threading.Lock())
        config = {"configurable": {"thread_id": uuid.uuid4().hex}}
        out = graph.invoke({"user_input": "look up a and b, save a"}, config)
        assert out["answer"] == "noted"
        assert sorted(effects) == sorted(EXPECTED)
        history = list(graph.get_state_history(config))
        assert len(history) > 5
        for snapshot in history[1:]:
            graph.invoke(None, snapshot.config)
        assert sorted(effects) == sorted(EXPECTED)


def test_native_replays_on_postgres_async() -> None:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    async def scenario() -> None:
        effects: list[str] = []
        async with AsyncPostgresSaver.from_conn_string(postgres_dsn()) as saver:
            await saver.setup()
            graph = _loop(saver, effects, threading.Lock())
            config = {"configurable": {"thread_id": uuid.uuid4().hex}}
            out = await graph.ainvoke({"user_input": "look up a and b, save a"}, config)
            assert out["answer"] == "noted"
            assert sorted(effects) == sorted(EXPECTED)
            history = [snapshot async for snapshot in graph.aget_state_history(config)]
            assert len(history) > 5
            for snapshot in history[1:]:
                await graph.ainvoke(None, snapshot.config)
            assert sorted(effects) == sorted(EXPECTED)

    asyncio.run(scenario())
