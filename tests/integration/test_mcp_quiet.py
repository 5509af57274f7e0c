"""No asyncio noise from MCP sessions: timeouts, killed servers and shutdowns end quietly.

"Task was destroyed but it is pending!" and "Event loop is closed" are what a task left
behind or a callback on a stopped loop writes, at ERROR, long after the fact.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from processes import child_pids
from third_party import cmd, own_server

from agentloop import ModelOptions, create_tool_loop
from agentloop.mcp import MCPToolset
from agentloop.testing import ScriptedChatModel, plan_reply

pytestmark = pytest.mark.integration

NOISE = ("Task was destroyed", "Event loop is closed", "was never retrieved", "Traceback")


def assert_quiet(caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]) -> None:
    gc.collect()  # a pending task left behind is reported when it is collected
    noisy = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    noisy = [message for message in noisy if any(n in message for n in NOISE)]
    err = capfd.readouterr().err
    assert noisy == [] and not any(n in err for n in NOISE), (noisy, err)


def planner(*plans: Any) -> ScriptedChatModel:
    return ScriptedChatModel([*plans, plan_reply("response")])


async def test_timeouts_are_quiet(
    tmp_path: Path,
    run_loop: Any,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    config = {
        "slow": own_server(
            "slow", str(tmp_path / "log"), policies={"slow_write": {"timeout_s": 0.5}}
        )
    }
    with caplog.at_level(logging.WARNING), MCPToolset(config) as toolset:
        slow = [cmd("slow_write", seconds=10)]
        graph = create_tool_loop(
            planner(*[plan_reply("execute", slow)] * 3),
            [toolset],
            models=ModelOptions(answer_model=ScriptedChatModel(["late"])),
            max_rounds=3,
        )
        out = await run_loop(graph, {"user_input": "three timeouts"})
        assert [r["success"] for r in out["tool_logs"]] == [False] * 3
    assert_quiet(caplog, capfd)


async def test_killed_servers_and_shutdown_are_quiet(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    with caplog.at_level(logging.WARNING):
        toolset = MCPToolset(
            {"plain": own_server("plain"), "slow": own_server("slow", str(tmp_path / "log"))}
        )
        graph = create_tool_loop(
            planner(
                plan_reply("execute", [cmd("explode", marker_file=str(tmp_path / "m"))]),
                plan_reply("execute", [cmd("toggle")]),
            ),
            [toolset],
            models=ModelOptions(answer_model=ScriptedChatModel(["done"])),
        )
        out = await graph.ainvoke({"user_input": "explode, then toggle"})
        assert [r["success"] for r in out["tool_logs"]] == [False, True]
        (pid,) = child_pids("plain.py")
        os.kill(pid, signal.SIGKILL)
        # a call in flight when the toolset closes, and a run cancelled meanwhile
        call = asyncio.ensure_future(toolset.call("slow", "slow_read", {"seconds": 30}))
        await asyncio.sleep(1.0)
        await toolset.aclose()
        with pytest.raises(BaseException):  # noqa: B017 - how it ends does not matter here
            await call
    assert child_pids("plain.py") == [] and child_pids("slow.py") == []
    assert_quiet(caplog, capfd)
