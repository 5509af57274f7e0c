"""Text PostgreSQL cannot hold (U+0000) from a model and from tools, on the real saver.

A NUL in a model's answer or a tool's result used to fail every checkpoint of the thread
(`UntranslatableCharacter`), so the thread could never finish. The loop writes U+FFFD
instead, in state, messages and the ledger alike (a plan is state: a NUL the planner
writes into an argument reaches the tool as U+FFFD).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from langchain_core.tools import tool
from postgres import postgres_dsn

from agentloop import ModelOptions, create_tool_loop
from agentloop.testing import ScriptedChatModel, plan_reply

pytestmark = pytest.mark.integration


def _loop(saver: Any, received: list[str]) -> Any:
    @tool
    def get_page(n: int) -> str:
        """Return the text of a PDF page."""
        return f"page {n}: total\x00 42"

    @tool
    def save_note(text: str) -> str:
        """Save a note."""
        received.append(text)
        return f"saved\x00{text}"

    planner = ScriptedChatModel(
        [
            plan_reply(
                "execute",
                [
                    {"tool_name": "get_page", "tool_kwargs": {"n": 1}},
                    {"tool_name": "save_note", "tool_kwargs": {"text": "a\x00b"}},
                ],
            ),
            plan_reply("response"),
            plan_reply("response"),
        ]
    )
    answers = ScriptedChatModel(["The total\x00 is 42.", "Still 42."])
    return create_tool_loop(
        planner,
        [get_page, save_note],
        models=ModelOptions(answer_model=answers),
        checkpointer=saver,
    )


def _check_first_run(out: dict[str, Any], received: list[str]) -> None:
    assert out["status"] == "ok"
    assert out["answer"] == "The total\ufffd is 42."
    page, note = out["tool_logs"]
    assert page["success"] and page["result"] == "page 1: total\ufffd 42"
    assert note["success"] and note["result"] == "saved\ufffda\ufffdb"
    assert received == ["a\ufffdb"]


def test_nul_from_model_and_tools_on_postgres_sync() -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    received: list[str] = []
    with PostgresSaver.from_conn_string(postgres_dsn()) as saver:
        saver.setup()
        loop = _loop(saver, received)
        config = {"configurable": {"thread_id": uuid.uuid4().hex}}
        _check_first_run(loop.invoke({"user_input": "What is the total?"}, config), received)
        again = loop.invoke(None, config)
        assert again["answer"] == "The total\ufffd is 42."
        follow_up = loop.invoke({"user_input": "And now?"}, config)
        assert follow_up["status"] == "ok" and follow_up["answer"] == "Still 42."
        assert received == ["a\ufffdb"]
        assert loop.get_state(config).next == ()


def test_nul_from_model_and_tools_on_postgres_async() -> None:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    async def scenario() -> None:
        received: list[str] = []
        async with AsyncPostgresSaver.from_conn_string(postgres_dsn()) as saver:
            await saver.setup()
            loop = _loop(saver, received)
            config = {"configurable": {"thread_id": uuid.uuid4().hex}}
            first = await loop.ainvoke({"user_input": "What is the total?"}, config)
            _check_first_run(first, received)
            again = await loop.ainvoke(None, config)
            assert again["answer"] == "The total\ufffd is 42."
            follow_up = await loop.ainvoke({"user_input": "And now?"}, config)
            assert follow_up["status"] == "ok" and follow_up["answer"] == "Still 42."
            assert received == ["a\ufffdb"]
            assert (await loop.aget_state(config)).next == ()

    asyncio.run(scenario())


def test_nul_in_the_callers_input_on_postgres() -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(postgres_dsn()) as saver:
        saver.setup()
        loop = create_tool_loop(
            ScriptedChatModel([plan_reply("response")], repeat_last=True),
            [],
            models=ModelOptions(answer_model=ScriptedChatModel(["noted"], repeat_last=True)),
            checkpointer=saver,
        )
        config = {"configurable": {"thread_id": uuid.uuid4().hex}}
        payload = {"user_input": "scraped\x00 text", "user_extra_requirement": "be\x00 brief"}
        out = loop.invoke(payload, config)
        assert out["status"] == "ok" and out["answer"] == "noted"
        assert out["user_input"] == "scraped\ufffd text"
        assert out["user_extra_requirement"] == "be\ufffd brief"
        assert loop.invoke({"user_input": "and now?"}, config)["status"] == "ok"
