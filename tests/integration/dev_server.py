"""`langgraph dev` as a real subprocess on a loopback port, started from an app folder.

The in-memory server writes its threads, runs, checkpoints and store to
`<app>/.langgraph_api/*.pckl` about every 10 s (a store nothing wrote to is not
written); `wait_for_flush` waits until every one of
those files was written after a given moment, so a test kills the server only once what
it needs is on disk.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

STATE_FILES = (
    ".langgraph_ops.pckl",
    ".langgraph_checkpoint.1.pckl",
    ".langgraph_checkpoint.2.pckl",
    ".langgraph_checkpoint.3.pckl",
)
"""What a restart needs from the server: the runs and threads, the checkpoints (the loop's
ledger is a file of its own, `agentloop_ledger.sqlite`, written as calls go)."""
FLUSH_TIMEOUT_S = 60.0
"""How long `wait_for_flush` waits (the server writes every 10 s; the machine is shared)."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class DevServer:
    """One `langgraph dev` process at a time, on one app folder (restarted on the same port)."""

    def __init__(self, app: Path, env: dict[str, str]) -> None:
        langgraph = shutil.which("langgraph", path=str(Path(sys.executable).parent))
        assert langgraph, "langgraph-cli is a dev dependency"
        self.command = [
            langgraph, "dev", "--port", str(free_port()), "--host", "127.0.0.1",
            "--no-browser", "--no-reload",
        ]  # fmt: skip
        self.url = f"http://127.0.0.1:{self.command[3]}"
        self.app = app
        self.env = {
            **os.environ,
            "LANGSMITH_TRACING": "false",
            "LANGCHAIN_TRACING_V2": "false",
            "LANGGRAPH_NO_VERSION_CHECK": "true",
            **env,
        }
        for name in ("AGENTLOOP_MODEL", "POSTGRES_URI", "DATABASE_URI"):
            self.env.pop(name, None)
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.ledger_warned = False
        """Whether the test expects the loop's durability warning in the server's log."""

    @property
    def log(self) -> Path:
        return self.app / f"server-{self.starts}.log"

    def logs(self) -> str:
        return "\n".join(
            (self.app / f"server-{n}.log").read_text(errors="replace")
            for n in range(1, self.starts + 1)
        )

    def start(self, **env: str) -> None:
        assert self.process is None, "one server at a time"
        self.starts += 1
        with self.log.open("wb") as output:
            self.process = subprocess.Popen(
                self.command,
                cwd=self.app,
                stdout=output,
                stderr=subprocess.STDOUT,
                env={**self.env, **env},
                start_new_session=True,
            )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"langgraph dev exited early:\n{self.logs()[-3000:]}")
            try:
                if httpx.get(f"{self.url}/ok", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise AssertionError(f"langgraph dev did not start in time:\n{self.logs()[-3000:]}")

    def stop(self) -> None:
        """Stop cleanly (SIGTERM): the server writes its state on the way out."""
        self._end(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL the server: whatever it did not write yet is lost."""
        self._end(signal.SIGKILL)

    def _end(self, sig: signal.Signals) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        os.killpg(process.pid, sig)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def wait_for_flush(self, since_ns: int, files: tuple[str, ...] = STATE_FILES) -> None:
        """Wait until every state file of the server (or each of `files`) was written after
        `since_ns`."""
        folder = self.app / ".langgraph_api"
        deadline = time.monotonic() + FLUSH_TIMEOUT_S
        while time.monotonic() < deadline:
            found = {path.name: path for path in folder.glob("*.pckl") if path.name in files}
            ready = set(files) <= set(found)
            if ready and all(_mtime_ns(path) > since_ns for path in found.values()):
                return
            time.sleep(0.2)
        raise AssertionError(f"the server did not write {files} in {FLUSH_TIMEOUT_S} s")


def _mtime_ns(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except FileNotFoundError:  # being replaced
        return 0
