"""The loop against the bundled MCP servers, as real subprocesses."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool
from processes import server_pids

from agentloop import ModelOptions, create_tool_loop
from agentloop.cli.servers import bundled_servers_config
from agentloop.mcp import MCPToolset
from agentloop.testing import ScriptedChatModel, plan_reply

pytestmark = pytest.mark.integration


def cmd(tool_name: str, purpose: str = "", **kwargs: Any) -> dict[str, Any]:
    return {"purpose": purpose, "tool_name": tool_name, "tool_kwargs": kwargs}


@pytest.fixture
def toolset(tmp_path: Path) -> Any:
    servers = MCPToolset(bundled_servers_config(tmp_path / "notes.jsonl"))
    yield servers
    servers.close()


async def test_loop_runs_mcp_tools_with_one_session_per_server(
    toolset: MCPToolset, tmp_path: Path
) -> None:
    planner = ScriptedChatModel(
        [
            plan_reply(
                "execute",
                [
                    cmd("search_documents", "find trams", query="Lumen Bay tram network"),
                    cmd("calculate", "km per line", expression="42 / 4"),
                    cmd("calculate", "stops per line", expression="61 / 4"),
                ],
            ),
            plan_reply(
                "execute",
                [
                    cmd("save_note", "note", title="trams", body="42 km, 4 lines"),
                    cmd("calculate", "double", expression="2 * 21"),
                ],
            ),
            plan_reply("response"),
        ]
    )
    graph = create_tool_loop(
        planner, [toolset], models=ModelOptions(answer_model=ScriptedChatModel(["ok"]))
    )
    out = await graph.ainvoke({"user_input": "trams?"})
    records = out["tool_logs"]
    assert all(r["success"] for r in records), records
    assert records[0]["result"][0]["doc_id"] == "lumen-bay-tram-network"
    assert records[1]["result"]["result"] == 10.5
    assert records[4]["result"]["result"] == 42
    # the planner was told about the MCP tools and their schemas
    prompt = "\n".join(str(message.content) for message in planner.requests[0])
    assert "search_documents" in prompt and "expression" in prompt
    # one note written, with the stable call key as idempotency key
    lines = (tmp_path / "notes.jsonl").read_text().splitlines()
    assert len(lines) == 1
    assert json.loads(lines[0])["idempotency_key"] == records[3]["call_key"]
    # the run's sessions are closed once it answered
    for _ in range(100):
        if not toolset.open_runs:
            break
        await asyncio.sleep(0.05)
    assert toolset.open_runs == []


async def test_mcp_annotations_set_policies(toolset: MCPToolset) -> None:
    by_name = {t.name: t for t in toolset.tools}
    assert by_name["search_documents"].metadata["readOnlyHint"] is True
    assert by_name["save_note"].metadata["destructiveHint"] is True
    from agentloop.governance.policy import resolve_policy

    assert resolve_policy(by_name["search_documents"]).concurrency_safe
    save = resolve_policy(by_name["save_note"])
    assert not save.concurrency_safe and not save.idempotent


async def test_tool_errors_and_a_killed_server(toolset: MCPToolset) -> None:
    killed: list[int] = []

    @tool
    def check_kill_calculator(reason: str) -> str:
        """Kill the calculator server process (test helper)."""
        pids = server_pids("calculator")
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        killed.extend(pids)
        return f"killed {len(pids)}"

    planner = ScriptedChatModel(
        [
            plan_reply(
                "execute", [cmd("calculate", expression="1 +"), cmd("calculate", expression="3*3")]
            ),
            plan_reply("execute", [cmd("check_kill_calculator", reason="chaos")]),
            plan_reply("execute", [cmd("calculate", expression="5*5")]),
            plan_reply("response"),
        ]
    )
    graph = create_tool_loop(
        planner,
        [check_kill_calculator, toolset],
        models=ModelOptions(answer_model=ScriptedChatModel(["ok"])),
    )
    out = await graph.ainvoke({"user_input": "math"})
    bad, good, kill, after = out["tool_logs"]
    assert bad["success"] is False and bad["error"]
    assert "expression" in bad["error"].lower() or "syntax" in bad["error"].lower()
    assert good["result"]["result"] == 9
    assert kill["success"] is True
    assert killed, "the calculator server was running during the run"
    assert after["success"] is True, after
    assert after["result"]["result"] == 25
    assert not set(server_pids("calculator")) & set(killed)


async def test_mcp_config_file_and_allow_list(tmp_path: Path) -> None:
    config = bundled_servers_config(tmp_path / "notes.jsonl")
    config["mcpServers"]["notes"]["allow"] = ["list_notes"]
    del config["mcpServers"]["docs"]
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(config))
    planner = ScriptedChatModel(
        [
            plan_reply("execute", [cmd("list_notes"), cmd("save_note", title="x", body="y")]),
            plan_reply("response"),
        ]
    )
    graph = create_tool_loop(
        planner,
        [MCPToolset(str(path))],
        models=ModelOptions(answer_model=ScriptedChatModel(["ok"])),
    )
    out = await graph.ainvoke({"user_input": "notes"})
    listed, denied = out["tool_logs"]
    assert listed["success"] is True and listed["result"] == []
    assert denied["error_type"] == "tool_not_found"
    assert not (tmp_path / "notes.jsonl").exists() or (tmp_path / "notes.jsonl").read_text() == ""


def test_sync_invoke_with_mcp_tools(toolset: MCPToolset) -> None:
    planner = ScriptedChatModel(
        [plan_reply("execute", [cmd("calculate", expression="6*7")]), plan_reply("response")]
    )
    graph = create_tool_loop(
        planner, [toolset], models=ModelOptions(answer_model=ScriptedChatModel(["ok"]))
    )
    out = graph.invoke({"user_input": "6*7"})
    assert out["tool_logs"][0]["result"]["result"] == 42
