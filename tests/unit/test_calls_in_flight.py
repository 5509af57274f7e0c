"""A server's event loop always has calls in flight: a call that ended keeps nothing alive.

Each async tool call notes the child processes its task starts (to end them at its
timeout): it is set in the task's context, and the points where Python starts
processes are hooked while any call is open. A loop that never runs dry (a server under
steady load) must not keep the calls it ever ran alive, and once no call is open the
hooks are gone.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import weakref
from typing import Any

import pytest
from langchain_core.tools import tool

from agentloop import create_tool_loop
from agentloop.governance.processes import CallChildren
from agentloop.testing import ScriptedChatModel, plan_reply

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
    calls: list[weakref.ref[CallChildren]] = []
    opened = CallChildren.open.__func__  # type: ignore[attr-defined]

    def watched(cls: type[CallChildren], tid: int, *, shared: bool = False) -> CallChildren:
        call: CallChildren = opened(cls, tid, shared=shared)
        calls.append(weakref.ref(call))
        return call

    monkeypatch.setattr(CallChildren, "open", classmethod(watched))
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

    alive = [ref for ref in calls if ref() is not None]
    assert len(calls) == SHORT_RUNS + 1  # every call noted its children
    assert len(alive) == 1, f"{len(alive)} calls alive beside the one in flight"
    # while a call is open, where Python starts processes is hooked
    assert _hooked(subprocess.Popen._execute_child)  # type: ignore[attr-defined]
    assert _hooked(os.fork)
    release.set()
    out = await asyncio.wait_for(long_run, 10)
    assert out["answer"] == "held"
    assert [r["result"] for r in out["tool_logs"]] == ["released"]
    # once no call is open, Python's own functions are back (calls an earlier test left
    # hung in this process may still be open: then they stay hooked until those end)
    if not CallChildren._in_flight:
        assert not _hooked(subprocess.Popen._execute_child)  # type: ignore[attr-defined]
        assert not _hooked(os.fork)


def _hooked(start: object) -> bool:
    """Whether a start point is the wrapper that notes processes in their call."""
    return hasattr(start, "__wrapped__")
