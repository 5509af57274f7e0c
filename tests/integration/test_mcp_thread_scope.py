"""`"scope": "thread"`: a stateful server's session per thread, reused by its runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.memory import InMemorySaver
from third_party import SERVER_PYTHON

from agentloop import ModelOptions, create_tool_loop
from agentloop.mcp import MCPToolset
from agentloop.testing import ScriptedChatModel, plan_reply, planning_round

pytestmark = pytest.mark.integration

LOGIN_SERVER = str(Path(__file__).parent / "servers" / "login.py")


def planner() -> ScriptedChatModel:
    """Logs in as the user named in a "login NAME" request; asks `whoami` otherwise."""

    def respond(messages: list[BaseMessage]) -> str:
        if planning_round(messages) != 0:
            return str(plan_reply("response"))
        request = str(messages[-2].content)  # the user's, before the round
        for user in ("alice", "bob"):
            if f"login {user}" in request:
                command = {"tool_name": "login", "tool_kwargs": {"user": user}}
                return str(plan_reply("execute", [command]))
        return str(plan_reply("execute", [{"tool_name": "whoami", "tool_kwargs": {}}]))

    return ScriptedChatModel(responder=respond)


def loop(scope: str) -> tuple[Any, MCPToolset]:
    config = {"mcpServers": {"login": {"command": SERVER_PYTHON, "args": [LOGIN_SERVER]}}}
    config["mcpServers"]["login"]["scope"] = scope  # type: ignore[index]
    toolset = MCPToolset(config)
    graph = create_tool_loop(
        planner(),
        tools=[toolset],
        models=ModelOptions(answer_model=ScriptedChatModel(["ok"], repeat_last=True)),
        checkpointer=InMemorySaver(),
    )
    return graph, toolset


def thread(name: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


async def test_thread_scope_keeps_a_login_within_its_thread(run_loop: Any) -> None:
    graph, toolset = loop("thread")
    with toolset:
        await run_loop(graph, {"user_input": "login alice"}, thread("alice-thread"))
        bob = await run_loop(graph, {"user_input": "who am I?"}, thread("bob-thread"))
        alice = await run_loop(graph, {"user_input": "who am I?"}, thread("alice-thread"))
        assert bob["tool_logs"][-1]["result"] == "nobody"
        assert alice["tool_logs"][-1]["result"] == "alice"
        assert toolset.sessions_opened(thread_id="alice-thread") == {"login": 1}
        assert sorted(toolset.open_threads) == ["alice-thread", "bob-thread"]
        assert toolset.open_runs == []


async def test_toolset_scope_shares_a_login_with_every_thread(run_loop: Any) -> None:
    graph, toolset = loop("toolset")
    with toolset:
        await run_loop(graph, {"user_input": "login alice"}, thread("alice-thread"))
        bob = await run_loop(graph, {"user_input": "who am I?"}, thread("bob-thread"))
        assert bob["tool_logs"][-1]["result"] == "alice"  # why `thread` exists
        assert toolset.open_threads == []
