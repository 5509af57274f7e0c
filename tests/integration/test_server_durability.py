"""Exactly once under `langgraph dev`: the loop served from an app folder, restarted and killed.

The graph is compiled without a checkpointer (`server_app.py`), as users deploy it; the
server lends it its checkpointer, and the loop keeps its side-effect ledger in an SQLite
file beside the server's state (`.langgraph_api/agentloop_ledger.sqlite`), committed
before each payment. Driven with `langgraph-sdk`; payments are counted in a file across
server processes. The server writes its own state about every 10 s: a kill right after
a payment loses what it did since its last write, and its retry of the run starts from
older checkpoints.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dev_server import DevServer

pytestmark = pytest.mark.integration

APP = Path(__file__).with_name("server_app.py")
RETRY_LOG = "Retrying runs left running by a previous process"
RUNS_FILE = (".langgraph_ops.pckl",)
"""Where the server keeps its runs (and which of them are running)."""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[DevServer]:
    app = tmp_path / "app"
    app.mkdir()
    shutil.copy(APP, app / "app.py")
    config = {"dependencies": ["."], "graphs": {"payments": "./app.py:graph"}, "env": {}}
    (app / "langgraph.json").write_text(json.dumps(config))
    dev = DevServer(app, {"AGENTLOOP_TEST_EFFECTS": str(tmp_path / "effects.txt")})
    try:
        yield dev
    finally:
        dev.kill()
    assert "Traceback" not in dev.logs(), dev.logs()[-3000:]
    if not dev.ledger_warned:
        assert "side-effect ledger" not in dev.logs()  # no durability warning: the file lasts


def effects(server: DevServer) -> list[str]:
    path = Path(server.env["AGENTLOOP_TEST_EFFECTS"])
    return path.read_text().split() if path.exists() else []


def wait_for_effect(server: DevServer) -> None:
    deadline = time.monotonic() + 120
    while not effects(server):
        assert time.monotonic() < deadline, server.logs()[-3000:]
        time.sleep(0.1)


def wait_for_effects(server: DevServer, count: int) -> None:
    deadline = time.monotonic() + 120
    while len(effects(server)) < count:
        assert time.monotonic() < deadline, server.logs()[-3000:]
        time.sleep(0.05)


def payments(values: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in values["tool_logs"] if r["tool_name"] == "send_payment"]


async def test_a_run_killed_after_its_effect_is_retried_without_repeating_it(
    server: DevServer,
) -> None:
    from langgraph_sdk import get_client

    server.start(AGENTLOOP_TEST_HOLD="1")  # the payment holds its run once it is made
    client = get_client(url=server.url)
    thread = await client.threads.create()
    run = await client.runs.create(thread["thread_id"], "payments", input={"user_input": "pay"})
    wait_for_effect(server)
    server.wait_for_flush(time.time_ns())
    server.kill()

    server.start()  # the server retries the run by itself
    client = get_client(url=server.url)
    await client.runs.join(thread["thread_id"], run["run_id"])
    assert RETRY_LOG in server.logs()
    values = (await client.threads.get_state(thread["thread_id"]))["values"]
    [payment] = payments(values)
    assert effects(server) == ["payment:5"]
    assert payment["success"] is False and payment["error_type"] == "unknown_outcome"
    assert values["status"] == "ok" and values["answer"] == "payment handled"


async def test_a_kill_inside_the_write_interval_right_after_a_payment_does_not_repeat_it(
    server: DevServer, tmp_path: Path
) -> None:
    """The run is on disk as running, its payment's claim only in the ledger file."""
    from langgraph_sdk import get_client

    go = str(tmp_path / "go")
    server.start(AGENTLOOP_TEST_HOLD="1", AGENTLOOP_TEST_GO=go)
    client = get_client(url=server.url)
    thread = (await client.threads.create())["thread_id"]
    run = await client.runs.create(thread, "payments", input={"user_input": "pay"})
    server.wait_for_flush(time.time_ns(), RUNS_FILE)  # the run is running, not yet paying
    Path(go).touch()
    wait_for_effect(server)
    server.kill()  # well within the 10 s before the server's next write

    server.start(AGENTLOOP_TEST_GO=go)
    client = get_client(url=server.url)
    await client.runs.join(thread, run["run_id"])
    assert RETRY_LOG in server.logs()
    values = (await client.threads.get_state(thread))["values"]
    [payment] = payments(values)
    assert effects(server) == ["payment:5"]
    assert payment["success"] is False and payment["error_type"] == "unknown_outcome"
    assert values["status"] == "ok"


async def test_a_retry_whose_ledger_file_was_lost_warns_that_it_may_pay_again(
    server: DevServer, tmp_path: Path
) -> None:
    """Killed right after the payment, inside the write interval, and the ledger file lost.

    The server counts the retry as attempt 1 again (its count restarts with it); the run's
    checkpoints name the run that recorded itself in the ledger, which no longer holds it.
    """
    from langgraph_sdk import get_client

    go = str(tmp_path / "go")
    server.start(AGENTLOOP_TEST_HOLD="1", AGENTLOOP_TEST_GO=go)
    client = get_client(url=server.url)
    thread = (await client.threads.create())["thread_id"]
    run = await client.runs.create(
        thread,
        "payments",
        input={"user_input": "pay"},
        stream_mode=["values", "custom"],
        stream_resumable=True,  # the retry's events are kept for `join_stream`
    )
    server.wait_for_flush(time.time_ns(), RUNS_FILE)  # the run is running, not yet paying
    Path(go).touch()
    wait_for_effect(server)
    server.kill()
    for path in (server.app / ".langgraph_api").glob("agentloop_ledger.sqlite*"):
        path.unlink()

    server.ledger_warned = True
    server.start(AGENTLOOP_TEST_GO=go)
    client = get_client(url=server.url)
    events = [
        part.data
        async for part in client.runs.join_stream(
            thread, run["run_id"], stream_mode="custom", last_event_id="0"
        )
        if part.event == "custom"
    ]
    logs = re.sub(r"\x1b\[[0-9;]*m", "", server.logs())  # no colours
    assert RETRY_LOG in logs and "run_attempt=1" in logs.split(RETRY_LOG, 1)[1]
    [warning] = [event for event in events if event["type"] == "durability_warning"]
    assert f"run {run['run_id']} recorded itself in the side-effect ledger" in warning["message"]
    started = [e for e in events if e["type"] == "tool_started"]
    [paying] = [e for e in started if e["tool_name"] == "send_payment"]
    assert events.index(warning) < events.index(paying)  # said before the payment is made
    [logged] = [line for line in logs.splitlines() if "holds no such record" in line]
    assert "warning" in logged.lower() and run["run_id"] in logged
    assert effects(server) == ["payment:5", "payment:5"]  # what the warning said may happen


async def test_a_later_turn_retried_from_stale_checkpoints_does_not_repeat_its_payment(
    server: DevServer,
) -> None:
    """After a client read the thread's state, the server's checkpoint files lag behind."""
    from langgraph_sdk import get_client

    server.start(AGENTLOOP_TEST_HOLD="2")  # the second payment holds its run
    client = get_client(url=server.url)
    thread = (await client.threads.create())["thread_id"]
    first = await client.runs.wait(thread, "payments", input={"user_input": "pay"})
    assert isinstance(first, dict) and payments(first)[0]["success"] is True
    await client.threads.get_state(thread)  # as Studio does
    since = time.time_ns()
    run = await client.runs.create(thread, "payments", input={"user_input": "pay again"})
    wait_for_effects(server, 2)
    server.wait_for_flush(since, RUNS_FILE)  # the second run is on disk as running
    server.kill()

    server.start()
    client = get_client(url=server.url)
    await client.runs.join(thread, run["run_id"])
    assert RETRY_LOG in server.logs()
    values = (await client.threads.get_state(thread))["values"]
    [payment] = payments(values)
    assert effects(server) == ["payment:5", "payment:5"]
    assert payment["success"] is False and payment["error_type"] == "unknown_outcome"
    assert not payment.get("replayed")  # not the first turn's payment either


async def test_resume_and_replay_across_clean_restarts_pay_once(server: DevServer) -> None:
    from langgraph_sdk import get_client

    server.start()
    client = get_client(url=server.url)
    thread = (await client.threads.create())["thread_id"]
    await client.runs.wait(thread, "payments", input={"user_input": "pay"},
                           interrupt_before=["execute"])  # fmt: skip
    paused = await client.threads.get_state(thread)
    assert paused["next"] == ["execute"] and not effects(server)
    server.stop()

    server.start()  # resume after a restart
    client = get_client(url=server.url)
    resumed = await client.runs.wait(thread, "payments", input=None)
    assert isinstance(resumed, dict)
    [payment] = payments(resumed)
    assert payment["success"] is True and not payment.get("replayed"), payment
    assert effects(server) == ["payment:5"]
    server.stop()

    server.start()  # replay the paused checkpoint after a restart
    client = get_client(url=server.url)
    replayed = await client.runs.wait(
        thread, "payments", input=None, checkpoint_id=paused["checkpoint"]["checkpoint_id"]
    )
    assert isinstance(replayed, dict)
    [payment] = payments(replayed)
    assert payment["success"] is True and payment["replayed"] is True
    assert effects(server) == ["payment:5"]


async def test_a_replayed_thread_reads_replays_again_and_takes_a_new_turn(
    server: DevServer,
) -> None:
    """The server reads a thread back with its messages serialized (dicts), and a replay
    stores the transcript whole (a snapshot): every read after it folds those dicts."""
    from langgraph_sdk import get_client

    server.start()
    client = get_client(url=server.url)
    thread = (await client.threads.create())["thread_id"]
    await client.runs.wait(thread, "payments", input={"user_input": "pay"},
                           interrupt_before=["execute"])  # fmt: skip
    paused = (await client.threads.get_state(thread))["checkpoint"]["checkpoint_id"]
    await client.runs.wait(thread, "payments", input=None)
    for _ in range(2):  # replay the paused checkpoint, read the thread, and again
        replayed = await client.runs.wait(thread, "payments", input=None, checkpoint_id=paused)
        assert isinstance(replayed, dict)
        [payment] = payments(replayed)
        assert payment["success"] is True and payment["replayed"] is True
        state = await client.threads.get_state(thread)
        assert state["values"]["status"] == "ok"
        kinds = [message["type"] for message in state["values"]["messages"]]
        assert kinds == ["human", "ai", "tool", "ai"]
        history = await client.threads.get_history(thread, limit=50)
        assert paused in {snapshot["checkpoint"]["checkpoint_id"] for snapshot in history}
    assert effects(server) == ["payment:5"]

    turn = await client.runs.wait(thread, "payments", input={"user_input": "pay again"})
    assert isinstance(turn, dict) and turn["status"] == "ok"
    assert effects(server) == ["payment:5", "payment:5"]
    values = (await client.threads.get_state(thread))["values"]
    requests = [m["content"] for m in values["messages"] if m["type"] == "human"]
    assert requests == ["pay", "pay again"]


async def test_a_run_interrupted_by_the_next_one_leaves_its_payment_unknown(
    server: DevServer,
) -> None:
    """`multitask_strategy="interrupt"`: the server cancels the running run first."""
    from langgraph_sdk import get_client

    server.start(AGENTLOOP_TEST_HOLD="1")
    client = get_client(url=server.url)
    thread = (await client.threads.create())["thread_id"]
    await client.runs.create(thread, "payments", input={"user_input": "pay"})
    wait_for_effect(server)
    final = await client.runs.wait(thread, "payments", input=None,
                                   multitask_strategy="interrupt")  # fmt: skip
    assert isinstance(final, dict)
    [payment] = payments(final)
    assert effects(server) == ["payment:5"]
    assert payment["success"] is False and payment["error_type"] == "unknown_outcome"


async def test_a_run_cancelled_during_its_payment_says_so_in_its_state(
    server: DevServer,
) -> None:
    """`runs.cancel` while the payment runs: the state says how the run ended."""
    from langgraph_sdk import get_client

    server.start(AGENTLOOP_TEST_HOLD="1")
    client = get_client(url=server.url)
    thread = (await client.threads.create())["thread_id"]
    run = await client.runs.create(thread, "payments", input={"user_input": "pay"})
    wait_for_effect(server)
    await client.runs.cancel(thread, run["run_id"], wait=True)
    assert (await client.runs.get(thread, run["run_id"]))["status"] == "interrupted"
    values = (await client.threads.get_state(thread))["values"]
    assert values["status"] == "cancelled"
    assert values["status_reason"] == "the run was cancelled while send_payment ran"
    [record] = values["call_results"].values()
    assert record["error_type"] == "unknown_outcome" and record["tool_name"] == "send_payment"

    resumed = await client.runs.wait(thread, "payments", input=None)
    assert isinstance(resumed, dict) and resumed["status"] == "ok"
    [payment] = payments(resumed)
    assert payment["error_type"] == "unknown_outcome" and effects(server) == ["payment:5"]


def ledger_threads(server: DevServer) -> set[str]:
    """The threads the ledger file holds entries of."""
    with sqlite3.connect(server.app / ".langgraph_api" / "agentloop_ledger.sqlite") as conn:
        rows = conn.execute("SELECT DISTINCT thread_id FROM agentloop_ledger").fetchall()
    return {str(thread_id) for (thread_id,) in rows}


async def test_a_deleted_threads_ledger_rows_go_with_it(server: DevServer) -> None:
    """`threads.delete` drops the checkpoints; the next run's start sweeps the ledger."""
    from langgraph_sdk import get_client

    server.start(AGENTLOOP_TEST_SWEEP="1")  # nothing kept of a deleted thread, always due
    client = get_client(url=server.url)
    deleted, kept = [(await client.threads.create())["thread_id"] for _ in range(2)]
    for thread in (deleted, kept):
        await client.runs.wait(thread, "payments", input={"user_input": "pay"})
    assert ledger_threads(server) == {deleted, kept}
    await client.threads.delete(deleted)
    await client.runs.wait(kept, "payments", input={"user_input": "pay again"})
    assert ledger_threads(server) == {kept}
    assert effects(server) == ["payment:5"] * 3


@pytest.mark.parametrize("given_in", ["input", "config"])
async def test_the_same_key_submitted_twice_at_once_pays_once(
    server: DevServer, given_in: str
) -> None:
    """Two threads, one request with one idempotency key, submitted together: one payment."""
    from langgraph_sdk import get_client

    server.start(AGENTLOOP_TEST_PAY_SECONDS="1")
    client = get_client(url=server.url)
    threads = [(await client.threads.create())["thread_id"] for _ in range(2)]
    key = {"idempotency_key": "order-17"}
    request = {"user_input": "pay", **(key if given_in == "input" else {})}
    config = {"configurable": key} if given_in == "config" else None
    outs = await asyncio.gather(
        *(client.runs.wait(thread, "payments", input=request, config=config) for thread in threads)
    )
    assert effects(server) == ["payment:5"]
    records = [record for out in outs for record in payments(out)]
    assert len(records) == 2
    [ran] = [r for r in records if not r.get("replayed")]
    [other] = [r for r in records if r.get("replayed")]
    assert ran["success"] and other["success"] and other["result"] == ran["result"]

    later = await client.runs.wait(threads[0], "payments", input={"user_input": "pay"})
    assert isinstance(later, dict)  # without a key, the next turn is a new request
    assert effects(server) == ["payment:5", "payment:5"]


async def test_the_same_key_resubmitted_after_a_kill_pays_once(
    server: DevServer, tmp_path: Path
) -> None:
    """A client that lost its answer to a crash submits again with the key, on a new thread."""
    from langgraph_sdk import get_client

    go = str(tmp_path / "go")
    server.start(AGENTLOOP_TEST_HOLD="1", AGENTLOOP_TEST_GO=go)
    client = get_client(url=server.url)
    request = {"user_input": "pay", "idempotency_key": "order-18"}
    thread = (await client.threads.create())["thread_id"]
    run = await client.runs.create(thread, "payments", input=request)
    server.wait_for_flush(time.time_ns(), RUNS_FILE)
    Path(go).touch()
    wait_for_effect(server)
    server.kill()  # within the server's write interval

    server.start(AGENTLOOP_TEST_GO=go)
    client = get_client(url=server.url)
    again = await client.runs.wait((await client.threads.create())["thread_id"], "payments",
                                   input=request)  # fmt: skip
    await client.runs.join(thread, run["run_id"])  # the server's own retry
    retried = (await client.threads.get_state(thread))["values"]
    assert isinstance(again, dict)
    assert effects(server) == ["payment:5"]
    for values in (again, retried):
        [payment] = payments(values)
        assert payment["success"] is False and payment["error_type"] == "unknown_outcome"
