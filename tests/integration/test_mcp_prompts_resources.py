"""Prompts, resources, completion and logging of MCP servers, against server-everything
(and this suite's `logs` server for the log level)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from third_party import cmd, everything_server, own_server, prompt_tools

from agentloop import ModelOptions, create_tool_loop
from agentloop.errors import MCPToolError
from agentloop.mcp import MCPToolset
from agentloop.testing import ScriptedChatModel, plan_reply

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def everything() -> Any:
    with MCPToolset({"everything": everything_server()}) as toolset:
        yield toolset


async def test_prompts_are_listed_and_come_back_as_messages(everything: MCPToolset) -> None:
    prompts = await everything.list_prompts()
    names = [prompt.name for prompt in prompts["everything"]]
    assert {"simple-prompt", "args-prompt"} <= set(names)
    messages = await everything.get_prompt("everything", "args-prompt", {"city": "Lisbon"})
    assert all(isinstance(message, HumanMessage) for message in messages)
    assert "Lisbon" in messages[0].text
    with pytest.raises(MCPToolError):
        await everything.get_prompt("everything", "no-such-prompt")


async def test_completion_of_a_prompt_argument(everything: MCPToolset) -> None:
    completion = await everything.complete(
        "everything", "department", "Eng", prompt="completable-prompt"
    )
    assert completion.values and all(v.startswith("Eng") for v in completion.values)
    with pytest.raises(ValueError, match="either"):
        await everything.complete("everything", "department", "E")


async def test_the_planner_sees_resources_and_reads_one_it_was_never_shown(
    everything: MCPToolset,
) -> None:
    uri = "demo://resource/static/document/architecture.md"
    planner = ScriptedChatModel(
        [plan_reply("execute", [cmd("read_resource", uri=uri)]), plan_reply("response")]
    )
    graph = create_tool_loop(
        planner,
        [everything],
        models=ModelOptions(answer_model=ScriptedChatModel(["read"])),
    )
    out = await graph.ainvoke({"user_input": "the architecture document"})
    description = prompt_tools(planner.requests[0])["read_resource"]["description"]
    assert uri in description
    assert "demo://resource/dynamic/text/{resourceId} (everything, template)" in description
    assert len(description) < 6000  # bounded
    (record,) = out["tool_logs"]
    assert record["success"], record
    # the same list for the next run: the planner's prompt prefix does not move
    version = everything.version
    again = ScriptedChatModel([plan_reply("response")])
    create_tool_loop(
        again, [everything], models=ModelOptions(answer_model=ScriptedChatModel(["-"]))
    )
    assert everything.version == version


async def test_server_log_messages_become_mcp_log_events_at_the_configured_level() -> None:
    config = {"logs": own_server("logs", log_level="error")}
    with MCPToolset(config) as toolset:
        graph = create_tool_loop(
            ScriptedChatModel([plan_reply("execute", [cmd("chatter")]), plan_reply("response")]),
            [toolset],
            models=ModelOptions(answer_model=ScriptedChatModel(["done"])),
        )
        events = []
        async for mode, chunk in graph.astream(
            {"user_input": "chatter"}, stream_mode=["custom", "values"]
        ):
            if mode == "custom" and chunk["type"] == "mcp_log":
                events.append(chunk)
            elif mode == "values":
                out = chunk
    assert out["tool_logs"][0]["result"] == "sent 4 from error"
    assert [e["level"] for e in events] == ["error", "critical", "alert", "emergency"]
    assert events[0]["data"] == "error news" and events[0]["server"] == "logs"
    assert events[0]["tool_name"] == "chatter" and events[0]["logger"] == "chatter"


async def test_a_resource_published_during_a_run_is_listed_in_its_next_round() -> None:
    with MCPToolset({"dynamic": own_server("dynamic")}) as toolset:
        planner = ScriptedChatModel(
            [
                plan_reply("execute", [cmd("publish", name="plan", text="step one")]),
                plan_reply("execute", [cmd("read_resource", uri="memo://plan")]),
                plan_reply("response"),
            ]
        )
        graph = create_tool_loop(
            planner, [toolset], models=ModelOptions(answer_model=ScriptedChatModel(["ok"]))
        )
        out = await graph.ainvoke({"user_input": "publish and read"})
    assert "read_resource" not in prompt_tools(planner.requests[0])  # no resources yet
    listed = prompt_tools(planner.requests[1])["read_resource"]["description"]
    assert "memo://plan (dynamic) plan: memo plan" in listed
    assert [r["result"] for r in out["tool_logs"]] == ["memo://plan", "step one"]
