"""Elicitation answered while the call is in flight, never by sending the call again.

A real stdio server's write tool appends a line to a file, then asks the user, then
returns: after one accepted answer the file holds exactly one line, whether a person
answered through an interrupt (resumed with `Command(resume=...)`) or the app's handler
(sync or async) did. A resume that finds no call in flight (another process) reports
`unknown_outcome` and does not write again. Concurrent runs on one toolset (one shared
session) each get their own question, over streamable HTTP (the server's stream names
the call) and stdio (the question echoes the call's progress token).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from processes import free_port, serving
from third_party import OWN_SERVERS, SERVER_PYTHON, cmd, own_server

from agentloop import ModelOptions, create_tool_loop
from agentloop.mcp import ELICITATION_INTERRUPT, MCPToolset
from agentloop.testing import ScriptedChatModel, plan_reply

pytestmark = pytest.mark.integration

ACCEPTED = {"action": "accept", "content": {"note": "checked"}}


def write_plan(path: Path, line: str) -> str:
    return plan_reply("execute", [cmd("append_then_ask", path=str(path), line=line)])


def loop_with(toolset: MCPToolset, *plans: Any, **options: Any) -> Any:
    planner = ScriptedChatModel([*plans, plan_reply("response")])
    answer = ScriptedChatModel(["done"])
    return create_tool_loop(planner, [toolset], models=ModelOptions(answer_model=answer), **options)


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


async def test_an_interrupt_answers_the_call_in_flight(tmp_path: Path, run_loop: Any) -> None:
    target = tmp_path / "log.txt"
    with MCPToolset({"asks": own_server("asks_after_writing")}) as toolset:
        graph = loop_with(toolset, write_plan(target, "one"), checkpointer=InMemorySaver())
        thread = {"configurable": {"thread_id": f"in-place-{run_loop.entry}"}}
        paused = await run_loop(graph, {"user_input": "write one line"}, thread)
        (question,) = paused["__interrupt__"]
        assert question.value["type"] == ELICITATION_INTERRUPT
        assert question.value["tool"] == "append_then_ask"
        assert question.value["requested_schema"]["properties"]["priority"]["default"] == 3
        assert lines(target) == ["one"]  # the write ran before the question

        out = await run_loop(graph, Command(resume=ACCEPTED), thread)
    (record,) = out["tool_logs"]
    assert record["success"], record
    answered = json.loads(record["result"])
    # accepted, with the schema's default for the field the person left out (SEP-1034)
    assert answered == {"action": "accept", "content": {"note": "checked", "priority": 3}}
    assert lines(target) == ["one"]  # answered in place: the call was not sent again


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_handler_answers_the_call_in_flight(
    tmp_path: Path, run_loop: Any, kind: str
) -> None:
    asked: list[dict[str, Any]] = []

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        asked.append(request)
        return ACCEPTED

    async def answer_async(request: dict[str, Any]) -> dict[str, Any]:
        return answer(request)

    target = tmp_path / "log.txt"
    handler = answer if kind == "sync" else answer_async
    with MCPToolset(
        {"asks": own_server("asks_after_writing")}, elicitation_handler=handler
    ) as toolset:
        graph = loop_with(toolset, write_plan(target, "one"))  # no checkpointer needed
        out = await run_loop(graph, {"user_input": "write one line"})
    (record,) = out["tool_logs"]
    assert record["success"], record
    assert json.loads(record["result"])["content"] == {"note": "checked", "priority": 3}
    assert lines(target) == ["one"]
    (request,) = asked
    assert request["type"] == ELICITATION_INTERRUPT and request["server"] == "asks"
    assert request["message"] == "Wrote 'one'. Any note to keep with it?"


async def test_a_failing_handler_answers_cancel(tmp_path: Path) -> None:
    def broken(request: dict[str, Any]) -> Any:
        raise RuntimeError("no person here")

    target = tmp_path / "log.txt"
    with MCPToolset(
        {"asks": own_server("asks_after_writing")}, elicitation_handler=broken
    ) as toolset:
        out = await loop_with(toolset, write_plan(target, "one")).ainvoke({"user_input": "go"})
    (record,) = out["tool_logs"]
    assert json.loads(record["result"]) == {"action": "cancel", "content": None}
    assert lines(target) == ["one"]


async def test_a_resume_without_the_call_in_flight_is_unknown_outcome(
    tmp_path: Path, run_loop: Any
) -> None:
    target = tmp_path / "log.txt"
    saver = InMemorySaver()
    thread = {"configurable": {"thread_id": f"lost-{run_loop.entry}"}}
    first = MCPToolset({"asks": own_server("asks_after_writing")})
    with first:
        graph = loop_with(first, write_plan(target, "one"), checkpointer=saver)
        paused = await run_loop(graph, {"user_input": "write one line"}, thread)
        assert paused["__interrupt__"]
    # the process that held the call is gone: a new toolset and loop on the same thread
    with MCPToolset({"asks": own_server("asks_after_writing")}) as second:
        graph = loop_with(second, checkpointer=saver)
        out = await run_loop(graph, Command(resume=ACCEPTED), thread)
    (record,) = out["tool_logs"]
    assert record["success"] is False and record["error_type"] == "unknown_outcome", record
    assert "not sent again" in record["error"]
    assert lines(target) == ["one"]


async def test_a_direct_call_is_answered_by_the_handler(tmp_path: Path) -> None:
    target = tmp_path / "log.txt"
    with MCPToolset(
        {"asks": own_server("asks_after_writing")}, elicitation_handler=lambda request: "accept"
    ) as toolset:
        result = await toolset.call("asks", "append_then_ask", {"path": str(target), "line": "a"})
    assert json.loads(result) == {"action": "accept", "content": {"priority": 3}}
    assert lines(target) == ["a"]


async def test_a_pause_longer_than_the_wait_is_answered_cancel(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    target = tmp_path / "log.txt"
    thread = {"configurable": {"thread_id": "too-late"}}
    config = {"asks": own_server("asks_after_writing")}
    with MCPToolset(config, elicitation_wait_s=0.5) as toolset:
        graph = loop_with(toolset, write_plan(target, "one"), checkpointer=InMemorySaver())
        assert (await graph.ainvoke({"user_input": "write"}, thread))["__interrupt__"]
        await asyncio.sleep(1.5)
        out = await graph.ainvoke(Command(resume=ACCEPTED), thread)
    (record,) = out["tool_logs"]
    assert record["error_type"] == "unknown_outcome", record
    assert lines(target) == ["one"]
    assert "waited 0.5s for its run to resume" in caplog.text


# -- concurrent runs on one session ----------------------------------------------------------


@pytest.fixture(params=["streamable http", "stdio"])
def asking_server(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """The server's config entry: over HTTP, or over stdio echoing the progress token."""
    if request.param == "stdio":
        yield own_server("asks_after_writing", "--echo-progress-token")
        return
    port = free_port()
    command = [SERVER_PYTHON, str(OWN_SERVERS / "asks_after_writing.py"), "--port", str(port)]
    with serving(command, port, "HTTP MCP server"):
        yield {"url": f"http://127.0.0.1:{port}/mcp"}


def two_writers(toolset: MCPToolset, folder: Path, **options: Any) -> Any:
    """A loop whose first two plans (of two runs) write "one" and "two", one file each."""
    planner = ScriptedChatModel(
        [
            write_plan(folder / "one.txt", "one"),
            write_plan(folder / "two.txt", "two"),
            plan_reply("response"),
            plan_reply("response"),
        ]
    )
    answer = ScriptedChatModel(["done", "done"])
    return create_tool_loop(planner, [toolset], models=ModelOptions(answer_model=answer), **options)


def question_of(record: dict[str, Any]) -> str:
    return f"Wrote {record['kwargs']['line']!r}. Any note to keep with it?"


async def test_concurrent_runs_each_answer_their_own_question(
    asking_server: dict[str, Any], tmp_path: Path, run_loop: Any
) -> None:
    asked: list[dict[str, Any]] = []
    both_asked = threading.Barrier(2, timeout=60)

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        asked.append(request)
        both_asked.wait()  # both calls wait for their answer on the one session
        return {"action": "accept", "content": {"note": f"for {request['call_id']}"}}

    with MCPToolset({"asks": asking_server}, elicitation_handler=answer) as toolset:
        graph = two_writers(toolset, tmp_path)
        runs = await asyncio.gather(
            run_loop(graph, {"user_input": "write one"}),
            run_loop(graph, {"user_input": "write two"}),
        )
        assert toolset.sessions_opened()["asks"] == 1
    assert len(asked) == 2
    for out in runs:
        (record,) = out["tool_logs"]
        answered = json.loads(record["result"])  # what the server got back for its call
        note = f"for {record['call_id']}"
        assert answered == {"action": "accept", "content": {"note": note, "priority": 3}}
        (request,) = [q for q in asked if q["call_id"] == record["call_id"]]
        assert request["message"] == question_of(record)
    assert lines(tmp_path / "one.txt") == ["one"] and lines(tmp_path / "two.txt") == ["two"]


async def test_concurrent_runs_each_pause_on_their_own_question(
    asking_server: dict[str, Any], tmp_path: Path, run_loop: Any
) -> None:
    threads = [{"configurable": {"thread_id": f"{n}-{run_loop.entry}"}} for n in ("a", "b")]
    with MCPToolset({"asks": asking_server}) as toolset:
        graph = two_writers(toolset, tmp_path, checkpointer=InMemorySaver())
        paused = await asyncio.gather(
            *(run_loop(graph, {"user_input": "write"}, thread) for thread in threads)
        )
        questions = [out["__interrupt__"][0].value for out in paused]
        replies = [
            {"action": "accept", "content": {"note": f"answer {n}"}} for n in range(len(threads))
        ]
        outs = await asyncio.gather(
            *(
                run_loop(graph, Command(resume=reply), thread)
                for reply, thread in zip(replies, threads, strict=True)
            )
        )
    for question, reply, out in zip(questions, replies, outs, strict=True):
        (record,) = out["tool_logs"]
        assert question["call_id"] == record["call_id"]
        assert question["message"] == question_of(record)  # the question of its own call
        answered = json.loads(record["result"])  # each answer reached the call it was for
        assert answered == {"action": "accept", "content": {**reply["content"], "priority": 3}}
    assert lines(tmp_path / "one.txt") == ["one"] and lines(tmp_path / "two.txt") == ["two"]
