"""Two processes of the stock LangGraph API server on one PostgreSQL (+ Redis): one payment.

The server runs on `langgraph-runtime-pg` (its own virtualenv, built by
`.ci/langgraph-pg`, named by `AGENTLOOP_TEST_LANGGRAPH_PG_PYTHON`), each worker a
`uvicorn langgraph_api.server:app` on a loopback port, sharing a fresh database and a
Redis started for the test. Its checkpointer is an `AsyncPostgresSaver`, so the loop's
ledger is the `agentloop_ledger` table of the server's own database. The app is
`server_app.py`; payments are counted in a file.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest
from dev_server import free_port

pytestmark = pytest.mark.integration

APP = Path(__file__).with_name("server_app.py")
POSTGRES_DSN = os.environ.get("AGENTLOOP_TEST_POSTGRES_DSN", "")
RUNTIME_PYTHON = os.environ.get("AGENTLOOP_TEST_LANGGRAPH_PG_PYTHON", "")


def _missing() -> str:
    if not RUNTIME_PYTHON or not Path(RUNTIME_PYTHON).exists():
        return "AGENTLOOP_TEST_LANGGRAPH_PG_PYTHON is not set (.ci/run sets it: .ci/langgraph-pg)"
    if not POSTGRES_DSN:
        return "AGENTLOOP_TEST_POSTGRES_DSN is not set"
    if shutil.which("redis-server") is None:
        return "redis-server is not installed (.ci/langgraph-pg installs it)"
    return ""


@pytest.fixture
def database() -> Iterator[str]:
    """A fresh database on the test PostgreSQL (the server creates its schema on start)."""
    import psycopg

    reason = _missing()
    if reason:
        pytest.skip(reason)
    name = f"agentloop_lgpg_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(POSTGRES_DSN, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield urlunsplit(urlsplit(POSTGRES_DSN)._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(POSTGRES_DSN, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        process.wait(timeout=30)


class Workers:
    """Server processes on one database and one Redis, started one after another."""

    def __init__(self, app: Path, database: str, redis: str) -> None:
        self.app = app
        self.effects = app / "effects.txt"
        self.env = {
            **os.environ,
            "LANGGRAPH_RUNTIME_EDITION": "pg",
            "DATABASE_URI": database,
            "REDIS_URI": redis,
            "LANGSERVE_GRAPHS": json.dumps({"payments": f"{app / 'app.py'}:graph"}),
            "N_JOBS_PER_WORKER": "2",
            "LG_BG_JOB_HEARTBEAT": "2",
            "LANGSMITH_TRACING": "false",
            "LANGCHAIN_TRACING_V2": "false",
            "LANGGRAPH_NO_VERSION_CHECK": "true",
            "AGENTLOOP_TEST_EFFECTS": str(self.effects),
        }
        for name in ("AGENTLOOP_MODEL", "POSTGRES_URI"):
            self.env.pop(name, None)
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.urls: dict[str, str] = {}

    def start(self, name: str, **env: str) -> str:
        """Start a worker and wait for `/ok` (once more if it lost the schema-setup race)."""
        for attempt in range(2):
            port = free_port()
            log = (self.app / f"{name}-{attempt}.log").open("wb")
            process = subprocess.Popen(
                [RUNTIME_PYTHON, "-m", "uvicorn", "langgraph_api.server:app",
                 "--host", "127.0.0.1", "--port", str(port)],
                cwd=self.app, env={**self.env, **env}, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
            url = f"http://127.0.0.1:{port}"
            if self._ready(process, url):
                self.processes[name], self.urls[name] = process, url
                return url
        raise AssertionError(f"worker {name} did not start:\n{self.logs()[-3000:]}")

    def _ready(self, process: subprocess.Popen[bytes], url: str) -> bool:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if process.poll() is not None:
                return False
            try:
                if httpx.get(f"{url}/ok", timeout=2).status_code == 200:
                    return True
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        process.kill()
        process.wait()
        return False

    def end(self, name: str, sig: signal.Signals = signal.SIGTERM) -> None:
        process = self.processes.pop(name)
        process.send_signal(sig)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def end_all(self) -> None:
        for name in list(self.processes):
            self.end(name, signal.SIGKILL)

    def logs(self) -> str:
        return "\n".join(path.read_text(errors="replace") for path in self.app.glob("*.log"))

    def paid(self) -> list[str]:
        return self.effects.read_text().split() if self.effects.exists() else []


@pytest.fixture
def workers(tmp_path: Path, database: str, redis: str) -> Iterator[Workers]:
    app = tmp_path / "app"
    app.mkdir()
    shutil.copy(APP, app / "app.py")
    group = Workers(app, database, redis)
    try:
        yield group
    finally:
        group.end_all()


def payments(values: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in values["tool_logs"] if r["tool_name"] == "send_payment"]


async def test_a_run_paused_on_one_worker_is_resumed_and_replayed_on_another(
    workers: Workers,
) -> None:
    from langgraph_sdk import get_client

    first = get_client(url=workers.start("first"))
    thread = (await first.threads.create())["thread_id"]
    await first.runs.wait(thread, "payments", input={"user_input": "pay"},
                          interrupt_before=["execute"])  # fmt: skip
    paused = await first.threads.get_state(thread)
    assert paused["next"] == ["execute"]
    second = get_client(url=workers.start("second"))
    workers.end("first")  # the resume can only run on the second worker

    resumed = await second.runs.wait(thread, "payments", input=None)
    assert isinstance(resumed, dict)
    [payment] = payments(resumed)
    assert payment["success"] is True and not payment.get("replayed")
    replayed = await second.runs.wait(
        thread, "payments", input=None, checkpoint_id=paused["checkpoint"]["checkpoint_id"]
    )
    assert isinstance(replayed, dict)
    [payment] = payments(replayed)
    assert payment["success"] is True and payment["replayed"] is True
    assert workers.paid() == ["payment:5"]

    # the replayed thread reads back (its messages serialized), replays again, takes a turn
    state = await second.threads.get_state(thread)
    assert [m["type"] for m in state["values"]["messages"]] == ["human", "ai", "tool", "ai"]
    history = await second.threads.get_history(thread, limit=50)
    assert paused["checkpoint"]["checkpoint_id"] in {
        snapshot["checkpoint"]["checkpoint_id"] for snapshot in history
    }
    again = await second.runs.wait(
        thread, "payments", input=None, checkpoint_id=paused["checkpoint"]["checkpoint_id"]
    )
    assert isinstance(again, dict) and payments(again)[0]["replayed"] is True
    turn = await second.runs.wait(thread, "payments", input={"user_input": "pay again"})
    assert isinstance(turn, dict) and turn["status"] == "ok"
    assert workers.paid() == ["payment:5", "payment:5"]


async def test_a_worker_killed_after_its_effect_leaves_the_run_to_the_other(
    workers: Workers,
) -> None:
    from langgraph_sdk import get_client

    first = get_client(url=workers.start("first", AGENTLOOP_TEST_HOLD="1"))
    thread = (await first.threads.create())["thread_id"]
    run = await first.runs.create(thread, "payments", input={"user_input": "pay"})
    deadline = time.monotonic() + 120
    while not workers.paid():
        assert time.monotonic() < deadline, workers.logs()[-3000:]
        time.sleep(0.1)
    second = get_client(url=workers.start("second"))
    workers.end("first", signal.SIGKILL)

    await second.runs.join(thread, run["run_id"])  # swept up once the heartbeat expires
    values = (await second.threads.get_state(thread))["values"]
    [payment] = payments(values)
    assert workers.paid() == ["payment:5"]
    assert payment["success"] is False and payment["error_type"] == "unknown_outcome"
    assert values["answer"] == "payment handled"
