"""One version of an app on a checkpointed thread: v1 is killed after an effect, v2 resumes.

    python deploy_worker.py start|resume --backend sqlite|postgres --target PATH_OR_DSN
        --thread ID --effects FILE --entry invoke|ainvoke --version VERSION
        [--durability default|sync|exit] [--crash-at read|effect|answer] [--pool]

`start` runs v1: it reads a customer, then sends an invoice (`send_invoice(invoice_id=...)`,
declared a write), and SIGKILLs itself right after the invoice went out (`--crash-at
effect`), when the answer model is called (`--crash-at answer`) or in the read, before
the invoice (`--crash-at read`). `resume` runs the
version given on the same thread, with the same checkpointer (and so the same ledger):

- `v1`: the same code;
- `renamed_argument`: `send_invoice(invoice_number=...)`, the old name kept as an alias;
- `renamed_tool`: the tool is now `issue_invoice`;
- `read_only`: `send_invoice` is now declared read-only;
- `removed`: the app no longer has an invoice tool.

Every effect is appended (with fsync) to the effects file, so the test counts them.
With `--durability exit` nothing was saved, so `resume` sends the request again.
`--pool` gives the PostgreSQL saver a connection pool that checks each connection.
The last stdout line is a JSON summary: the records and the answer.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from pathlib import Path
from typing import Any

from langchain_core.tools import BaseTool, tool

from agentloop import GovernanceOptions, ModelOptions, ToolPolicy, create_tool_loop
from agentloop.testing import ScriptedChatModel, plan_reply, planning_round

ARGS: argparse.Namespace
REQUEST = "invoice acme"
WRITE = ToolPolicy(read_only=False, idempotent=False, concurrency_safe=False)


def effect(entry: str) -> None:
    with Path(ARGS.effects).open("a", encoding="utf-8") as handle:
        handle.write(entry + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def crash_if(point: str) -> None:
    if ARGS.command == "start" and ARGS.crash_at == point:
        os.kill(os.getpid(), signal.SIGKILL)


@tool
def get_customer(customer: str) -> str:
    """Read a customer's billing details."""
    crash_if("read")
    effect(f"read:{customer}")
    return f"{customer}: billed monthly"


def send(invoice: str) -> str:
    effect(f"invoice:{invoice}")
    crash_if("effect")
    return f"invoice {invoice} sent"


@tool("send_invoice")
def send_invoice_v1(invoice_id: str) -> str:
    """Send an invoice to its customer (side effect)."""
    return send(invoice_id)


@tool("send_invoice")
def send_invoice_renamed_argument(invoice_number: str) -> str:
    """Send an invoice to its customer (side effect)."""
    return send(invoice_number)


@tool
def issue_invoice(invoice_id: str) -> str:
    """Send an invoice to its customer (side effect)."""
    return send(invoice_id)


VERSIONS: dict[str, tuple[list[BaseTool], dict[str, ToolPolicy]]] = {
    "v1": ([get_customer, send_invoice_v1], {"send_invoice": WRITE}),
    "renamed_argument": (
        [get_customer, send_invoice_renamed_argument],
        {
            "send_invoice": WRITE.model_copy(
                update={"arg_aliases": {"invoice_number": ["invoice_id"]}}
            )
        },
    ),
    "renamed_tool": ([get_customer, issue_invoice], {"issue_invoice": WRITE}),
    "read_only": ([get_customer, send_invoice_v1], {"send_invoice": ToolPolicy(read_only=True)}),
    "removed": ([get_customer], {}),
}


def planner(messages: list[Any]) -> str:
    if planning_round(messages) != 0:
        return str(plan_reply("response"))
    commands = [
        {"tool_name": "get_customer", "tool_kwargs": {"customer": "acme"}},
        {"tool_name": "send_invoice", "tool_kwargs": {"invoice_id": "INV-7"}},
    ]
    return str(plan_reply("execute", commands))


def answer(messages: list[Any]) -> str:
    crash_if("answer")
    return "done"


def build(checkpointer: Any) -> Any:
    version = "v1" if ARGS.command == "start" else ARGS.version
    tools, policies = VERSIONS[version]
    return create_tool_loop(
        ScriptedChatModel(responder=planner),
        tools,
        models=ModelOptions(answer_model=ScriptedChatModel(responder=answer)),
        governance=GovernanceOptions(policies=policies),
        checkpointer=checkpointer,
    )


def summary(values: dict[str, Any]) -> str:
    return json.dumps(
        {"records": values.get("tool_logs", []), "answer": values.get("answer")}, default=str
    )


def sync_saver() -> AbstractContextManager[Any]:
    if ARGS.backend == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        return SqliteSaver.from_conn_string(ARGS.target)
    from langgraph.checkpoint.postgres import PostgresSaver

    if not ARGS.pool:
        return PostgresSaver.from_conn_string(ARGS.target)
    from contextlib import contextmanager

    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    @contextmanager
    def pooled() -> Any:
        kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
        with ConnectionPool(
            ARGS.target, kwargs=kwargs, check=ConnectionPool.check_connection, open=True
        ) as pool:
            yield PostgresSaver(pool)

    return pooled()


def async_saver() -> AbstractAsyncContextManager[Any]:
    if ARGS.backend == "sqlite":
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        return AsyncSqliteSaver.from_conn_string(ARGS.target)
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    if not ARGS.pool:
        return AsyncPostgresSaver.from_conn_string(ARGS.target)
    from contextlib import asynccontextmanager

    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    @asynccontextmanager
    async def pooled() -> Any:
        kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
        async with AsyncConnectionPool(
            ARGS.target, kwargs=kwargs, check=AsyncConnectionPool.check_connection, open=False
        ) as pool:
            yield AsyncPostgresSaver(pool)

    return pooled()


def options() -> dict[str, Any]:
    return {} if ARGS.durability == "default" else {"durability": ARGS.durability}


def payload(saved: bool) -> Any:
    """The request; None to resume a saved run (nothing saved: the request is sent again)."""
    return None if ARGS.command == "resume" and saved else {"user_input": REQUEST}


def run_sync() -> None:
    with sync_saver() as checkpointer:
        if ARGS.backend == "postgres":
            checkpointer.setup()
        graph = build(checkpointer)
        config = {"configurable": {"thread_id": ARGS.thread}}
        graph.invoke(payload(bool(graph.get_state(config).values)), config, **options())
        print(summary(graph.get_state(config).values))


async def run_async() -> None:
    async with async_saver() as checkpointer:
        if ARGS.backend == "postgres":
            await checkpointer.setup()
        graph = build(checkpointer)
        config = {"configurable": {"thread_id": ARGS.thread}}
        saved = bool((await graph.aget_state(config)).values)
        await graph.ainvoke(payload(saved), config, **options())
        print(summary((await graph.aget_state(config)).values))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["start", "resume"])
    parser.add_argument("--backend", choices=["sqlite", "postgres"], required=True)
    parser.add_argument("--target", required=True)
    parser.add_argument("--thread", required=True)
    parser.add_argument("--effects", required=True)
    parser.add_argument("--entry", choices=["invoke", "ainvoke"], required=True)
    parser.add_argument("--version", choices=list(VERSIONS), default="v1")
    parser.add_argument("--durability", choices=["default", "sync", "exit"], default="default")
    parser.add_argument("--crash-at", choices=["read", "effect", "answer"], default="effect")
    parser.add_argument("--pool", action="store_true")
    ARGS = parser.parse_args()
    if ARGS.entry == "invoke":
        run_sync()
    else:
        asyncio.run(run_async())
    sys.exit(0)
