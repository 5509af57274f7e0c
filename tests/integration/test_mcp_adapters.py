"""langchain-mcp-adapters beside agentloop (the `adapters` extra, mcp 1.x): its connection
dicts configure an `MCPToolset` as they are, and its tools run in a loop with the policy
their MCP annotations give."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from third_party import cmd

from agentloop import ModelOptions, create_tool_loop
from agentloop.governance.policy import resolve_policy
from agentloop.mcp import MCPToolset, mcp_tool_annotations
from agentloop.testing import ScriptedChatModel, plan_reply

pytestmark = pytest.mark.integration

CONNECTIONS: dict[str, Any] = {
    "calculator": {
        "transport": "stdio",
        "command": sys.executable,
        "args": ["-m", "agentloop.cli.servers.calculator"],
    }
}
"""A `MultiServerMCPClient` connection dict, as an app of the adapters has it."""


def loop_with(tools: list[Any]) -> tuple[Any, ScriptedChatModel]:
    planner = ScriptedChatModel(
        [plan_reply("execute", [cmd("calculate", expression="6*7")]), plan_reply("response")]
    )
    answer = ModelOptions(answer_model=ScriptedChatModel(["42"]))
    return create_tool_loop(planner, tools, models=answer), planner


async def test_the_adapters_tools_run_in_a_loop_with_their_annotations_policy(
    run_loop: Any,
) -> None:
    client_module = pytest.importorskip("langchain_mcp_adapters.client")
    tools = await client_module.MultiServerMCPClient(CONNECTIONS).get_tools()
    (calculate,) = tools
    assert mcp_tool_annotations(calculate)["readOnlyHint"] is True
    assert resolve_policy(calculate).read_only
    graph, _ = loop_with(tools)
    out = await run_loop(graph, {"user_input": "6*7?"})
    (record,) = out["tool_logs"]
    assert record["success"] and "42" in str(record["result"]), record


async def test_an_adapters_connection_dict_configures_a_toolset(run_loop: Any) -> None:
    with MCPToolset(CONNECTIONS) as toolset:
        graph, _ = loop_with([toolset])
        out = await run_loop(graph, {"user_input": "6*7?"})
    (record,) = out["tool_logs"]
    assert record["result"] == {"expression": "6*7", "result": 42}


async def test_an_adapters_tool_error_is_a_failed_call(run_loop: Any) -> None:
    """The adapters return an MCP `isError` result as a `ToolMessage` with status `error`."""
    client_module = pytest.importorskip("langchain_mcp_adapters.client")
    tools = await client_module.MultiServerMCPClient(CONNECTIONS).get_tools()
    planner = ScriptedChatModel(
        [plan_reply("execute", [cmd("calculate", expression="1/0")]), plan_reply("response")]
    )
    answer = ModelOptions(answer_model=ScriptedChatModel(["It cannot be divided by zero."]))
    out = await run_loop(create_tool_loop(planner, tools, models=answer), {"user_input": "1/0?"})
    (record,) = out["tool_logs"]
    assert (record["status"], record["error_type"]) == ("failed", "internal_error"), record
    assert "division by zero" in record["error"]
    (result,) = [m for m in out["messages"] if m.type == "tool"]
    assert result.status == "error"
    assert out["answer"] == "It cannot be divided by zero."
