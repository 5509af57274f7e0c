"""A host process for timed-out tools that leave work behind; prints its records as JSON.

    python timeout_cleanup_worker.py children invoke|ainvoke sync|async PID_FILE
    python timeout_cleanup_worker.py stubborn invoke|ainvoke
    python timeout_cleanup_worker.py overlap invoke|ainvoke PID_FILE
    python timeout_cleanup_worker.py late invoke|ainvoke PID_FILE
    python timeout_cleanup_worker.py foreign invoke|ainvoke PID_FILE

`children`: a tool starts child processes (one that ignores SIGTERM, and a shell with a
child of its own), writes their process ids to PID_FILE, then waits for them; it times
out. The host prints the record and exits; the test then checks by process id that
none of them outlived it.

`overlap`: an async tool starts a child while another call runs beside it on the same
event loop, and that other call starts one the way a C extension would (libc's
`posix_spawnp`, which Python does not see); then the tool times out. It writes both
ids to PID_FILE.

`late`: a sync tool starts a child after its timeout and returns, leaving it running;
the host waits for the tool's thread to end before it exits.

`foreign`: a tool starts a child, then hangs; while it hangs, the app starts a `sleep`
of its own (under `ainvoke`: a coroutine on the same event loop as an async tool;
under `invoke`: another thread, beside a sync tool). The tool times out; the host
prints whether each process is still alive right after the run, by process id.

`stubborn`: async tools that swallow every cancellation time out; the host runs the loop
with `asyncio.run(loop.ainvoke(...))` (or `loop.invoke`) and must exit.

Run by `test_hostile_processes.py` in a subprocess with a watchdog: a hang fails the test
instead of blocking the test run.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from agentloop import GovernanceOptions, ModelOptions, ToolPolicy, create_tool_loop
from agentloop.governance.threads import ToolThreads
from agentloop.testing import ScriptedChatModel, plan_reply

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


def c_spawn(*argv: str) -> int:
    """Start a process as a C extension would: libc's `posix_spawnp`, not Python's."""
    libc = ctypes.CDLL(None, use_errno=True)
    pid = ctypes.c_int()
    args = (ctypes.c_char_p * (len(argv) + 1))(*[arg.encode() for arg in argv], None)
    environ = [f"{key}={value}".encode() for key, value in os.environ.items()]
    envp = (ctypes.c_char_p * (len(environ) + 1))(*environ, None)
    failed = libc.posix_spawnp(ctypes.byref(pid), args[0], None, None, args, envp)
    if failed:
        raise OSError(failed, os.strerror(failed))
    return pid.value


def overlap_tools(pid_file: Path) -> list[Any]:
    pids: dict[str, int] = {}
    other_runs, own_started = asyncio.Event(), asyncio.Event()

    @tool
    async def get_job(n: int) -> str:
        """Start a process while get_other runs, then hang."""
        await other_runs.wait()
        own = await asyncio.create_subprocess_exec("sleep", "301", **QUIET)
        pids["own"] = own.pid
        own_started.set()
        await asyncio.sleep(300)
        return "never"

    @tool
    async def get_other(n: int) -> str:
        """Start a process beside get_job as a C extension would, and return."""
        other_runs.set()
        await own_started.wait()
        # `exec` so that the process id is the sleep's; it never holds the host's pipes
        pids["beside"] = c_spawn("sh", "-c", "exec sleep 300 >/dev/null 2>&1")
        pid_file.write_text(json.dumps(pids))
        return "other"

    return [get_job, get_other]


def foreign_tools(pid_file: Path, entry: str) -> tuple[list[Any], Any]:
    """A tool that hangs, and the app's own work that starts a `sleep` meanwhile."""
    pids: dict[str, int] = {}
    if entry == "ainvoke":  # an app coroutine on the event loop the async tool runs on
        tool_started, app_started = asyncio.Event(), asyncio.Event()

        @tool
        async def get_report(n: int) -> str:
            """Start a helper process, then hang."""
            helper = await asyncio.create_subprocess_exec("sleep", "301", **QUIET)
            pids["own"] = helper.pid
            tool_started.set()
            await app_started.wait()
            await asyncio.sleep(300)
            return "never"

        async def app_work() -> Any:
            await tool_started.wait()
            foreign = await asyncio.create_subprocess_exec("sleep", "30", **QUIET)
            pids["foreign"] = foreign.pid
            pid_file.write_text(json.dumps(pids))
            app_started.set()
            return foreign  # held until the run has ended

        return [get_report], app_work

    tool_ran, app_ran = threading.Event(), threading.Event()

    @tool
    def run_report(n: int) -> str:
        """Start a helper process, then wait for it (it outlives the timeout)."""
        helper = subprocess.Popen(["sleep", "301"], **QUIET)
        pids["own"] = helper.pid
        tool_ran.set()
        app_ran.wait(30)
        helper.wait()
        return "finished"

    def app_work() -> None:  # another thread of the app
        tool_ran.wait(30)
        foreign = subprocess.Popen(["sleep", "30"], **QUIET)
        pids["foreign"] = foreign.pid
        pid_file.write_text(json.dumps(pids))
        app_ran.set()

    return [run_report], app_work


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


def run_beside(loop: Any, entry: str, app_work: Any) -> tuple[dict[str, Any], Any]:
    """Run the loop while the app's own work runs beside it (a coroutine, or a thread).

    Returns the run's output and what the app's work returned (held, so that an asyncio
    process object is not collected, which would kill its process).
    """
    payload = {"user_input": "go"}
    config = {"configurable": {"thread_id": "cleanup"}}
    if entry == "invoke":
        app = threading.Thread(target=app_work, name="app-work")
        app.start()
        out = dict(loop.invoke(payload, config))
        app.join()
        return out, None

    async def both() -> tuple[dict[str, Any], Any]:
        app = asyncio.create_task(app_work())
        out = dict(await loop.ainvoke(payload, config))
        return out, await app

    return asyncio.run(both())


def alive(pid: int) -> bool:
    """Whether a process runs (a zombie has ended: only its exit status is left)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


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
    elif what == "foreign":
        pid_file = Path(sys.argv[3])
        tools, app_work = foreign_tools(pid_file, entry)
        name = tools[0].name
        loop = build(
            tools,
            [{"tool_name": name, "tool_kwargs": {"n": 1}}],
            # room for the app to start its process while the tool waits (it takes ms)
            {name: ToolPolicy(read_only=True, idempotent=True, timeout_s=2.0, retry=None)},
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
    checked: dict[str, bool] = {}
    if what == "foreign":
        out, held = run_beside(loop, entry, app_work)
        checked = {name: alive(pid) for name, pid in json.loads(pid_file.read_text()).items()}
        del held
    else:
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
                "alive_after_run": checked,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
