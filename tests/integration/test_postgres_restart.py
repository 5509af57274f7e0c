"""A PostgreSQL restart right after an effect: with a pool, the run goes on and finishes.

The tool sends an invoice, then the server restarts (`pg_ctl restart`) before the tool
returns: every pooled connection is dead. The ledger's own statements run once more on a
fresh connection (after the pool dropped its broken ones), and a pool made with
`check=ConnectionPool.check_connection` hands LangGraph's saver checked connections, so
the call is recorded once, the run answers and the invoice went out once. Through invoke
and ainvoke, with a checking pool and with a plain one.

The server is a throwaway one of the test's own (`.ci/postgres` on another port), never
the shared one: the test needs root and an installed PostgreSQL, and skips otherwise
(`AGENTLOOP_PG_RESTART_PORT` and `AGENTLOOP_PG_RESTART_DATA` choose where it runs).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from agentloop import GovernanceOptions, ModelOptions, ToolPolicy, create_tool_loop
from agentloop.testing import ScriptedChatModel, plan_reply, planning_round

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PORT = os.environ.get("AGENTLOOP_PG_RESTART_PORT", "54339")
DATA = os.environ.get("AGENTLOOP_PG_RESTART_DATA", "/tmp/agentloop-pg-deploy")
CONNECTION = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}


def _bin() -> str:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
    return found[-1] if found else ""


def _ready(pg_bin: str) -> bool:
    ready = [f"{pg_bin}/pg_isready", "-q", "-h", "127.0.0.1", "-p", PORT]
    return subprocess.run(ready, check=False).returncode == 0


def _pg_ctl(pg_bin: str, *action: str) -> None:
    """Run `pg_ctl` as the postgres user; its server must not hold our pipes open."""
    options = f"-p {PORT} -k /tmp -c listen_addresses=127.0.0.1"
    command = ["runuser", "-u", "postgres", "--", f"{pg_bin}/pg_ctl", "-D", DATA, "-w"]
    command += ["-l", f"{DATA}/server.log", *action, "-o", options]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def own_postgres() -> Iterator[str]:
    """A PostgreSQL server of this test's own: its DSN; stopped after if started here."""
    pg_bin = _bin()
    if os.geteuid() != 0 or not pg_bin or shutil.which("runuser") is None:
        pytest.skip("restarting a PostgreSQL server of its own needs root and PostgreSQL installed")
    started = not _ready(pg_bin)
    if started:
        env = {**os.environ, "AGENTLOOP_PG_PORT": PORT, "AGENTLOOP_PG_DATA": DATA}
        made = subprocess.run(
            ["bash", str(ROOT / ".ci" / "postgres")], env=env, capture_output=True, text=True
        )
        if made.returncode != 0:
            pytest.skip(f"could not start a PostgreSQL server on port {PORT}: {made.stderr[-500:]}")
    try:
        yield f"postgresql://postgres@127.0.0.1:{PORT}/postgres"
    finally:
        if started:
            _pg_ctl(pg_bin, "-m", "fast", "stop")


class Invoicing:
    """A loop whose invoice tool restarts the server right after its effect."""

    def __init__(self) -> None:
        self.sent: list[str] = []

        @tool
        def send_invoice(invoice_id: str) -> str:
            """Send an invoice (side effect)."""
            self.sent.append(invoice_id)
            # LangGraph writes the previous step's checkpoint in the background while this
            # step runs; a restart that cuts that write fails the run whatever the pool
            # (see docs/concepts/exactly-once.md), so the restart comes once it is written
            time.sleep(0.3)
            _pg_ctl(_bin(), "-m", "fast", "restart")
            return f"invoice {invoice_id} sent"

        def planner(messages: list[Any]) -> str:
            if planning_round(messages) != 0:
                return str(plan_reply("response"))
            command = {"tool_name": "send_invoice", "tool_kwargs": {"invoice_id": "INV-9"}}
            return str(plan_reply("execute", [command]))

        self.tools = [send_invoice]
        self.planner = planner

    def loop(self, saver: Any) -> Any:
        return create_tool_loop(
            ScriptedChatModel(responder=self.planner),
            self.tools,
            models=ModelOptions(answer_model=ScriptedChatModel(responder=lambda _: "invoiced")),
            governance=GovernanceOptions(
                policies={"send_invoice": ToolPolicy(read_only=False, idempotent=False)}
            ),
            checkpointer=saver,
        )


def check_finished(out: dict[str, Any], invoicing: Invoicing) -> None:
    assert out["answer"] == "invoiced"
    [record] = out["tool_logs"]
    assert record["success"] is True and record["result"] == "invoice INV-9 sent", record
    assert invoicing.sent == ["INV-9"]


@pytest.mark.parametrize("checked", [True, False], ids=["checking-pool", "plain-pool"])
def test_a_restart_after_an_effect_under_invoke(own_postgres: str, checked: bool) -> None:
    invoicing = Invoicing()
    check = ConnectionPool.check_connection if checked else None
    with ConnectionPool(own_postgres, kwargs=CONNECTION, check=check, open=True) as pool:
        saver = PostgresSaver(pool)  # type: ignore[arg-type]
        saver.setup()
        config: Any = {"configurable": {"thread_id": uuid.uuid4().hex}}
        out = invoicing.loop(saver).invoke({"user_input": "invoice INV-9"}, config)
    check_finished(out, invoicing)


@pytest.mark.parametrize("checked", [True, False], ids=["checking-pool", "plain-pool"])
async def test_a_restart_after_an_effect_under_ainvoke(own_postgres: str, checked: bool) -> None:
    invoicing = Invoicing()
    check = AsyncConnectionPool.check_connection if checked else None
    async with AsyncConnectionPool(
        own_postgres, kwargs=CONNECTION, check=check, open=False
    ) as pool:
        saver = AsyncPostgresSaver(pool)  # type: ignore[arg-type]
        await saver.setup()
        config: Any = {"configurable": {"thread_id": uuid.uuid4().hex}}
        out = await invoicing.loop(saver).ainvoke({"user_input": "invoice INV-9"}, config)
    check_finished(out, invoicing)
