"""Kill real processes mid-run and resume them in new ones, on SQLite and PostgreSQL.

Under every durability mode (LangGraph's default, and "async", "sync" and "exit" given
explicitly), through invoke, ainvoke, stream and astream, at the loop's top level, as a
node of a parent graph and as a sub-agent, and inside a read that streaming dispatch
started while its plan was streaming: a finished call is never run again, a call with
side effects cut off by the crash is `unknown_outcome` and never repeated, every
command has one record, and every resumed run finishes. Under "exit" nothing was saved,
so the request is sent again: the side-effect ledger still decides.

The default run takes a subset of the matrix; `pytest -m crash_matrix` runs all of it
(`.ci/run` does both).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from warm_python import warm_process

pytestmark = pytest.mark.integration

WORKER = Path(__file__).with_name("crash_worker.py")
SAVERS = (
    "langgraph.checkpoint.sqlite",
    "langgraph.checkpoint.sqlite.aio",
    "langgraph.checkpoint.postgres",
    "langgraph.checkpoint.postgres.aio",
)
"""What a worker imports besides its top level (its checkpointer), kept warm once."""
POSTGRES_DSN = os.environ.get("AGENTLOOP_TEST_POSTGRES_DSN", "")
ENTRIES = {
    "sqlite": ("invoke", "stream"),
    "asqlite": ("ainvoke", "astream"),
    "postgres": ("invoke", "stream"),
    "apostgres": ("ainvoke", "astream"),
}
CRASH_POINTS = ("early", "effect", "sibling", "planner", "answer")
DURABILITIES = ("default", "async", "sync", "exit")
EARLY_ROUNDS = 2
"""A crash in an early call comes in the last round, after the first round's effects."""


def effects_of(rounds: int) -> Counter[str]:
    """Every effect and read of `rounds` rounds, once each."""
    effects: Counter[str] = Counter()
    for n in range(rounds):
        effects.update([f"order:A{n}", f"status:{1 + 10 * n}", f"payment:{5 + 10 * n}"])
        effects.update([f"receipt:{1 + 10 * n}"])
    return effects


ONE_ROUND = effects_of(1)


def postgres_reason() -> str:
    if not POSTGRES_DSN:
        return "AGENTLOOP_TEST_POSTGRES_DSN is not set (.ci/run sets it after starting PostgreSQL)"
    try:
        import psycopg

        with psycopg.connect(POSTGRES_DSN, connect_timeout=5):
            return ""
    except Exception as error:  # the reason is shown in the skip message
        return f"PostgreSQL at AGENTLOOP_TEST_POSTGRES_DSN is not reachable: {error}"


def target_of(backend: str, tmp_path: Path) -> str:
    if backend in ("sqlite", "asqlite"):
        return str(tmp_path / "checkpoints.sqlite")
    reason = postgres_reason()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return POSTGRES_DSN


@pytest.fixture(scope="module")
def warm() -> Iterator[list[str]]:
    """`crash_worker.py` kept warm: a run that ends by itself (done, or crashed from
    inside) need not import LangGraph again. A run killed from outside starts cold (its
    own process, the one the test kills)."""
    with warm_process(WORKER, SAVERS) as launch:
        yield launch


class Worker:
    """One thread of a loop, run by worker processes."""

    def __init__(
        self, backend: str, tmp_path: Path, *options: str, warm: list[str] | None = None
    ) -> None:
        self.backend = backend
        self.launch = warm or [sys.executable, str(WORKER)]
        self.ledger = tmp_path / f"ledger-{uuid.uuid4().hex[:8]}.txt"
        self.args = [
            "--backend", backend, "--target", target_of(backend, tmp_path),
            "--thread", uuid.uuid4().hex, "--ledger", str(self.ledger), *options,
        ]  # fmt: skip

    def command(self, action: str, *extra: str) -> list[str]:
        """A worker's own process (to kill from outside, or to run beside another)."""
        return [sys.executable, str(WORKER), action, *self.args, *extra]

    def run(self, action: str, *extra: str) -> subprocess.CompletedProcess[str]:
        """Run a worker until it ends (warm, where the test has one)."""
        return subprocess.run(
            [*self.launch, action, *self.args, *extra],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip

    def start_crashing(self, crash_at: str) -> None:
        crashed = self.run("start", "--crash-at", crash_at)
        assert crashed.returncode == 137, (crashed.stdout[-500:], crashed.stderr[-3000:])
        if crash_at == "early":  # the read had started while its plan was streaming
            assert "EARLY_CALL_IN plan" in crashed.stdout.splitlines(), crashed.stdout

    def resume(self, *extra: str) -> dict[str, Any]:
        resumed = self.run("resume", *extra)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        result: dict[str, Any] = json.loads(resumed.stdout.strip().splitlines()[-1])
        return result

    def effects(self) -> Counter[str]:
        if not self.ledger.exists():
            return Counter()
        return Counter(self.ledger.read_text().splitlines())


def check_resumed(
    crash_at: str, topology: str, worker: Worker, out: dict[str, Any], rounds: int = 1
) -> None:
    assert worker.effects() == effects_of(rounds), (crash_at, worker.effects())
    expected_answer = "coordinated" if topology == "subagent" else "done"
    assert out["answer"] == expected_answer
    if topology != "top":
        return
    by_tool = {record["tool_name"]: record for record in out["records"]}
    assert [record["index"] for record in out["records"]] == [0, 1, 2, 3] * rounds
    payment = by_tool.pop("send_payment")
    if crash_at == "effect":
        assert payment["success"] is False
        assert payment["error_type"] == "unknown_outcome"
    else:
        assert payment["success"] is True, payment
    for name, record in by_tool.items():
        assert record["success"] is True, (name, record)


def in_matrix(backend: str, entry: str, durability: str, crash_at: str) -> bool:
    """Whether a case runs only with `-m crash_matrix` (the default run takes a subset).

    The default run: the first entry of each backend, its default durability, crashing
    after an effect or in the planner, plus the early read on SQLite.
    """
    first = entry == ENTRIES[backend][0]
    if first and durability == "default" and crash_at in ("effect", "planner"):
        return False
    return not (
        first
        and durability == "default"
        and crash_at == "early"
        and backend in ("sqlite", "asqlite")
    )


def crash_points(backend: str, entry: str, durability: str) -> tuple[str, ...]:
    """Where a case crashes, by durability.

    Every crash point under LangGraph's default durability and "sync", through every
    entry; the crash inside the early read and right after an effect under "exit"
    through every entry, and under "async" (what the default is) through the first.
    """
    if durability in ("default", "sync"):
        return CRASH_POINTS
    if durability == "exit" or entry == ENTRIES[backend][0]:
        return ("early", "effect")
    return ()


def matrix() -> list[Any]:
    """The cases of the crash matrix; the ones outside the default subset carry its mark."""
    cases = []
    for backend, entries in ENTRIES.items():
        for entry in entries:
            for durability in DURABILITIES:
                for crash_at in crash_points(backend, entry, durability):
                    marks = (
                        (pytest.mark.crash_matrix,)
                        if in_matrix(backend, entry, durability, crash_at)
                        else ()
                    )
                    cases.append(
                        pytest.param(
                            backend, entry, durability, crash_at, marks=marks,
                            id=f"{backend}-{entry}-{durability}-{crash_at}",
                        )
                    )  # fmt: skip
    return cases


@pytest.mark.parametrize(("backend", "entry", "durability", "crash_at"), matrix())
def test_crash_and_resume(
    tmp_path: Path, warm: list[str], backend: str, entry: str, durability: str, crash_at: str
) -> None:
    rounds = EARLY_ROUNDS if crash_at == "early" else 1
    options = ("--entry", entry, "--durability", durability, "--rounds", str(rounds))
    worker = Worker(backend, tmp_path, *options, warm=warm)
    worker.start_crashing(crash_at)
    out = worker.resume()
    check_resumed(crash_at, "top", worker, out, rounds)


def topologies() -> list[Any]:
    cases = []
    for backend in ENTRIES:
        for topology in ("subgraph", "subagent"):
            for crash_at in ("effect", "planner"):
                default = backend in ("sqlite", "asqlite") and crash_at == "effect"
                marks = () if default else (pytest.mark.crash_matrix,)
                cases.append(
                    pytest.param(
                        backend, topology, crash_at, marks=marks,
                        id=f"{backend}-{topology}-{crash_at}",
                    )
                )  # fmt: skip
    return cases


@pytest.mark.parametrize(("backend", "topology", "crash_at"), topologies())
def test_crash_inside_a_subgraph_or_sub_agent(
    tmp_path: Path, warm: list[str], backend: str, topology: str, crash_at: str
) -> None:
    worker = Worker(backend, tmp_path, "--topology", topology, warm=warm)
    worker.start_crashing(crash_at)
    out = worker.resume()
    check_resumed(crash_at, topology, worker, out)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_two_workers_resume_one_paused_thread_at_once(
    tmp_path: Path, warm: list[str], backend: str
) -> None:
    """An approval delivered twice: both workers resume the thread in the same instant."""
    worker = Worker(backend, tmp_path, "--interrupt", warm=warm)
    paused = worker.run("start")
    assert paused.returncode == 0, paused.stderr[-3000:]
    assert worker.effects() == Counter()
    barrier = f"{time.time() + 3.0:.3f}"
    processes = [
        subprocess.Popen(
            worker.command("resume", "--barrier", barrier),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [process.communicate(timeout=300) for process in processes]
    finished = [
        json.loads(stdout.strip().splitlines()[-1])
        for (stdout, _), process in zip(outputs, processes, strict=True)
        if process.returncode == 0
    ]
    assert finished, [stderr[-2000:] for _, stderr in outputs]
    assert any(out["answer"] == "done" for out in finished)
    effects = worker.effects()
    assert effects["payment:5"] == 1 and effects["order:A0"] == 1, effects
    for out in finished:
        payments = [r for r in out["records"] if r["tool_name"] == "send_payment"]
        assert all(r["success"] for r in payments), payments


def start_announced(worker: Worker) -> subprocess.Popen[str]:
    """Start a three-round run; return once the worker is about to start it."""
    process = subprocess.Popen(
        worker.command("start", "--rounds", "3", "--announce"),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "READY"
    return process


def run_length_s(backend: str, tmp_path: Path) -> float:
    """How long the three rounds of a run take on this machine (until the last effect)."""
    worker = Worker(backend, tmp_path)
    process = start_announced(worker)
    started, last = time.monotonic(), 0.0
    while process.poll() is None:
        if sum(worker.effects().values()) >= 12:
            last = time.monotonic() - started
            break
        time.sleep(0.002)
    process.wait(timeout=60)
    return last or time.monotonic() - started


def kill_at_random(worker: Worker, delay_s: float) -> None:
    """Start a three-round run and SIGKILL it from outside `delay_s` after it starts."""
    process = start_announced(worker)
    time.sleep(delay_s)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)


def effect_of(record: dict[str, Any]) -> str:
    if record["tool_name"] == "save_order":
        return f"order:{record['kwargs']['item']}"
    return f"payment:{record['kwargs']['amount']}"


@pytest.mark.parametrize(
    ("backend", "kills"),
    [
        # a few kills in the default run (each starts and kills a worker, then resumes in
        # another); the matrix step of .ci/run kills 30 times, with the same seed
        ("sqlite", 3),
        ("postgres", 3),
        # 30 kills start and kill about 60 worker processes: far more than the default limit
        pytest.param("sqlite", 30, marks=[pytest.mark.crash_matrix, pytest.mark.timeout(1800)]),
        pytest.param("postgres", 30, marks=[pytest.mark.crash_matrix, pytest.mark.timeout(1800)]),
    ],
)
def test_random_kills_never_duplicate_an_effect(
    tmp_path: Path, warm: list[str], backend: str, kills: int
) -> None:
    """SIGKILL from outside at random moments: no effect twice, no finished call lost."""
    rng = random.Random(11)
    # kills land anywhere in a run: the shorter of two runs (one may pay first-run costs,
    # or share the machine with a busy moment), and shorter still while kills land after
    # the run ended (a run of a few tenths of a second moves with the machine's load)
    window_s = 1.2 * min(run_length_s(backend, tmp_path) for _ in range(2))
    mid_run = attempts = 0
    while mid_run < kills and attempts < 4 * kills:
        attempts += 1
        worker = Worker(backend, tmp_path, warm=warm)
        kill_at_random(worker, rng.uniform(0.0, window_s))
        before = worker.effects()
        done = sum(before.values())
        mid_run += int(0 < done < 12)
        if done >= 12:
            window_s *= 0.8
        out = worker.resume("--rounds", "3")
        effects = worker.effects()
        for entry, count in effects.items():
            if entry.startswith(("order:", "payment:")):
                assert count == 1, (attempts, effects)
        if out["answer"] is None:  # killed before its first checkpoint: nothing to resume
            assert not out["records"], out
            continue
        assert out["answer"] == "done", out
        unsafe = [r for r in out["records"] if r["tool_name"] in ("save_order", "send_payment")]
        assert len(unsafe) == 6, out["records"]
        for record in unsafe:
            if record["success"]:
                assert effects[effect_of(record)] == 1, (attempts, record, effects)
            else:
                assert record["error_type"] == "unknown_outcome", record
    assert mid_run == kills, f"only {mid_run} of {attempts} kills landed mid-run"
