"""A command is prepared once, whether streaming dispatch starts it or execute does."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from agentloop import ModelOptions, create_tool_loop
from agentloop.governance.call_config import CallInfo, call_info
from agentloop.governance.pipeline import ToolRunner
from agentloop.testing import ScriptedChatModel, plan_reply


def cmd(tool_name: str, **kwargs: Any) -> dict[str, Any]:
    return {"purpose": f"use {tool_name}", "tool_name": tool_name, "tool_kwargs": kwargs}


def loop_with(seen: list[CallInfo]) -> Any:
    @tool
    async def lookup(query: str, config: RunnableConfig) -> str:
        """Look something up (read-only)."""
        info = call_info(config)
        assert info is not None
        seen.append(info)
        return f"found {query}"

    @tool
    async def save_note(text: str) -> str:
        """Save a note (has side effects)."""
        return f"saved {text}"

    plan = plan_reply("execute", [cmd("lookup", query="tram news"), cmd("lookup", query="rain")])
    planner = ScriptedChatModel(
        [str(plan), str(plan_reply("response"))], chunk_size=4, chunk_delay_s=0.002
    )
    return create_tool_loop(
        planner,
        [lookup, save_note],
        models=ModelOptions(answer_model=ScriptedChatModel(["done"])),
        checkpointer=InMemorySaver(),
    )


async def test_a_call_started_early_is_prepared_once_and_adopted_as_prepared(
    run_loop: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    prepared: list[str] = []
    prepare = ToolRunner.prepare

    def counting(self: ToolRunner, command: Any, **kwargs: Any) -> Any:
        prepared.append(str(kwargs["call_id"]))
        return prepare(self, command, **kwargs)

    monkeypatch.setattr(ToolRunner, "prepare", counting)
    seen: list[CallInfo] = []
    graph = loop_with(seen)
    config: RunnableConfig = {"configurable": {"thread_id": f"prepare-once-{run_loop.entry}"}}
    payload = {"user_input": "tram news and rain"}
    events = await run_loop.stream(graph, payload, config, stream_mode="custom")
    state = graph.get_state(config).values
    records = state["tool_logs"]
    run_id = state["run_book"]["run_id"]
    dispatched = [e for e in events if e["type"] == "tool_dispatched"]
    assert dispatched and dispatched[0]["index"] == 0  # started while the plan streamed
    ids = [f"{run_id}:0:{index}" for index in (0, 1)]
    assert [record["call_id"] for record in records] == ids
    assert [e["call_id"] for e in dispatched] == ids[: len(dispatched)]
    # each command was prepared exactly once, the early one by streaming dispatch only
    assert Counter(prepared) == Counter(ids)
    # the tool learned its call from typed parts, and the record kept the same identity
    by_id = {info["call_id"]: info for info in seen}
    assert sorted(by_id) == ids
    for index, record in enumerate(records):
        info = by_id[record["call_id"]]
        assert info["run_id"] == run_id
        assert info.get("place") == f"0:{index}"
        assert info["call_key"] == record["call_key"]
        assert record["success"] is True
        assert {"purpose", "tool_name", "kwargs", "todo_suggestion", "next"} <= set(record)
