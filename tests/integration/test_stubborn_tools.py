"""An async tool that ignores its cancellation never hangs its run (in a subprocess with a
watchdog, so a hang fails the test instead of the test run)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

WORKER = Path(__file__).with_name("stubborn_tool_worker.py")
WATCHDOG_S = 120


@pytest.mark.parametrize("entry", ["invoke", "ainvoke"])
def test_a_tool_that_ignores_cancellation_is_abandoned(entry: str) -> None:
    try:
        done = subprocess.run(
            [sys.executable, str(WORKER), entry],
            capture_output=True,
            text=True,
            timeout=WATCHDOG_S,
            check=False,
        )
    except subprocess.TimeoutExpired as error:
        pytest.fail(f"the run hung on a tool that ignores cancellation: {error.stderr!r}")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["answer"] == "the run went on"
    report, order, second_report = out["records"]
    assert report["tool_name"] == "get_report" and report["error_type"] == "timeout"
    assert "ignored its cancellation" in report["error"]
    # a call with side effects that could not be stopped may still take effect
    assert order["error_type"] == "unknown_outcome"
    assert "must not be repeated blindly" in order["error"]
    abandoned = {event["tool_name"] for event in out["abandoned"]}
    assert abandoned == {"get_report", "send_order"}
    # the abandoned tasks run on: the tool is at its cap (1 here) until its task ends
    assert second_report["error_type"] == "tool_unavailable"
    # the order did take effect, later: the ledger holds its late outcome
    assert "order:book" in out["effects"]
    assert out["late"]["success"] and out["late"]["result"] == "order:book done"


CLEANUP_WORKER = Path(__file__).with_name("timeout_cleanup_worker.py")


@pytest.mark.parametrize("entry", ["invoke", "ainvoke"])
def test_a_host_whose_tools_never_stop_still_exits(entry: str) -> None:
    try:  # its tools never stop: a host that waited for them would never exit
        done = subprocess.run(
            [sys.executable, str(CLEANUP_WORKER), "stubborn", entry],
            capture_output=True,
            text=True,
            timeout=WATCHDOG_S,
            check=False,
        )
    except subprocess.TimeoutExpired as error:
        pytest.fail(f"the host never exited (asyncio.run() waited on a tool): {error.stdout!r}")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Exception ignored" not in done.stderr  # the dropped tasks close quietly
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["answer"] == "the run went on"
    payment, feed = out["records"]
    # the write may still take effect; the read is a plain timeout; both say what happened
    assert payment["tool_name"] == "send_payment" and payment["error_type"] == "unknown_outcome"
    assert feed["tool_name"] == "get_feed" and feed["error_type"] == "timeout"
    for record in (payment, feed):
        assert "ignored its cancellation" in record["error"]
        assert "detached from its event loop" in record["error"]
