"""A tool gets the arguments its planner wrote; state, records and callbacks the redacted ones.

`GovernanceOptions(redact=...)` keeps every string the loop writes redacted, the plan
included. Under `create_agent` a tool gets what the model wrote (`PIIMiddleware` leaves
the state's tool calls intact), and so does a tool here: the planner's own arguments are
kept in memory, and a call whose own arguments are gone (a resume in a new process) is
refused, never run with the redacted ones.
"""

from __future__ import annotations

import re
from typing import Any
from uuid import UUID

import pytest
from langchain.agents.middleware import PIIMiddleware
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from parity import agent_of, ask, loop_of, thread
from pydantic import BaseModel

from agentloop import GovernanceOptions, ModelOptions, create_tool_loop
from agentloop.governance.planned_arguments import planned, restored
from agentloop.testing import ScriptedChatModel, plan_reply

ADDRESS = "bob.smith@example.com"


def hide_mail(text: str) -> str:
    return re.sub(r"[\w.+-]+@[\w-]+\.[\w.]+", "[REDACTED_EMAIL]", text)


class ToolInputs(BaseCallbackHandler):
    def __init__(self) -> None:
        self.inputs: list[str] = []

    def on_tool_start(
        self, serialized: dict[str, Any], input_str: str, *, run_id: UUID, **kwargs: Any
    ) -> None:
        self.inputs.append(f"{input_str} {kwargs.get('inputs')}")


def mail_loop(sent: list[dict[str, str]], checkpointer: Any, plan_mode: str, **kwargs: Any) -> Any:
    @tool
    def send_mail(to: str, subject: str) -> str:
        """Send a mail."""
        sent.append({"to": to, "subject": subject})
        return f"sent to {to}"

    command = {"tool_name": "send_mail", "tool_kwargs": {"to": ADDRESS, "subject": "hello"}}
    planner = ScriptedChatModel(
        [plan_reply("execute", [command]), plan_reply("response")], repeat_last=True
    )
    return create_tool_loop(
        planner,
        [send_mail],
        models=ModelOptions(answer_model=ScriptedChatModel(["done"], repeat_last=True)),
        governance=GovernanceOptions(redact=hide_mail),
        checkpointer=checkpointer,
        plan_mode=plan_mode,  # type: ignore[arg-type]
        **kwargs,
    )


async def test_a_tool_gets_the_planners_arguments_and_nothing_else_does(
    run_loop: Any, plan_mode: str
) -> None:
    sent: list[dict[str, str]] = []
    saver, callbacks = InMemorySaver(), ToolInputs()
    graph = mail_loop(sent, saver, plan_mode)
    config: Any = {"configurable": {"thread_id": "t"}, "callbacks": [callbacks]}
    out = await run_loop(graph, {"user_input": "mail Bob hello"}, config)
    assert sent == [{"to": ADDRESS, "subject": "hello"}]
    assert out["status"] == "ok"
    assert out["tool_logs"][0]["success"] is True
    # the record, the state, every checkpoint and the tool's callbacks show it redacted
    assert "[REDACTED_EMAIL]" in str(out["tool_logs"][0])
    assert ADDRESS not in str(out)
    for checkpoint in saver.list(None):
        assert ADDRESS not in str(checkpoint.checkpoint)
    assert callbacks.inputs and all(ADDRESS not in text for text in callbacks.inputs)
    assert any("[REDACTED_EMAIL]" in text for text in callbacks.inputs)


async def test_a_resume_without_the_planners_arguments_refuses_the_call(
    run_loop: Any, plan_mode: str
) -> None:
    sent: list[dict[str, str]] = []
    saver = InMemorySaver()
    config: Any = {"configurable": {"thread_id": "t"}}
    first = mail_loop(sent, saver, plan_mode, interrupt_before=["execute"])
    await run_loop(first, {"user_input": "mail Bob hello"}, config)
    assert sent == []
    # the same checkpoints, another process: the planner's own arguments are not there
    second = mail_loop(sent, saver, plan_mode, interrupt_before=["execute"])
    out = await run_loop(second, None, config)
    assert sent == []  # never sent to [REDACTED_EMAIL]
    record = out["tool_logs"][0]
    assert record["success"] is False
    assert record["error_type"] == "arguments_unavailable"
    assert "redact hook" in record["error"]


async def test_a_resume_in_the_same_process_keeps_them(run_loop: Any, plan_mode: str) -> None:
    sent: list[dict[str, str]] = []
    config: Any = {"configurable": {"thread_id": "t"}}
    graph = mail_loop(sent, InMemorySaver(), plan_mode, interrupt_before=["execute"])
    await run_loop(graph, {"user_input": "mail Bob hello"}, config)
    out = await run_loop(graph, None, config)
    assert sent == [{"to": ADDRESS, "subject": "hello"}]
    assert out["tool_logs"][0]["success"] is True


class Recipient(BaseModel):
    name: str
    address: str


def test_restored_puts_back_text_where_the_tool_got_the_kept_text() -> None:
    written = {
        "to": Recipient(name="Bob", address=ADDRESS).model_dump(),
        "cc": [ADDRESS, "ann@example.org"],
        "subject": "Hello",
        "count": 2,
    }
    kept = {
        "to": {"name": "Bob", "address": "[REDACTED_EMAIL]"},
        "cc": ["[REDACTED_EMAIL]", "[REDACTED_EMAIL]"],
        "subject": "Hello",
        "count": 2,
    }
    parsed = {
        "to": Recipient(name="Bob", address="[REDACTED_EMAIL]"),
        "cc": ("[REDACTED_EMAIL]", "[REDACTED_EMAIL]"),
        "subject": "hello",  # the loop's repair changed it: it stays repaired
        "count": 2,
        "runtime": object(),  # injected, not planned: left alone
    }
    assert restored(parsed) is parsed  # outside `planned`: nothing to put back
    with planned((written, kept)):
        got = restored(parsed)
    assert got["to"] == Recipient(name="Bob", address=ADDRESS)
    assert got["cc"] == (ADDRESS, "ann@example.org")
    assert got["subject"] == "hello"
    assert got["count"] == 2 and got["runtime"] is parsed["runtime"]


@pytest.mark.parametrize("written", [{"to": 5}, {"to": ["a"]}, {}])
def test_restored_leaves_what_does_not_line_up(written: dict[str, Any]) -> None:
    parsed = {"to": "[REDACTED_EMAIL]"}
    with planned((written, {"to": "[REDACTED_EMAIL]"})):
        assert restored(parsed) == parsed


async def test_the_tool_gets_what_create_agent_with_pii_output_redaction_gives_it(
    run_loop: Any,
) -> None:
    def tools(sent: list[str]) -> list[Any]:
        @tool
        def send_mail(to: str) -> str:
            """Send a mail."""
            sent.append(to)
            return "sent"

        return [send_mail]

    rounds = [[("send_mail", {"to": ADDRESS})]]
    by_agent: list[str] = []
    agent = agent_of(tools(by_agent), rounds, [PIIMiddleware("email", apply_to_output=True)])
    await run_loop(agent.graph, ask("mail Bob"), thread("a"))
    by_loop: list[str] = []
    loop = loop_of(tools(by_loop), rounds, governance=GovernanceOptions(redact=hide_mail))
    out = await run_loop(loop.graph, ask("mail Bob"), thread("l"))
    assert by_loop == by_agent == [ADDRESS]
    assert ADDRESS not in str(out)  # and the loop's state keeps it redacted


SENT_BY_SUBCLASS: list[str] = []


class MailArguments(BaseModel):
    to: str


class MailTool(BaseTool):
    name: str = "send_mail"
    description: str = "Send a mail."
    args_schema: type[BaseModel] = MailArguments

    def _run(self, to: str) -> str:
        SENT_BY_SUBCLASS.append(to)
        return "sent"


async def test_async_and_subclassed_tools_get_them_too(run_loop: Any) -> None:
    sent: list[str] = []

    @tool
    async def send_mail(to: str) -> str:
        """Send a mail."""
        sent.append(to)
        return "sent"

    SENT_BY_SUBCLASS.clear()
    for mail_tool, received in ((send_mail, sent), (MailTool(), SENT_BY_SUBCLASS)):
        command = {"tool_name": "send_mail", "tool_kwargs": {"to": ADDRESS}}
        graph = create_tool_loop(
            ScriptedChatModel([plan_reply("execute", [command]), plan_reply("response")]),
            [mail_tool],
            models=ModelOptions(answer_model=ScriptedChatModel(["done"])),
            governance=GovernanceOptions(redact=hide_mail),
        )
        out = await run_loop(graph, {"user_input": "mail Bob"})
        assert received == [ADDRESS]
        assert ADDRESS not in str(out)


@pytest.mark.parametrize("checkpointer", [InMemorySaver, None], ids=["saver", "no_saver"])
async def test_a_redacted_call_started_while_the_plan_streams_runs_once(
    run_loop: Any, plan_mode: str, checkpointer: Any
) -> None:
    found: list[str] = []

    @tool
    async def find_contact(email: str) -> str:
        """Find a contact by mail address (read-only)."""
        found.append(email)
        return f"{email} is Bob"

    other = "Ann Smith"  # nothing to redact
    commands = [
        {"tool_name": "find_contact", "tool_kwargs": {"email": ADDRESS}},
        {"tool_name": "find_contact", "tool_kwargs": {"email": other}},
    ]
    planner = ScriptedChatModel(
        [str(plan_reply("execute", commands)), str(plan_reply("response"))],
        chunk_size=4,
        chunk_delay_s=0.002,
    )
    graph = create_tool_loop(
        planner,
        [find_contact],
        models=ModelOptions(answer_model=ScriptedChatModel(["done"], repeat_last=True)),
        governance=GovernanceOptions(redact=hide_mail),
        checkpointer=checkpointer() if checkpointer else None,
        plan_mode=plan_mode,  # type: ignore[arg-type]
    )
    callbacks = ToolInputs()
    config: Any = {
        "configurable": {"thread_id": f"early-{run_loop.entry}"},
        "callbacks": [callbacks],
    }
    modes = ["custom", "values"]
    chunks = await run_loop.stream(graph, {"user_input": "who is Bob"}, config, stream_mode=modes)
    events = [event for mode, event in chunks if mode == "custom"]
    dispatched = [event for event in events if event["type"] == "tool_dispatched"]
    out = [state for mode, state in chunks if mode == "values"][-1]
    assert [event["index"] for event in dispatched][:1] == [0]  # started while it streamed
    # each call ran once, with the planner's own arguments
    assert sorted(found) == sorted([ADDRESS, other])
    records = out["tool_logs"]
    assert [record["success"] for record in records] == [True, True]
    assert records[0]["kwargs"] == {"email": "[REDACTED_EMAIL]"}
    assert records[0]["result"] == "[REDACTED_EMAIL] is Bob"
    messages = [m for m in out["messages"] if m.type == "tool"]
    assert [m.content for m in messages] == ["[REDACTED_EMAIL] is Bob", f"{other} is Bob"]
    assert ADDRESS not in str(out) and ADDRESS not in str(chunks)
    # the tool's callbacks saw the redacted arguments, as for a call execute starts
    assert len(callbacks.inputs) == 2 and all(ADDRESS not in text for text in callbacks.inputs)
