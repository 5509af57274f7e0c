"""The bundled servers cannot be stalled or filled by one caller."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage

from agentloop import ModelOptions, create_tool_loop
from agentloop.cli.servers import bundled_servers_config
from agentloop.cli.servers.notes import MAX_BODY_CHARS
from agentloop.mcp import MCPSessionPool, MCPToolError, MCPToolset, load_mcp_config
from agentloop.testing import ScriptedChatModel, plan_reply, planning_round

pytestmark = pytest.mark.integration

HOSTILE_EXPRESSIONS = [
    "round(7, -10**9)",
    "round(7, -10**7)",
    "round(1.5, 10**9)",
    "-" * 499 + "1",
    "(1+" * 120 + "1" + ")" * 120,
    "9**999*9**999*9**999",
    "(10**999)**999",
    "max(" + ",".join(["9**999"] * 40) + ")*9**999",
    "sqrt(10**1000)",
]


@pytest.fixture
async def pool(tmp_path: Path) -> AsyncIterator[MCPSessionPool]:
    config = bundled_servers_config(tmp_path / "notes.jsonl")
    async with MCPSessionPool(load_mcp_config(config)) as pool:
        yield pool


async def test_hostile_expressions_do_not_stall_the_calculator(pool: MCPSessionPool) -> None:
    assert (await pool.call_tool("calculator", "calculate", {"expression": "1+1"}))["result"] == 2

    async def outcome_of(expression: str) -> str:
        try:
            value = await pool.call_tool("calculator", "calculate", {"expression": expression})
        except MCPToolError as error:
            return f"error: {error}"
        return str(value["result"])

    hostile = asyncio.gather(*(outcome_of(expression) for expression in HOSTILE_EXPRESSIONS))
    sums = asyncio.gather(*(outcome_of(f"{i}+2") for i in range(5)))
    # round(7, -10**9) alone ran for minutes before: the guard only bounds such a hang
    hostile_results, sum_results = await asyncio.wait_for(asyncio.gather(hostile, sums), 120)
    assert sum_results == [str(i + 2) for i in range(5)]
    assert all(outcome.startswith("error") for outcome in hostile_results), hostile_results


def notes_planner(*commands: dict[str, object]) -> ScriptedChatModel:
    """Runs `commands` in its first round, then answers (for each run of the loop)."""

    def respond(messages: list[BaseMessage]) -> str:
        if planning_round(messages) == 0:
            return str(plan_reply("execute", list(commands)))
        return str(plan_reply("response"))

    return ScriptedChatModel(responder=respond)


def user(name: str) -> dict[str, object]:
    return {"configurable": {"user_id": name}}


async def test_notes_belong_to_their_owner(run_loop: Any, tmp_path: Path) -> None:
    save = {
        "tool_name": "save_note",
        "tool_kwargs": {"title": "card", "body": "my card ends 1111", "idempotency_key": "k-1"},
    }
    listing = {"tool_name": "list_notes", "tool_kwargs": {}}
    config = bundled_servers_config(tmp_path / "notes.jsonl")
    with MCPToolset({"mcpServers": {"notes": config["mcpServers"]["notes"]}}) as toolset:
        answerer = ScriptedChatModel(["ok"], repeat_last=True)
        graph = create_tool_loop(
            notes_planner(save, listing),
            tools=[toolset],
            models=ModelOptions(answer_model=answerer),
        )
        alice = await run_loop(graph, {"user_input": "save"}, user("alice"))
        bob = await run_loop(graph, {"user_input": "save"}, user("bob"))
    alice_note, alice_list = alice["tool_logs"]
    bob_note, bob_list = bob["tool_logs"]
    assert alice_note["result"]["deduplicated"] is False
    assert bob_note["result"]["deduplicated"] is False  # alice's key is not bob's
    assert bob_note["result"]["id"] != alice_note["result"]["id"]
    assert [n["id"] for n in alice_list["result"]] == [alice_note["result"]["id"]]
    assert [n["id"] for n in bob_list["result"]] == [bob_note["result"]["id"]]


async def test_a_note_is_bounded(pool: MCPSessionPool) -> None:
    big = {"title": "big", "body": "x" * (MAX_BODY_CHARS + 1)}
    with pytest.raises(MCPToolError, match="at most"):
        await pool.call_tool("notes", "save_note", big)
    assert await pool.call_tool("notes", "list_notes", {}) == []
