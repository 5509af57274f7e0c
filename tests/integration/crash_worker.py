"""A loop run in its own process, killed mid-run and resumed from its checkpoint.

    python crash_worker.py start|resume --backend sqlite|asqlite|postgres|apostgres
        --target PATH_OR_DSN --thread ID --ledger FILE
        [--entry invoke|ainvoke|stream|astream] [--durability default|async|sync|exit]
        [--topology top|subgraph|subagent] [--crash-at early|effect|sibling|planner|answer]
        [--interrupt] [--barrier EPOCH] [--rounds N] [--announce]

Every tool appends what it did to the ledger file (with fsync), so the test can count
side effects. `--crash-at` ends the process with `os._exit`:
- `early`: inside the read-only `get_status` of the last round, before its read, which
  streaming dispatch started while that round's plan was still streaming: the worker
  checks that the call runs in the plan node (else it exits with 3) and prints
  `EARLY_CALL_IN plan` first;
- `effect`: inside the unsafe `send_payment`, right after its effect;
- `sibling`: inside the safe `get_receipt`, a call of a later batch, before its effect;
- `planner`: when the planner is called for the next round;
- `answer`: when the answer model is called.
`--interrupt` pauses before `execute`; `--barrier` makes a resume wait until that moment
(two workers resuming one thread at once); `--announce` prints READY just before the run
starts. The last stdout line is a JSON summary.

With `--durability exit` nothing is saved before the run ends, so a crashed run leaves
nothing to resume: `resume` then sends the same request again, as a user would (the
same run, named by its turn and request, so the side-effect ledger still decides).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import time
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph

from agentloop import ModelOptions, as_tool, create_tool_loop
from agentloop.testing import ScriptedChatModel, plan_reply

ARGS: argparse.Namespace
REQUEST = "order and pay"


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
def get_status(n: int, config: RunnableConfig) -> str:
    """Read a status (a sync tool)."""
    if ARGS.crash_at == "early" and n == 1 + 10 * (ARGS.rounds - 1):  # in the last round
        node = (config.get("metadata") or {}).get("langgraph_node")
        if node != "plan":  # not started while the plan streamed: the test must fail
            print(f"NOT_EARLY {node}", flush=True)
            os._exit(3)
        print(f"EARLY_CALL_IN {node}", flush=True)
        os._exit(137)
    ledger(f"status:{n}")
    return f"status {n} ok"


@tool
async def send_payment(amount: int) -> str:
    """Send a payment (side effect); the process may die right after it took effect."""
    ledger(f"payment:{amount}")
    crash_if("effect")
    return f"paid {amount}"


@tool
async def get_receipt(n: int) -> str:
    """Read a receipt; the process may die here, before the read."""
    crash_if("sibling")
    ledger(f"receipt:{n}")
    return f"receipt {n}"


TOOLS = [save_order, get_status, send_payment, get_receipt]
COMMANDS = [  # the read comes first, so streaming dispatch starts it while the plan streams
    ("get_status", {"n": 1}),
    ("save_order", {"item": "A"}),
    ("send_payment", {"amount": 5}),
    ("get_receipt", {"n": 3}),
]


def round_of(messages: list[Any]) -> int:
    found = re.search(r"round_index: (\d+)", str(messages[-1].content))
    return int(found.group(1)) if found else 0


def planner(messages: list[Any]) -> str:
    current = round_of(messages)
    if current >= ARGS.rounds:
        crash_if("planner")
        return str(plan_reply("response"))
    values = {"item": f"A{current}", "n": 1 + 10 * current, "amount": 5 + 10 * current}
    commands = [
        {"tool_name": name, "tool_kwargs": {key: values[key] for key in kwargs}}
        for name, kwargs in COMMANDS
    ]
    return str(plan_reply("execute", commands))


def answer(messages: list[Any]) -> str:
    crash_if("answer")
    return "done"


def inner_loop(**options: Any) -> Any:
    return create_tool_loop(
        ScriptedChatModel(responder=planner),
        TOOLS,
        models=ModelOptions(answer_model=ScriptedChatModel(responder=answer)),
        name="clerk",
        **options,
    )


def coordinator(messages: list[Any]) -> str:
    if round_of(messages) >= 1:
        return str(plan_reply("response"))
    command = {"tool_name": "ask_clerk", "tool_kwargs": {"user_input": REQUEST}}
    return str(plan_reply("execute", [command]))


def build(checkpointer: Any) -> Any:
    interrupt = ["execute"] if ARGS.interrupt else None
    if ARGS.topology == "top":
        return inner_loop(checkpointer=checkpointer, interrupt_before=interrupt)
    if ARGS.topology == "subgraph":
        parent = StateGraph(MessagesState)
        parent.add_node("agent", inner_loop())
        parent.add_edge(START, "agent")
        return parent.compile(checkpointer=checkpointer)
    clerk = as_tool(inner_loop(), name="ask_clerk", description="Orders and pays.")
    return create_tool_loop(
        ScriptedChatModel(responder=coordinator),
        [clerk],
        models=ModelOptions(
            answer_model=ScriptedChatModel(responder=lambda messages: "coordinated")
        ),
        checkpointer=checkpointer,
        interrupt_before=interrupt,
        name="coordinator",
    )


def payload(*, again: bool = False) -> Any:
    """The run's input: the request, or None to resume (`again`: send the request again)."""
    if ARGS.command == "resume" and not again:
        return None
    if ARGS.topology == "subgraph":
        return {"messages": [HumanMessage(REQUEST)]}
    return {"user_input": REQUEST}


def summary(values: dict[str, Any]) -> str:
    answer_text = values.get("answer")
    if answer_text is None and values.get("messages"):
        answer_text = values["messages"][-1].content
    return json.dumps({"records": values.get("tool_logs", []), "answer": answer_text}, default=str)


def sync_saver() -> AbstractContextManager[Any]:
    if ARGS.backend == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        return SqliteSaver.from_conn_string(ARGS.target)
    from langgraph.checkpoint.postgres import PostgresSaver

    return PostgresSaver.from_conn_string(ARGS.target)


def async_saver() -> AbstractAsyncContextManager[Any]:
    if ARGS.backend == "asqlite":
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        return AsyncSqliteSaver.from_conn_string(ARGS.target)
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    return AsyncPostgresSaver.from_conn_string(ARGS.target)


def durability() -> dict[str, Any]:
    return {} if ARGS.durability == "default" else {"durability": ARGS.durability}


def wait_for_barrier() -> None:
    if ARGS.barrier:
        time.sleep(max(0.0, ARGS.barrier - time.time()))
    if ARGS.announce:  # the test may now kill this process at a moment of its choosing
        print("READY", flush=True)


def run_sync() -> None:
    with sync_saver() as checkpointer:
        if ARGS.backend == "postgres":
            checkpointer.setup()
        graph = build(checkpointer)
        config = {"configurable": {"thread_id": ARGS.thread}}
        wait_for_barrier()
        again = ARGS.command == "resume" and not graph.get_state(config).values
        if again and ARGS.durability != "exit":
            print(summary({}))  # killed before its first checkpoint: nothing to resume
            return
        if ARGS.entry == "invoke":
            graph.invoke(payload(again=again), config, **durability())
        else:
            chunks = graph.stream(
                payload(again=again), config, stream_mode="updates", **durability()
            )
            for _ in chunks:
                pass
        print(summary(graph.get_state(config).values))


async def run_async() -> None:
    async with async_saver() as checkpointer:
        if ARGS.backend == "apostgres":
            await checkpointer.setup()
        graph = build(checkpointer)
        config = {"configurable": {"thread_id": ARGS.thread}}
        wait_for_barrier()
        again = ARGS.command == "resume" and not (await graph.aget_state(config)).values
        if again and ARGS.durability != "exit":
            print(summary({}))
            return
        if ARGS.entry == "ainvoke":
            await graph.ainvoke(payload(again=again), config, **durability())
        else:
            chunks = graph.astream(
                payload(again=again), config, stream_mode="updates", **durability()
            )
            async for _ in chunks:
                pass
        print(summary((await graph.aget_state(config)).values))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["start", "resume"])
    parser.add_argument(
        "--backend", choices=["sqlite", "asqlite", "postgres", "apostgres"], required=True
    )
    parser.add_argument("--target", required=True)
    parser.add_argument("--thread", required=True)
    parser.add_argument("--ledger", required=True)
    parser.add_argument("--entry", choices=["invoke", "ainvoke", "stream", "astream"])
    parser.add_argument(
        "--durability", choices=["default", "async", "sync", "exit"], default="default"
    )
    parser.add_argument("--topology", choices=["top", "subgraph", "subagent"], default="top")
    parser.add_argument("--crash-at", default="")
    parser.add_argument("--interrupt", action="store_true")
    parser.add_argument("--barrier", type=float, default=0.0)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--announce", action="store_true")
    ARGS = parser.parse_args()
    if ARGS.entry is None:
        ARGS.entry = "ainvoke" if ARGS.backend in ("asqlite", "apostgres") else "invoke"
    if ARGS.entry in ("invoke", "stream"):
        run_sync()
    else:
        asyncio.run(run_async())
    sys.exit(0)
