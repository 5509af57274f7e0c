"""A server's event loop always has calls in flight: a call that ended keeps nothing alive.

Each async tool call watches for the child processes it starts (a window on the event
loop's thread, to end them at its timeout). Windows that overlap must tell each other
when they were open; if they held each other, a loop that never runs dry (a server
under steady load) would keep every call's window it ever opened.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

import pytest
from langchain_core.tools import tool

from agentloop import create_tool_loop
from agentloop.testing import ScriptedChatModel, plan_reply
from agentloop.tools.processes import ChildWindow

SHORT_RUNS = 30


def _one_call_script(tool_name: str, answer: str, runs: int = 1) -> list[Any]:
    run = [
        plan_reply("execute", [{"tool_name": tool_name, "tool_kwargs": {}}]),
        plan_reply("response"),
        answer,
    ]
    return run * runs


async def test_calls_beside_a_long_one_are_not_kept_alive_by_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    windows: list[weakref.ref[ChildWindow]] = []
    opened = ChildWindow.open.__func__  # type: ignore[attr-defined]

    def watched(cls: type[ChildWindow], tid: int) -> ChildWindow:
        window: ChildWindow = opened(cls, tid)
        windows.append(weakref.ref(window))
        return window

    monkeypatch.setattr(ChildWindow, "open", classmethod(watched))
    started, release = asyncio.Event(), asyncio.Event()

    @tool
    async def hold() -> str:
        """Wait until released (a long call, always in flight)."""
        started.set()
        await release.wait()
        return "released"

    @tool
    async def lookup() -> str:
        """Answer at once."""
        await asyncio.sleep(0)
        return "found"

    long_loop = create_tool_loop(ScriptedChatModel(_one_call_script("hold", "held")), [hold])
    short_loop = create_tool_loop(
        ScriptedChatModel(_one_call_script("lookup", "looked up", SHORT_RUNS)), [lookup]
    )
    long_run = asyncio.create_task(long_loop.ainvoke({"user_input": "hold on"}))
    await asyncio.wait_for(started.wait(), 10)
    for _ in range(SHORT_RUNS):
        out = await short_loop.ainvoke({"user_input": "look it up"})
        assert out["answer"] == "looked up"
        assert [r["result"] for r in out["tool_logs"]] == ["found"]

    alive = [ref for ref in windows if ref() is not None]
    assert len(windows) == SHORT_RUNS + 1  # every call opened its window
    assert len(alive) == 1, f"{len(alive)} windows alive beside the one call in flight"
    release.set()
    out = await asyncio.wait_for(long_run, 10)
    assert out["answer"] == "held"
    assert [r["result"] for r in out["tool_logs"]] == ["released"]
