"""Kill a real process mid-round, resume it from its checkpoint in a new process.

Finished calls are not run again; a side-effecting call that started but did not report
back is `unknown_outcome`, never repeated; the ledger shows each side effect once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

WORKER = Path(__file__).with_name("crash_worker.py")
POSTGRES_DSN = os.environ.get("AGENTLOOP_TEST_POSTGRES_DSN", "")


def run_worker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(WORKER), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def postgres_available() -> str:
    if not POSTGRES_DSN:
        return "AGENTLOOP_TEST_POSTGRES_DSN is not set (.ci/run sets it after starting PostgreSQL)"
    try:
        import psycopg

        with psycopg.connect(POSTGRES_DSN, connect_timeout=5):
            return ""
    except Exception as error:  # the reason is shown in the skip message
        return f"PostgreSQL at AGENTLOOP_TEST_POSTGRES_DSN is not reachable: {error}"


def crash_then_resume(backend: str, target: str, tmp_path: Path, crash_at: str) -> Any:
    ledger = tmp_path / f"ledger-{crash_at}.txt"
    common = ["--backend", backend, "--target", target, "--thread", uuid.uuid4().hex]
    common += ["--ledger", str(ledger)]
    crashed = run_worker("start", *common, "--crash-at", crash_at)
    assert crashed.returncode == 137, crashed.stderr
    before = ledger.read_text().splitlines()
    resumed = run_worker("resume", *common)
    assert resumed.returncode == 0, resumed.stderr
    out = json.loads(resumed.stdout.strip().splitlines()[-1])
    return before, Counter(ledger.read_text().splitlines()), out


def check_payment_crash(before: list[str], ledger: Counter[str], out: Any) -> None:
    assert "payment:5" in before and "receipt:3" not in before
    assert ledger == Counter(
        {"order:A": 1, "status:1": 1, "flaky:2": 1, "payment:5": 1, "receipt:3": 1}
    )
    by_tool = {r["tool_name"]: r for r in out["records"]}
    assert by_tool["send_payment"]["error_type"] == "unknown_outcome"
    assert by_tool["send_payment"]["success"] is False
    for name in ("save_order", "get_status", "get_flaky", "get_receipt"):
        assert by_tool[name]["success"] is True, by_tool[name]
    assert [r["index"] for r in out["records"]] == [0, 1, 2, 3, 4]
    assert out["answer"] == "done"


def check_flaky_crash(before: list[str], ledger: Counter[str], out: Any) -> None:
    assert before == ["order:A", "status:1"]
    # the idempotent read that died is simply run again; nothing else repeats
    assert ledger == Counter(
        {"order:A": 1, "status:1": 1, "flaky:2": 1, "payment:5": 1, "receipt:3": 1}
    )
    assert all(r["success"] for r in out["records"]), out["records"]


@pytest.mark.parametrize("crash_at", ["payment", "flaky"])
def test_sqlite_crash_and_resume(tmp_path: Path, crash_at: str) -> None:
    before, ledger, out = crash_then_resume(
        "sqlite", str(tmp_path / "checkpoints.sqlite"), tmp_path, crash_at
    )
    (check_payment_crash if crash_at == "payment" else check_flaky_crash)(before, ledger, out)


@pytest.mark.parametrize("crash_at", ["payment", "flaky"])
def test_postgres_crash_and_resume(tmp_path: Path, crash_at: str) -> None:
    reason = postgres_available()
    if reason:
        if os.environ.get("CI") and os.environ.get("AGENTLOOP_REQUIRE_POSTGRES"):
            pytest.fail(reason)
        pytest.skip(reason)
    before, ledger, out = crash_then_resume("postgres", POSTGRES_DSN, tmp_path, crash_at)
    (check_payment_crash if crash_at == "payment" else check_flaky_crash)(before, ledger, out)


def test_postgres_many_threads_resumed_by_other_workers(tmp_path: Path) -> None:
    """Several threads crash in parallel workers; other workers finish each of them."""
    reason = postgres_available()
    if reason:
        pytest.skip(reason)
    threads = [uuid.uuid4().hex for _ in range(3)]

    def args(thread: str) -> list[str]:
        ledger = tmp_path / f"ledger-{thread}.txt"
        return ["--backend", "postgres", "--target", POSTGRES_DSN, "--thread", thread,
                "--ledger", str(ledger)]  # fmt: skip

    starts = [
        subprocess.Popen(
            [sys.executable, str(WORKER), "start", *args(t), "--crash-at", "payment"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for t in threads
    ]
    for process in starts:
        assert process.wait(timeout=300) == 137
    resumes = [
        subprocess.Popen(
            [sys.executable, str(WORKER), "resume", *args(t)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for t in reversed(threads)
    ]
    for process in resumes:
        stdout, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, stderr
        out = json.loads(stdout.strip().splitlines()[-1])
        by_tool = {r["tool_name"]: r for r in out["records"]}
        assert by_tool["send_payment"]["error_type"] == "unknown_outcome"
    for thread in threads:
        ledger = Counter((tmp_path / f"ledger-{thread}.txt").read_text().splitlines())
        assert ledger == Counter(
            {"order:A": 1, "status:1": 1, "flaky:2": 1, "payment:5": 1, "receipt:3": 1}
        )
