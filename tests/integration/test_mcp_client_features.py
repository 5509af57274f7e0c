"""The client side of MCP against real node servers (server-everything, memory, filesystem).

Progress, sampling, elicitation, media, structured content, resources, errors, tools
that need tasks, roots, and a server killed in the middle of a call.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from processes import child_pids
from third_party import (
    cmd,
    everything_server,
    filesystem_server,
    memory_server,
    prompt_tools,
)

from agentloop import ModelOptions, create_tool_loop
from agentloop.mcp import ELICITATION_INTERRUPT, MCPToolset
from agentloop.testing import ScriptedChatModel, plan_reply

pytestmark = pytest.mark.integration

TINY_IMAGE_PREFIX = "iVBORw0KGgo"  # every PNG's base64 starts so


@pytest.fixture(scope="module")
def everything() -> Any:
    """One server-everything for the module's tests (its default config)."""
    with MCPToolset({"everything": everything_server()}) as toolset:
        yield toolset


def loop_with(
    toolset: MCPToolset, *plans: Any, answer_model: Any = None, **options: Any
) -> tuple[Any, ScriptedChatModel]:
    planner = ScriptedChatModel([*plans, plan_reply("response")])
    graph = create_tool_loop(
        planner,
        [toolset],
        models=ModelOptions(answer_model=answer_model or ScriptedChatModel(["done"])),
        **options,
    )
    return graph, planner


# -- progress ----------------------------------------------------------------------------------


@pytest.mark.parametrize("entry", ["stream", "astream"])
async def test_progress_notifications_become_events(everything: MCPToolset, entry: str) -> None:
    graph, _ = loop_with(
        everything,
        plan_reply("execute", [cmd("trigger-long-running-operation", duration=1, steps=3)]),
    )
    payload = {"user_input": "run the long operation"}
    if entry == "stream":
        chunks = await asyncio.to_thread(lambda: list(graph.stream(payload, stream_mode="custom")))
    else:
        chunks = [chunk async for chunk in graph.astream(payload, stream_mode="custom")]
    progress = [c for c in chunks if c["type"] == "tool_progress"]
    assert [(p["progress"], p["total"]) for p in progress] == [(1, 3), (2, 3), (3, 3)]
    assert {p["tool_name"] for p in progress} == {"trigger-long-running-operation"}
    assert all(p["call_id"] and p["server"] == "everything" for p in progress)


# -- sampling ----------------------------------------------------------------------------------


async def test_sampling_is_answered_by_the_loops_model() -> None:
    planner = ScriptedChatModel(
        [
            plan_reply("execute", [cmd("trigger-sampling-request", prompt="Say hi", maxTokens=20)]),
            "Hi from the loop's model",  # the sampling request, made during the call
            plan_reply("response"),
        ]
    )
    toolset = MCPToolset({"everything": everything_server(sampling=True)})
    with toolset:
        graph = create_tool_loop(
            planner, [toolset], models=ModelOptions(answer_model=ScriptedChatModel(["done"]))
        )
        assert toolset.model is None  # the loop's model reaches the call, not the toolset
        out = await graph.ainvoke({"user_input": "sample"})
    (record,) = out["tool_logs"]
    assert record["success"], record
    assert "Hi from the loop's model" in record["result"]
    sampled = planner.requests[1]
    assert "Say hi" in str(sampled[-1].content)
    assert sampled[0].content == "You are a helpful test server."


def test_sampling_is_off_unless_the_config_allows_it() -> None:
    with MCPToolset({"everything": everything_server()}) as toolset:
        names = {t.name for t in toolset.tools}
    # the server only offers the tool to clients that declare sampling
    assert "trigger-sampling-request" not in names
    assert "trigger-elicitation-request" in names  # elicitation is on by default


# -- elicitation -------------------------------------------------------------------------------


async def test_an_elicitation_is_an_interrupt_a_person_answers(
    everything: MCPToolset, run_loop: Any
) -> None:
    graph, _ = loop_with(
        everything,
        plan_reply("execute", [cmd("trigger-elicitation-request")]),
        checkpointer=InMemorySaver(),
    )
    thread = {"configurable": {"thread_id": f"elicit-{run_loop.entry}"}}
    paused = await run_loop(graph, {"user_input": "ask me"}, thread)
    (question,) = paused["__interrupt__"]
    assert question.value["type"] == ELICITATION_INTERRUPT
    assert question.value["tool"] == "trigger-elicitation-request"
    assert question.value["message"].startswith("Please provide inputs")
    assert "name" in question.value["requested_schema"]["properties"]

    answer = {"action": "accept", "content": {"name": "Ada", "check": True}}
    out = await run_loop(graph, Command(resume=answer), thread)
    (record,) = out["tool_logs"]
    assert record["success"], record
    assert "User provided the requested information" in record["result"]
    assert "Ada" in record["result"]


async def test_an_elicitation_declined_or_answered_badly(everything: MCPToolset) -> None:
    graph, _ = loop_with(
        everything,
        plan_reply(
            "execute",
            [cmd("trigger-elicitation-request", "first"), cmd("trigger-elicitation-request")],
        ),
        checkpointer=InMemorySaver(),
    )
    thread = {"configurable": {"thread_id": "decline"}}
    await graph.ainvoke({"user_input": "ask me twice"}, thread)
    await graph.ainvoke(Command(resume={"action": "decline"}), thread)
    out = await graph.ainvoke(Command(resume="maybe later"), thread)
    declined, bad = out["tool_logs"]
    assert declined["success"] and "declined" in declined["result"]
    assert bad["success"] is False and bad["error_type"] == "invalid_arguments"
    assert "maybe later" in bad["error"]


async def test_without_a_checkpointer_an_elicitation_is_declined(
    everything: MCPToolset, caplog: pytest.LogCaptureFixture
) -> None:
    graph, _ = loop_with(everything, plan_reply("execute", [cmd("trigger-elicitation-request")]))
    with caplog.at_level(logging.WARNING, logger="agentloop"):
        out = await graph.ainvoke({"user_input": "ask me"})
    assert "declined" in out["tool_logs"][0]["result"]
    assert "cannot pause for an answer" in caplog.text


# -- content -----------------------------------------------------------------------------------


async def test_images_reach_a_multimodal_answer_model_but_no_text_prompt(
    everything: MCPToolset,
) -> None:
    seeing = ScriptedChatModel(["a tiny image"], profile={"image_inputs": True})
    graph, planner = loop_with(
        everything, plan_reply("execute", [cmd("get-tiny-image")]), answer_model=seeing
    )
    out = await graph.ainvoke({"user_input": "show me the image"})
    (record,) = out["tool_logs"]
    (attachment,) = record["attachments"]
    assert attachment["kind"] == "image" and attachment["mime_type"] == "image/png"
    assert attachment["data"].startswith(TINY_IMAGE_PREFIX)
    assert f"attachment {attachment['handle']}" in record["result"]
    assert TINY_IMAGE_PREFIX not in str(record["result"])
    assert all(TINY_IMAGE_PREFIX not in str(m.content) for m in planner.requests[-1])
    (request,) = seeing.requests
    text, label, image = request[-1].content
    assert TINY_IMAGE_PREFIX not in text["text"] and attachment["handle"] in text["text"]
    assert label["text"] == f"Attachment {attachment['handle']}:"
    assert image == {"type": "image", "base64": attachment["data"], "mime_type": "image/png"}

    # an answer model that cannot see images gets the placeholder only
    blind = ScriptedChatModel(["no image"])
    graph, _ = loop_with(
        everything, plan_reply("execute", [cmd("get-tiny-image")]), answer_model=blind
    )
    await graph.ainvoke({"user_input": "show me the image"})
    assert isinstance(blind.requests[0][-1].content, str)
    assert TINY_IMAGE_PREFIX not in blind.requests[0][-1].content


async def test_structured_content_is_the_result(everything: MCPToolset) -> None:
    graph, _ = loop_with(
        everything, plan_reply("execute", [cmd("get-structured-content", location="Chicago")])
    )
    out = await graph.ainvoke({"user_input": "weather in Chicago"})
    result = out["tool_logs"][0]["result"]
    assert set(result) == {"temperature", "conditions", "humidity"}


async def test_resources_are_summarized_and_readable(everything: MCPToolset) -> None:
    assert "read_resource" in {t.name for t in everything.tools}
    graph, planner = loop_with(
        everything,
        plan_reply(
            "execute",
            [
                cmd("get-resource-links", count=2),
                cmd("get-resource-reference", resourceType="Text", resourceId=2),
            ],
        ),
        plan_reply(
            "execute", [cmd("read_resource", "read it", uri="demo://resource/dynamic/text/2")]
        ),
    )
    out = await graph.ainvoke({"user_input": "resources"})
    links, embedded, read = out["tool_logs"]
    assert "demo://resource/dynamic/text/2" in links["result"]
    assert "read it with read_resource" in links["result"]
    assert "[resource demo://resource/dynamic/text/2 (text/plain)]" in embedded["result"]
    assert read["success"] and read["result"].startswith("Resource 2")
    assert prompt_tools(planner.requests[0])["read_resource"]["side_effects"] is False


async def test_a_tool_error_is_a_failed_record_not_retried(everything: MCPToolset) -> None:
    graph, _ = loop_with(
        everything, plan_reply("execute", [cmd("get-resource-reference", resourceId=0)])
    )
    out = await graph.ainvoke({"user_input": "resource 0"})
    (record,) = out["tool_logs"]
    assert record["success"] is False and record["attempts"] == 1
    assert "Invalid resourceId" in record["error"]


def test_a_tool_that_needs_tasks_is_left_out(caplog: pytest.LogCaptureFixture) -> None:
    with (
        caplog.at_level(logging.INFO, logger="agentloop"),
        MCPToolset({"everything": everything_server()}) as toolset,
    ):
        names = {t.name for t in toolset.tools}
    assert "simulate-research-query" not in names and "echo" in names
    assert "'simulate-research-query' is left out: it can only run as a task" in caplog.text


# -- a server killed in the middle of a call ----------------------------------------------------


async def test_a_server_killed_mid_call_fails_the_call_and_comes_back() -> None:
    killed: list[int] = []

    @tool
    async def check_kill_everything(after_s: float) -> str:
        """Kill the server-everything process after a while (test helper)."""
        await asyncio.sleep(after_s)
        pids = child_pids("server-everything")
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        killed.extend(pids)
        return f"killed {len(pids)}"

    # it must run beside the long call (a tool nothing classifies runs alone)
    check_kill_everything.metadata = {"agentloop": {"concurrency_safe": True}}
    with MCPToolset({"everything": everything_server()}) as toolset:
        planner = ScriptedChatModel(
            [
                plan_reply(
                    "execute",
                    [
                        cmd("trigger-long-running-operation", duration=3, steps=3),
                        cmd("check_kill_everything", after_s=1.0),
                    ],
                ),
                plan_reply("execute", [cmd("echo", message="back")]),
                plan_reply("response"),
            ]
        )
        graph = create_tool_loop(
            planner,
            [check_kill_everything, toolset],
            models=ModelOptions(answer_model=ScriptedChatModel(["ok"])),
        )
        out = await graph.ainvoke({"user_input": "chaos"})
        long_op, kill, echo = out["tool_logs"]
        assert kill["success"] and killed
        # read-only: retried on a new session once the first one broke
        assert long_op["success"] and long_op["attempts"] == 2, long_op
        assert echo["success"] and "back" in echo["result"]
        assert toolset.sessions_opened() == {"everything": 2}


# -- memory and filesystem ---------------------------------------------------------------------


async def test_a_write_and_a_search_in_one_round_run_in_order(
    tmp_path: Path, run_loop: Any
) -> None:
    with MCPToolset({"memory": memory_server(tmp_path / "memory.jsonl")}) as toolset:
        graph, _ = loop_with(
            toolset,
            plan_reply(
                "execute",
                [
                    cmd(
                        "create_entities",
                        entities=[{"name": "Ada", "entityType": "person", "observations": []}],
                    ),
                    cmd(
                        "add_observations",
                        observations=[{"entityName": "Ada", "contents": ["born 1815"]}],
                    ),
                    cmd("search_nodes", query="1815"),
                ],
            ),
        )
        out = await run_loop(graph, {"user_input": "remember Ada"})
    created, observed, found = out["tool_logs"]
    assert created["success"] and observed["success"], out["tool_logs"]
    assert [entity["name"] for entity in found["result"]["entities"]] == ["Ada"]


async def test_a_read_after_a_delete_runs_again(tmp_path: Path, run_loop: Any) -> None:
    ada = [{"name": "Ada", "entityType": "person", "observations": ["born 1815"]}]
    with MCPToolset({"memory": memory_server(tmp_path / "memory.jsonl")}) as toolset:
        graph, _ = loop_with(
            toolset,
            plan_reply("execute", [cmd("create_entities", entities=ada)]),
            plan_reply("execute", [cmd("read_graph")]),
            plan_reply("execute", [cmd("delete_entities", entityNames=["Ada"])]),
            plan_reply("execute", [cmd("read_graph")]),
        )
        out = await run_loop(graph, {"user_input": "check, delete, check"})
    _, before, deleted, after = out["tool_logs"]
    assert deleted["success"], out["tool_logs"]
    assert [entity["name"] for entity in before["result"]["entities"]] == ["Ada"]
    assert after["success"] and not after.get("duplicate")
    assert after["result"]["entities"] == []  # not the graph from before the delete
    assert after["after_write"] == "delete_entities"


async def test_roots_are_declared_from_config(tmp_path: Path) -> None:
    root = tmp_path / "workspace"
    root.mkdir()
    (root / "hello.txt").write_text("hello from the root\n")
    config = {"mcpServers": {"files": filesystem_server(roots=[str(root)])}}
    with MCPToolset(config) as toolset:
        graph, _ = loop_with(
            toolset,
            plan_reply(
                "execute",
                [
                    cmd("list_allowed_directories"),
                    cmd("read_text_file", path=str(root / "hello.txt")),
                ],
            ),
        )
        out = await graph.ainvoke({"user_input": "read hello.txt"})
    allowed, read = out["tool_logs"]
    assert str(root) in str(allowed["result"])
    assert read["success"] and "hello from the root" in str(read["result"])
