"""A host process for timed-out tools that leave work behind; prints its records as JSON.

    python timeout_cleanup_worker.py children invoke|ainvoke sync|async PID_FILE
    python timeout_cleanup_worker.py stubborn invoke|ainvoke
    python timeout_cleanup_worker.py overlap invoke|ainvoke PID_FILE
    python timeout_cleanup_worker.py late invoke|ainvoke PID_FILE

`children`: a tool starts child processes (one that ignores SIGTERM, and a shell with a
child of its own), writes their process ids to PID_FILE, then waits for them; it times
out. The host prints the record and exits; the test then checks by process id that
none of them outlived it.

`overlap`: an async tool starts a child while another call runs beside it, and one
after that call ended; then it times out. It writes both ids to PID_FILE.

`late`: a sync tool starts a child after its timeout and returns, leaving it running;
the host waits for the tool's thread to end before it exits.

`stubborn`: async tools that swallow every cancellation time out; the host runs the loop
with `asyncio.run(loop.ainvoke(...))` (or `loop.invoke`) and must exit.

Run by `test_timeout_cleanup.py` in a subprocess with a watchdog: a hang fails the test
instead of blocking the test run.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from agentloop import GovernanceOptions, ModelOptions, ToolPolicy, create_tool_loop
from agentloop.testing import ScriptedChatModel, plan_reply
from agentloop.tools.threads import ToolThreads

IGNORES_SIGTERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"
)
"""A child that only SIGKILL ends."""
SHELL_WITH_CHILD = 'sleep 300 & echo $! > "$0"; wait'
"""A child with a child of its own (it writes the grandchild's id to the file in $0)."""

QUIET: dict[str, Any] = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
"""Children never hold the host's output pipes (a child left running would hold the test)."""

WRITE = ToolPolicy(read_only=False, idempotent=False, timeout_s=0.5, retry=None)
READ = ToolPolicy(read_only=True, idempotent=True, timeout_s=0.5, retry=None)


def children_tools(pid_file: Path) -> list[Any]:
    grandchild = pid_file.with_suffix(".grandchild")

    def record(*pids: int) -> None:
        for _ in range(100):  # the shell writes its child's id once it has started it
            if grandchild.exists() and grandchild.read_text().strip():
                break
            time.sleep(0.01)
        pid_file.write_text(json.dumps([*pids, int(grandchild.read_text())]))

    @tool
    def run_job(name: str) -> str:
        """Run a batch job (sync) that outlives its timeout."""
        stubborn = subprocess.Popen([sys.executable, "-c", IGNORES_SIGTERM], **QUIET)
        shell = subprocess.Popen(["sh", "-c", SHELL_WITH_CHILD, str(grandchild)], **QUIET)
        record(stubborn.pid, shell.pid)
        shell.wait()
        stubborn.wait()
        return "finished"

    @tool
    async def arun_job(name: str) -> str:
        """Run a batch job (async) that outlives its timeout."""
        stubborn = await asyncio.create_subprocess_exec(sys.executable, "-c", IGNORES_SIGTERM)
        shell = await asyncio.create_subprocess_exec("sh", "-c", SHELL_WITH_CHILD, str(grandchild))
        record(stubborn.pid, shell.pid)
        await shell.wait()
        await stubborn.wait()
        return "finished"

    return [run_job, arun_job]


async def swallow_cancellation() -> None:
    """Wait forever, ignoring every cancellation."""
    while True:
        try:
            await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            continue


def overlap_tools(pid_file: Path) -> list[Any]:
    @tool
    async def get_job(n: int) -> str:
        """Start two processes, one beside another call and one after it, then hang."""
        await asyncio.sleep(0.1)  # get_other runs by now
        beside = await asyncio.create_subprocess_exec("sleep", "300", **QUIET)
        await asyncio.sleep(0.6)  # get_other has ended by now
        after = await asyncio.create_subprocess_exec("sleep", "301", **QUIET)
        pid_file.write_text(json.dumps({"beside": beside.pid, "after": after.pid}))
        await asyncio.sleep(300)
        return "never"

    @tool
    async def get_other(n: int) -> str:
        """Return soon."""
        await asyncio.sleep(0.4)
        return "other"

    return [get_job, get_other]


def late_tools(pid_file: Path, returned: threading.Event) -> list[Any]:
    @tool
    def run_export(n: int) -> str:
        """Export slowly, then start a process and return without waiting for it."""
        time.sleep(0.8)  # past its timeout
        child = subprocess.Popen(["sleep", "302"], **QUIET)
        pid_file.write_text(json.dumps([child.pid]))
        returned.set()
        return "exported"

    return [run_export]


@tool
async def send_payment(account: str) -> str:
    """Pay an account (side effect); it never ends and ignores cancellation."""
    await swallow_cancellation()
    return "paid"


@tool
async def get_feed(n: int) -> str:
    """Read a feed (read-only); it never ends and ignores cancellation."""
    await swallow_cancellation()
    return "feed"


def build(tools: list[Any], commands: list[dict[str, Any]], policies: dict[str, Any]) -> Any:
    planner = ScriptedChatModel([plan_reply("execute", commands), plan_reply("response")])
    return create_tool_loop(
        planner,
        tools,
        models=ModelOptions(answer_model=ScriptedChatModel(["the run went on"])),
        governance=GovernanceOptions(
            policies=policies, tool_threads=ToolThreads(cancel_grace_s=0.3)
        ),
        checkpointer=InMemorySaver(),
    )


def run(loop: Any, entry: str) -> dict[str, Any]:
    payload = {"user_input": "go"}
    config = {"configurable": {"thread_id": "cleanup"}}
    if entry == "invoke":
        return dict(loop.invoke(payload, config))
    return dict(asyncio.run(loop.ainvoke(payload, config)))


def main() -> None:
    what, entry = sys.argv[1], sys.argv[2]
    if what == "children":
        kind, pid_file = sys.argv[3], Path(sys.argv[4])
        name = "run_job" if kind == "sync" else "arun_job"
        loop = build(
            children_tools(pid_file),
            [{"tool_name": name, "tool_kwargs": {"name": "nightly"}}],
            {"run_job": WRITE, "arun_job": WRITE},
        )
    elif what == "late":
        returned = threading.Event()
        loop = build(
            late_tools(Path(sys.argv[3]), returned),
            [{"tool_name": "run_export", "tool_kwargs": {"n": 1}}],
            {"run_export": ToolPolicy(read_only=False, timeout_s=0.3, retry=None)},
        )
    elif what == "overlap":
        slow = ToolPolicy(read_only=True, idempotent=True, timeout_s=1.5, retry=None)
        loop = build(
            overlap_tools(Path(sys.argv[3])),
            [
                {"tool_name": "get_job", "tool_kwargs": {"n": 1}},
                {"tool_name": "get_other", "tool_kwargs": {"n": 2}},
            ],
            # get_other has room to end on a busy machine (it sleeps 0.4 s)
            {"get_job": slow, "get_other": slow},
        )
    else:
        loop = build(
            [send_payment, get_feed],
            [
                {"tool_name": "send_payment", "tool_kwargs": {"account": "a"}},
                {"tool_name": "get_feed", "tool_kwargs": {"n": 1}},
            ],
            {"send_payment": WRITE, "get_feed": READ},
        )
    started = time.monotonic()
    out = run(loop, entry)
    if what == "late":  # its thread ends what it left once it has returned
        returned.wait(10)
        time.sleep(1.0)
    fields = ("tool_name", "success", "error_type", "error")
    print(
        json.dumps(
            {
                "answer": out.get("answer"),
                "records": [{key: r.get(key) for key in fields} for r in out["tool_logs"]],
                "run_s": round(time.monotonic() - started, 3),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
