"""A loop run in its own process, killed mid-round and resumed from its checkpoint.

    python crash_worker.py start|resume --backend sqlite|postgres --target PATH_OR_DSN
        --thread ID --ledger FILE [--crash-at payment|flaky]

Every tool appends what it did to the ledger file, so the test can count side effects.
`--crash-at` makes the named tool end the process with `os._exit` while it runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

from langchain_core.tools import tool

from agentloop import ToolPolicy, create_tool_loop
from agentloop.testing import ScriptedChatModel, plan_reply

ARGS: argparse.Namespace


def ledger(entry: str) -> None:
    with Path(ARGS.ledger).open("a", encoding="utf-8") as handle:
        handle.write(entry + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def crash_if(point: str) -> None:
    if ARGS.crash_at == point:
        os._exit(137)


@tool
async def save_order(item: str) -> str:
    """Save an order (side effect)."""
    ledger(f"order:{item}")
    return f"order {item} saved"


@tool
async def get_status(n: int) -> str:
    """Read a status."""
    ledger(f"status:{n}")
    return f"status {n} ok"


@tool
async def get_flaky(n: int) -> str:
    """Read something; the process dies here when asked to."""
    await asyncio.sleep(0.5)  # siblings finish and are persisted first
    crash_if("flaky")
    ledger(f"flaky:{n}")
    return f"flaky {n} ok"


@tool
async def send_payment(amount: int) -> str:
    """Send a payment (side effect); the process may die after it took effect."""
    ledger(f"payment:{amount}")
    await asyncio.sleep(0.3)
    crash_if("payment")
    return f"paid {amount}"


@tool
async def get_receipt(n: int) -> str:
    """Read a receipt."""
    ledger(f"receipt:{n}")
    return f"receipt {n}"


def planner(messages: list[Any]) -> str:
    if "round_index: 0" not in str(messages[-1].content):
        return str(plan_reply("response"))
    commands = [
        ("save_order", {"item": "A"}),
        ("get_status", {"n": 1}),
        ("get_flaky", {"n": 2}),
        ("send_payment", {"amount": 5}),
        ("get_receipt", {"n": 3}),
    ]
    return str(
        plan_reply("execute", [{"tool_name": name, "tool_kwargs": kw} for name, kw in commands])
    )


def saver() -> AbstractAsyncContextManager[Any]:
    if ARGS.backend == "sqlite":
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        return AsyncSqliteSaver.from_conn_string(ARGS.target)
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    return AsyncPostgresSaver.from_conn_string(ARGS.target)


async def main() -> None:
    async with saver() as checkpointer:
        if ARGS.backend == "postgres":
            await checkpointer.setup()
        graph = create_tool_loop(
            ScriptedChatModel(responder=planner),
            [save_order, get_status, get_flaky, send_payment, get_receipt],
            answer_model=ScriptedChatModel(responder=lambda messages: "done"),
            checkpointer=checkpointer,
            policies={"get_flaky": ToolPolicy(retry=None)},
        )
        config = {"configurable": {"thread_id": ARGS.thread}}
        payload = {"user_input": "order and pay"} if ARGS.command == "start" else None
        out = await graph.ainvoke(payload, config, durability="sync")
        print(json.dumps({"records": out["tool_logs"], "answer": out["answer"]}, default=str))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["start", "resume"])
    parser.add_argument("--backend", choices=["sqlite", "postgres"], required=True)
    parser.add_argument("--target", required=True)
    parser.add_argument("--thread", required=True)
    parser.add_argument("--ledger", required=True)
    parser.add_argument("--crash-at", default="")
    ARGS = parser.parse_args()
    asyncio.run(main())
    sys.exit(0)
