"""Hostile tools that can only be tested in a process of their own."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.integration

HUNG_SYNC_TOOLS = textwrap.dedent(
    """
    import time
    from langchain_core.tools import tool
    from agentloop import GovernanceOptions, ModelOptions, ToolPolicy, create_tool_loop
    from agentloop.testing import ScriptedChatModel, plan_reply

    @tool
    def get_stuck(n: int) -> str:
        '''Never returns.'''
        while True:
            time.sleep(1)

    @tool
    def get_quick(n: int) -> str:
        '''Returns at once.'''
        return f"quick {n}"

    stuck = [{"tool_name": "get_stuck", "tool_kwargs": {"n": i}} for i in range(6)]
    graph = create_tool_loop(
        ScriptedChatModel([
            plan_reply("execute", stuck), plan_reply("response"),
            plan_reply("execute", [{"tool_name": "get_quick", "tool_kwargs": {"n": 1}}]),
            plan_reply("response"),
        ]),
        [get_stuck, get_quick],
        models=ModelOptions(answer_model=ScriptedChatModel(["a", "b"])),
        governance=GovernanceOptions(
            policies={"get_stuck": ToolPolicy(timeout_s=0.3, retry=None)}
        ),
    )
    first = graph.invoke({"user_input": "hang"})
    assert [r["error_type"] for r in first["tool_logs"]] == ["timeout"] * 6, first["tool_logs"]
    started = time.monotonic()
    second = graph.invoke({"user_input": "quick"})
    assert second["tool_logs"][0]["result"] == "quick 1", second["tool_logs"]
    assert time.monotonic() - started < 5
    print("DONE", flush=True)
    """
)


def test_hung_sync_tools_never_block_later_calls_or_the_exit() -> None:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", HUNG_SYNC_TOOLS], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("DONE")
    assert time.monotonic() - started < 60  # the process exited on its own


KEYBOARD_INTERRUPT = textwrap.dedent(
    """
    import asyncio
    from langchain_core.tools import tool
    from agentloop import ModelOptions, create_tool_loop
    from agentloop.testing import ScriptedChatModel, plan_reply

    @tool
    async def get_interrupted(n: int) -> str:
        '''The user pressed Ctrl-C while this ran.'''
        raise KeyboardInterrupt

    graph = create_tool_loop(
        ScriptedChatModel([
            plan_reply("execute", [{"tool_name": "get_interrupted", "tool_kwargs": {"n": 1}}]),
            plan_reply("response"),
        ]),
        [get_interrupted],
        models=ModelOptions(answer_model=ScriptedChatModel(["never"])),
    )
    asyncio.run(graph.ainvoke({"user_input": "go"}))
    print("NOT INTERRUPTED", flush=True)
    """
)


def test_a_keyboard_interrupt_stops_the_run() -> None:
    done = subprocess.run(
        [sys.executable, "-c", KEYBOARD_INTERRUPT], capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0
    assert "KeyboardInterrupt" in done.stderr
    assert "NOT INTERRUPTED" not in done.stdout
