"""Two runs at once on one compiled loop, with the same request on the same thread: one run's
data stays in that run.

Each run's whole results (for `"$N"` references) and the planner's own arguments (with a
`redact=` hook) are kept under its own invocation; two users' identical requests are two
runs for the side-effect ledger too. Without a checkpointer and with `InMemorySaver`,
under `invoke` and `ainvoke`.
"""

from __future__ import annotations

import asyncio
import contextvars
import re
import threading
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from agentloop import GovernanceOptions, ModelOptions, create_tool_loop
from agentloop.testing import ScriptedChatModel, plan_reply, planning_round

BIG = 30_000
"""Characters of a file: more than a record keeps, so `$1` hands over the kept whole value."""

ASKER: contextvars.ContextVar[str] = contextvars.ContextVar("asker", default="")
"""Who the scripted planner plans for (each run sets its own)."""

CHECKPOINTERS = pytest.mark.parametrize("saver", [None, "memory"])


def _planner(commands: Any) -> ScriptedChatModel:
    def respond(messages: Any) -> str:
        if planning_round(messages) == 0:
            return str(plan_reply("execute", commands(ASKER.get())))
        return str(plan_reply("response"))

    return ScriptedChatModel(responder=respond)


def _loop(commands: Any, tools: list[Any], saver: str | None, **options: Any) -> Any:
    return create_tool_loop(
        _planner(commands),
        tools,
        models=ModelOptions(answer_model=ScriptedChatModel(["done"], repeat_last=True)),
        checkpointer=InMemorySaver() if saver else None,
        **options,
    )


def _config(user: str) -> RunnableConfig:
    return {"configurable": {"thread_id": "shared-thread", "user_id": user}}


@pytest.fixture(params=["user_input", "messages"])
def input_form(request: pytest.FixtureRequest) -> str:
    """How the request comes in: `user_input`, or a `HumanMessage` in `messages`."""
    return str(request.param)


async def _both(
    run_loop: Any, graph: Any, request: str, users: tuple[str, str], form: str
) -> list[Any]:
    """Run the same request for two users at once on one thread, in one input form."""
    payload = {"user_input": request} if form == "user_input" else {"messages": [("user", request)]}

    async def one(user: str) -> Any:
        ASKER.set(user)
        return await run_loop(graph, payload, _config(user))

    return list(await asyncio.gather(*(one(user) for user in users)))


def _file_tools(sent: list[tuple[str, str]]) -> list[Any]:
    both_read = threading.Barrier(2, timeout=60)

    @tool
    def fetch_file(name: str, config: RunnableConfig) -> str:
        """Read one of the user's files."""
        user = config["configurable"]["user_id"]
        both_read.wait()  # both runs hold their whole result before either sends
        return f"file {name} of {user}: " + "x" * BIG

    @tool
    def send_file(text: str, config: RunnableConfig) -> str:
        """Send a text to the user (a write)."""
        sent.append((config["configurable"]["user_id"], text[:40]))
        return "sent"

    fetch_file.metadata = {"agentloop": {"read_only": True}}
    return [fetch_file, send_file]


def _send_own_file(user: str) -> list[dict[str, Any]]:
    return [
        {"purpose": "read", "tool_name": "fetch_file", "tool_kwargs": {"name": "report"}},
        {"purpose": "send", "tool_name": "send_file", "tool_kwargs": {"text": "$1"}},
    ]


@CHECKPOINTERS
async def test_a_reference_resolves_to_its_own_runs_value(
    run_loop: Any, saver: Any, input_form: str
) -> None:
    sent: list[tuple[str, str]] = []
    graph = _loop(_send_own_file, _file_tools(sent), saver)
    alice, bob = await _both(run_loop, graph, "send me my report", ("alice", "bob"), input_form)
    assert sorted(sent) == [
        ("alice", "file report of alice: xxxxxxxxxxxxxxxxxx"),
        ("bob", "file report of bob: xxxxxxxxxxxxxxxxxxxx"),
    ]
    for out in (alice, bob):
        assert [r["status"] for r in out["tool_logs"]] == ["succeeded", "succeeded"]
    assert alice["round_state"]["done_plans"][0]["call_id"] != bob["tool_logs"][0]["call_id"]


async def test_one_users_two_runs_at_once_keep_their_own_values(
    run_loop: Any, input_form: str
) -> None:
    """The same user, the same request, one thread, no checkpointer: still two runs' values."""
    sent: list[tuple[str, str]] = []
    turns = iter(["first", "second"])
    lock = threading.Lock()
    both_read = threading.Barrier(2, timeout=60)

    @tool
    def fetch_file(name: str) -> str:
        """Read a file (it changes between reads)."""
        with lock:
            turn = next(turns)
        both_read.wait()
        return f"{turn} version: " + "x" * BIG

    @tool
    def send_file(text: str) -> str:
        """Send a text (a write)."""
        sent.append(("", text.split(":")[0]))
        return "sent"

    fetch_file.metadata = {"agentloop": {"read_only": True}}
    graph = _loop(_send_own_file, [fetch_file, send_file], None)
    outs = await _both(run_loop, graph, "send me my report", ("alice", "alice"), input_form)
    assert sorted(sent) == [("", "first version"), ("", "second version")]
    received = sorted(out["tool_logs"][0]["result"][:14] for out in outs)
    assert received == ["first version:", "second version"]


EMAIL = re.compile(r"[\w.]+@[\w.]+")


@CHECKPOINTERS
async def test_the_planners_own_arguments_reach_their_own_call(
    run_loop: Any, saver: Any, input_form: str
) -> None:
    mails: list[tuple[str, str]] = []
    both_planned = threading.Barrier(2, timeout=60)

    @tool
    def look_up(topic: str) -> str:
        """Look something up (both runs have planned their mail by now)."""
        both_planned.wait()
        return f"notes on {topic}"

    @tool
    def send_mail(to: str, body: str, config: RunnableConfig) -> str:
        """Send a mail (a write)."""
        mails.append((config["configurable"]["user_id"], to))
        return "sent"

    look_up.metadata = {"agentloop": {"read_only": True}}

    def commands(user: str) -> list[dict[str, Any]]:
        return [
            {"purpose": "notes", "tool_name": "look_up", "tool_kwargs": {"topic": "q3"}},
            {
                "purpose": "mail",
                "tool_name": "send_mail",
                "tool_kwargs": {"to": f"{user}@example.com", "body": "$1"},
            },
        ]

    graph = _loop(
        commands,
        [look_up, send_mail],
        saver,
        governance=GovernanceOptions(redact=lambda text: EMAIL.sub("[email]", text)),
    )
    alice, bob = await _both(run_loop, graph, "mail me the q3 notes", ("alice", "bob"), input_form)
    assert sorted(mails) == [("alice", "alice@example.com"), ("bob", "bob@example.com")]
    for out in (alice, bob):
        assert [r["status"] for r in out["tool_logs"]] == ["succeeded", "succeeded"]
        assert "example.com" not in str(out["tool_logs"])  # the state keeps them redacted
