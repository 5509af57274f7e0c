"""Hostile tools that can only be tested in a process of their own."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, cast

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
    # the stuck threads never end: a run that waited for them would never end either
    second = graph.invoke({"user_input": "quick"})
    assert second["tool_logs"][0]["result"] == "quick 1", second["tool_logs"]
    print("DONE", flush=True)
    """
)


def test_hung_sync_tools_never_block_later_calls_or_the_exit() -> None:
    try:
        done = subprocess.run(
            [sys.executable, "-c", HUNG_SYNC_TOOLS], capture_output=True, text=True, timeout=120
        )
    except subprocess.TimeoutExpired as error:  # its threads are stuck for good
        pytest.fail(f"a later run or the exit waited for the hung threads: {error.stdout!r}")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("DONE")  # the process exited on its own


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


CLEANUP_WORKER = Path(__file__).with_name("timeout_cleanup_worker.py")
WATCHDOG_S = 120


def _alive(pid: int) -> bool:
    """Whether a process runs (a zombie has ended: only its exit status is left)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def _run_worker(*args: str) -> dict[str, Any]:
    try:
        done = subprocess.run(
            [sys.executable, str(CLEANUP_WORKER), *args],
            capture_output=True,
            text=True,
            timeout=WATCHDOG_S,
            check=False,
        )
    except subprocess.TimeoutExpired as error:
        pytest.fail(f"the host process hung: {error.stderr!r}")
    assert done.returncode == 0, done.stderr[-3000:]
    return cast(dict[str, Any], json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="ending children needs /proc")
@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize("entry", ["invoke", "ainvoke"])
def test_a_timed_out_tools_child_processes_do_not_outlive_the_host(
    entry: str, kind: str, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pids.json"
    pids: list[int] = []
    try:
        out = _run_worker("children", entry, kind, str(pid_file))
        pids = json.loads(pid_file.read_text())
        # a child that ignores SIGTERM, a shell, and the shell's own child
        assert len(pids) == 3
        deadline = time.monotonic() + 30  # only bounds a wait that never ends
        while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [pid for pid in pids if _alive(pid)] == []
        [record] = out["records"]
        assert record["error_type"] == "unknown_outcome"  # a write that timed out
        assert "the child processes it started were ended" in record["error"]
        assert "(SIGKILL)" in record["error"]  # the one that ignored SIGTERM
        assert out["answer"] == "the run went on"
    finally:
        for pid in pids:  # never leave a process behind when the test fails
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="ending children needs /proc")
@pytest.mark.parametrize("entry", ["invoke", "ainvoke"])
def test_a_child_that_may_be_another_calls_is_left_running_and_said(
    entry: str, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pids.json"
    pids: dict[str, int] = {}
    try:
        out = _run_worker("overlap", entry, str(pid_file))
        pids = json.loads(pid_file.read_text())
        job, other = out["records"]
        assert job["error_type"] == "timeout" and other["success"]
        # started by get_job's own task while get_other ran on the same event loop
        # (under invoke too: the compiled loop's one event loop runs every async call of
        # its sync runs): it is get_job's, and ended
        assert not _alive(pids["own"])
        assert f"sleep ({pids['own']})" in job["error"]
        # started on that thread beside get_job by a means that does not say which task
        # started it (libc's posix_spawnp): it could be anyone's
        assert _alive(pids["beside"])
        assert f"child processes [{pids['beside']}] were left running" in job["error"]
    finally:
        for pid in pids.values():
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def _check_foreign_left_alone(entry: str, tmp_path: Path) -> None:
    """A process the app starts while a tool hangs outlives the tool's timeout, unclaimed."""
    pid_file = tmp_path / "pids.json"
    pids: dict[str, int] = {}
    try:
        out = _run_worker("foreign", entry, str(pid_file))
        pids = json.loads(pid_file.read_text())
        [record] = out["records"]
        assert record["error_type"] == "timeout"
        assert out["alive_after_run"] == {"own": False, "foreign": True}
        assert f"sleep ({pids['own']})" in record["error"]  # the tool's own child, ended
        assert str(pids["foreign"]) not in record["error"]
        assert out["answer"] == "the run went on"
    finally:
        for pid in pids.values():
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="ending children needs /proc")
def test_a_process_an_app_coroutine_starts_beside_a_hung_async_tool_is_left_alone(
    tmp_path: Path,
) -> None:
    _check_foreign_left_alone("ainvoke", tmp_path)


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="ending children needs /proc")
def test_a_process_another_thread_starts_beside_a_hung_sync_tool_is_left_alone(
    tmp_path: Path,
) -> None:
    _check_foreign_left_alone("invoke", tmp_path)


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="ending children needs /proc")
@pytest.mark.parametrize("entry", ["invoke", "ainvoke"])
def test_a_sync_tool_that_returns_after_its_timeout_leaves_no_child(
    entry: str, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pids.json"
    pids: list[int] = []
    try:
        out = _run_worker("late", entry, str(pid_file))
        pids = json.loads(pid_file.read_text())
        [record] = out["records"]
        assert record["error_type"] == "unknown_outcome"  # a write that timed out
        assert "its thread runs on" in record["error"]
        assert [pid for pid in pids if _alive(pid)] == []
    finally:
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
