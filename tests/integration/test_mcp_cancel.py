"""Cancellation by the MCP spec, against a real server: on a timeout or a cancelled run,
the server is sent `notifications/cancelled` and stops the call; retries never overlap."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from third_party import cmd, own_server

from agentloop import ModelOptions, create_tool_loop
from agentloop.mcp import MCPToolset
from agentloop.testing import ScriptedChatModel, plan_reply

pytestmark = pytest.mark.integration


def events(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


async def wait_for(condition: Any, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the condition did not come true in time"
        await asyncio.sleep(0.05)


def slow_server(log: Path, **policies: dict[str, Any]) -> dict[str, Any]:
    return {"slow": own_server("slow", str(log), policies=policies)}


async def test_a_timed_out_write_is_cancelled_on_the_server(tmp_path: Path, run_loop: Any) -> None:
    log = tmp_path / "server.log"
    config = slow_server(log, slow_write={"timeout_s": 1})
    with MCPToolset(config) as toolset:
        graph = create_tool_loop(
            ScriptedChatModel(
                [plan_reply("execute", [cmd("slow_write", seconds=8)]), plan_reply("response")]
            ),
            [toolset],
            models=ModelOptions(answer_model=ScriptedChatModel(["timed out"])),
        )
        out = await run_loop(graph, {"user_input": "write slowly"})
        (record,) = out["tool_logs"]
        assert record["success"] is False and record["attempts"] == 1
        await wait_for(lambda: len(events(log)) >= 4)
        await asyncio.sleep(0.5)
    assert events(log)[::2] == ["start", "cancelled"]  # never "end"


async def test_read_only_retries_never_overlap_on_the_server(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    retry = {"max_attempts": 3, "initial_delay_s": 0, "jitter": False}
    config = slow_server(log, slow_read={"timeout_s": 1, "retry": retry})
    with MCPToolset(config) as toolset:
        graph = create_tool_loop(
            ScriptedChatModel(
                [plan_reply("execute", [cmd("slow_read", seconds=8)]), plan_reply("response")]
            ),
            [toolset],
            models=ModelOptions(answer_model=ScriptedChatModel(["timed out"])),
        )
        out = await graph.ainvoke({"user_input": "read slowly"})
    (record,) = out["tool_logs"]
    assert record["success"] is False and record["attempts"] == 3
    lines = log.read_text().splitlines()
    assert lines == ["start 1", "cancelled 0"] * 3  # one call on the server at a time


async def test_a_cancelled_run_cancels_its_call_on_the_server(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with MCPToolset(slow_server(log)) as toolset:
        graph = create_tool_loop(
            ScriptedChatModel([plan_reply("execute", [cmd("slow_write", seconds=30)])]),
            [toolset],
        )
        run = asyncio.ensure_future(graph.ainvoke({"user_input": "write slowly"}))
        await wait_for(lambda: events(log) == ["start", "1"])
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        await wait_for(lambda: len(events(log)) >= 4, timeout_s=10)
    assert events(log)[::2] == ["start", "cancelled"]
