"""`ShellToolMiddleware` on a real shell: the same effect as under `create_agent`.

The same app (the middleware's `shell` tool, one session per run on a temp folder,
`HostExecutionPolicy`) runs through `create_agent` and `create_tool_loop` on one script:
the commands run in one shell session (state kept between calls), their output reaches
the transcript alike, and the session's startup and shutdown commands run once per run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HostExecutionPolicy, ShellToolMiddleware
from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from agentloop import ModelOptions, create_tool_loop
from agentloop.testing import ScriptedChatModel, plan_reply, tool_call_turns

pytestmark = pytest.mark.integration

Call = tuple[str, dict[str, Any]]

ROUNDS: list[list[Call]] = [
    [("shell", {"command": "cd sub && echo one > a.txt"})],
    [("shell", {"command": "pwd | sed 's|.*/||' && cat a.txt"})],
]


def _shell(workspace: Path) -> ShellToolMiddleware:
    (workspace / "sub").mkdir(exist_ok=True)
    return ShellToolMiddleware(
        workspace_root=workspace,
        startup_commands=[f"echo started >> {workspace}/log.txt"],
        shutdown_commands=[f"echo stopped >> {workspace}/log.txt"],
        execution_policy=HostExecutionPolicy(),
    )


def _outcomes(messages: list[BaseMessage]) -> list[tuple[str | None, str, Any]]:
    return [(m.name, m.status, m.content) for m in messages if isinstance(m, ToolMessage)]


def _kinds(messages: list[BaseMessage]) -> list[str]:
    return [type(m).__name__ for m in messages]


async def test_shell_runs_the_commands_in_one_session(
    run_loop: Any, plan_mode: str, tmp_path: Path
) -> None:
    theirs_dir, ours_dir = tmp_path / "theirs", tmp_path / "ours"
    theirs_dir.mkdir()
    ours_dir.mkdir()
    ask = {"messages": [HumanMessage("Write and read a file")]}
    config = {"configurable": {"thread_id": "t"}}
    model = ScriptedChatModel([*tool_call_turns(ROUNDS), "Done."])
    agent = create_agent(model, [], middleware=[_shell(theirs_dir)], checkpointer=InMemorySaver())
    theirs = await run_loop(agent, ask, config)

    plans = [
        plan_reply("execute", [{"tool_name": n, "tool_kwargs": a} for n, a in calls])
        for calls in ROUNDS
    ]
    loop = create_tool_loop(
        ScriptedChatModel([*plans, plan_reply("response")]),
        [],
        middleware=[_shell(ours_dir)],
        plan_mode=plan_mode,  # type: ignore[arg-type]
        checkpointer=InMemorySaver(),
        models=ModelOptions(answer_model=ScriptedChatModel(["Done."])),
    )
    ours = await run_loop(loop, ask, config)
    assert ours["status"] == "ok" and ours["answer"] == "Done."
    assert _kinds(ours["messages"]) == _kinds(theirs["messages"])
    assert _outcomes(ours["messages"]) == _outcomes(theirs["messages"])
    second = _outcomes(ours["messages"])[1][2]
    assert "sub" in second and "one" in second  # the session kept its directory
    assert (ours_dir / "sub" / "a.txt").read_text() == "one\n"
    assert (ours_dir / "log.txt").read_text() == (theirs_dir / "log.txt").read_text()
    assert (ours_dir / "log.txt").read_text() == "started\nstopped\n"
