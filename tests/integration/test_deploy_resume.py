"""A deploy between a crash and its resume never repeats an effect, and the thread finishes.

v1 of an app (`deploy_worker.py`) sends an invoice and is SIGKILLed right after it went
out; v2 resumes the thread in a fresh process with the same checkpointer (and so the
same side-effect ledger), its code changed: the argument renamed (kept as an alias),
the tool renamed, the tool declared read-only, or the tool removed. On a real SQLite file
and on PostgreSQL, through invoke and ainvoke: the invoice is sent once, the call's
record says `unknown_outcome` (its outcome was never recorded), `replayed` (v1 recorded
it before the crash) or, for a tool removed before its call started, names the missing
tool; and the run answers.

The default run takes SQLite under invoke and PostgreSQL under ainvoke for every kind of
change (and each replay once); `pytest -m crash_matrix` adds the other pairs.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from postgres import postgres_dsn
from warm_python import warm_process

pytestmark = pytest.mark.integration

WORKER = Path(__file__).with_name("deploy_worker.py")
CHANGES = ("renamed_argument", "renamed_tool", "read_only", "removed")
GONE = "send_invoice is no longer one of the loop's tools"
ONCE = Counter({"read:acme": 1, "invoice:INV-7": 1})
SAVERS = (
    "langgraph.checkpoint.sqlite",
    "langgraph.checkpoint.sqlite.aio",
    "langgraph.checkpoint.postgres",
    "langgraph.checkpoint.postgres.aio",
    "psycopg.rows",
    "psycopg_pool",
)
"""What a worker imports besides its top level (its checkpointer), kept warm once."""


@pytest.fixture(scope="module")
def warm() -> Iterator[list[str]]:
    """`deploy_worker.py` kept warm: each v1 or v2 process is forked from there instead of
    importing LangGraph again (it still runs, and is killed, in a process of its own)."""
    with warm_process(WORKER, SAVERS) as launch:
        yield launch


class Thread:
    """One thread of the app, run by a v1 process and resumed by a new version's."""

    def __init__(
        self, backend: str, entry: str, tmp_path: Path, *options: str, warm: list[str]
    ) -> None:
        self.launch = warm
        target = str(tmp_path / "checkpoints.sqlite") if backend == "sqlite" else postgres_dsn()
        self.effects_file = tmp_path / f"effects-{uuid.uuid4().hex[:8]}.txt"
        self.args = [
            "--backend", backend, "--target", target, "--thread", uuid.uuid4().hex,
            "--effects", str(self.effects_file), "--entry", entry, *options,
        ]  # fmt: skip

    def run(self, action: str, *extra: str) -> subprocess.CompletedProcess[str]:
        command = [*self.launch, action, *self.args, *extra]
        return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)

    def crash(self, crash_at: str) -> None:
        """Run v1 until it is SIGKILLed at `crash_at`."""
        killed = self.run("start", "--crash-at", crash_at)
        assert killed.returncode == -9, (killed.returncode, killed.stderr[-3000:])

    def resume(self, version: str) -> dict[str, Any]:
        """Resume the thread with the code of `version`; its final records and answer."""
        resumed = self.run("resume", "--version", version)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        out: dict[str, Any] = json.loads(resumed.stdout.strip().splitlines()[-1])
        return out

    def effects(self) -> Counter[str]:
        return Counter(self.effects_file.read_text().splitlines())


def invoice_record(out: dict[str, Any]) -> dict[str, Any]:
    """The record of the invoice call (v1's name, as planned), after checking the run ended."""
    assert out["answer"] == "done", out
    customer, invoice = out["records"]
    assert customer["tool_name"] == "get_customer" and customer["success"], customer
    assert invoice["tool_name"] == "send_invoice" and invoice["index"] == 1, invoice
    return dict(invoice)


def pairs() -> list[Any]:
    cases = []
    for backend, entry in (
        ("sqlite", "invoke"),
        ("postgres", "ainvoke"),
        ("sqlite", "ainvoke"),
        ("postgres", "invoke"),
    ):
        for change in CHANGES:
            default = (backend, entry) in (("sqlite", "invoke"), ("postgres", "ainvoke"))
            marks = () if default else (pytest.mark.crash_matrix,)
            cases.append(
                pytest.param(backend, entry, change, marks=marks, id=f"{backend}-{entry}-{change}")
            )
    return cases


@pytest.mark.parametrize(("backend", "entry", "change"), pairs())
def test_a_deploy_after_a_crash_never_repeats_the_effect(
    tmp_path: Path, warm: list[str], backend: str, entry: str, change: str
) -> None:
    """SIGKILL right after the effect, LangGraph's default durability, then new code."""
    thread = Thread(backend, entry, tmp_path, warm=warm)
    thread.crash("effect")
    assert thread.effects() == ONCE
    out = thread.resume(change)
    assert thread.effects() == ONCE
    invoice = invoice_record(out)
    assert invoice["success"] is False and invoice["error_type"] == "unknown_outcome", invoice
    assert "never runs twice" in invoice["error"] or GONE in invoice["error"], invoice
    if change in ("renamed_tool", "removed"):
        assert GONE in invoice["error"], invoice


def replays() -> list[Any]:
    """Each change once in the default run (invoke and ainvoke alternately), the rest marked."""
    first = {"renamed_argument": "ainvoke", "renamed_tool": "invoke", "read_only": "invoke"}
    cases = []
    for change in CHANGES:
        for entry in ("invoke", "ainvoke"):
            default = first.get(change, "ainvoke") == entry
            marks = () if default else (pytest.mark.crash_matrix,)
            cases.append(pytest.param(change, entry, marks=marks, id=f"{entry}-{change}"))
    return cases


@pytest.mark.parametrize(("change", "entry"), replays())
def test_an_outcome_recorded_before_the_crash_is_replayed_by_new_code(
    tmp_path: Path, warm: list[str], change: str, entry: str
) -> None:
    """Killed in the answer under durability="exit": nothing saved, the request comes again.

    The new code plans the round again and finds each call's recorded outcome in the
    ledger by its place in the plan, whatever it now calls the tool or its argument.
    """
    thread = Thread("sqlite", entry, tmp_path, "--durability", "exit", warm=warm)
    thread.crash("answer")
    out = thread.resume(change)
    assert thread.effects() == ONCE
    invoice = invoice_record(out)
    assert invoice["replayed"] is True and invoice["success"] is True, invoice
    assert invoice["result"] == "invoice INV-7 sent"


@pytest.mark.parametrize("entry", ["invoke", "ainvoke"])
def test_a_call_the_new_code_refuses_takes_the_ledgers_word(
    tmp_path: Path, warm: list[str], entry: str
) -> None:
    """Planned again by code without the tool: `unknown_outcome` naming it, not `tool_not_found`."""
    thread = Thread("sqlite", entry, tmp_path, "--durability", "exit", warm=warm)
    thread.crash("effect")
    out = thread.resume("renamed_tool")
    assert thread.effects() == ONCE
    invoice = invoice_record(out)
    assert invoice["error_type"] == "unknown_outcome" and GONE in invoice["error"], invoice


@pytest.mark.parametrize(
    ("backend", "entry"), [("sqlite", "ainvoke"), ("postgres", "invoke")], ids="-".join
)
def test_a_removed_tools_call_that_never_started_fails_naming_it(
    tmp_path: Path, warm: list[str], backend: str, entry: str
) -> None:
    """Killed in the read, before the invoice: the new code has no invoice tool."""
    thread = Thread(backend, entry, tmp_path, warm=warm)
    thread.crash("read")
    out = thread.resume("removed")
    assert thread.effects() == Counter({"read:acme": 1})
    invoice = invoice_record(out)
    assert invoice["success"] is False and invoice["error_type"] == "tool_not_found", invoice
    assert "send_invoice" in invoice["error"], invoice
