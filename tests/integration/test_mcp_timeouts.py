"""A timed-out MCP call with side effects is `unknown_outcome`: its server may complete it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from third_party import own_server

from agentloop import GovernanceOptions, ModelOptions, ToolPolicy, create_tool_loop
from agentloop.mcp import MCPToolset
from agentloop.testing import ScriptedChatModel, plan_reply

pytestmark = pytest.mark.integration


async def test_a_timed_out_mcp_write_is_an_unknown_outcome(run_loop: Any, tmp_path: Path) -> None:
    marker = tmp_path / "appended.log"
    with MCPToolset({"slow": own_server("slow_writer")}) as toolset:
        planner = ScriptedChatModel(
            [
                plan_reply(
                    "execute",
                    [
                        {
                            "tool_name": "slow_append",
                            "tool_kwargs": {"marker_file": str(marker), "seconds": 2},
                        }
                    ],
                ),
                plan_reply("response"),
            ]
        )
        graph = create_tool_loop(
            planner,
            [toolset],
            models=ModelOptions(answer_model=ScriptedChatModel(["checked"])),
            governance=GovernanceOptions(policies={"slow_append": ToolPolicy(timeout_s=0.5)}),
        )
        out = await run_loop(graph, {"user_input": "append"})
    (record,) = out["tool_logs"]
    assert record["success"] is False and record["attempts"] == 1
    assert record["error_type"] == "unknown_outcome"
    assert "its MCP server may still complete it" in record["error"]
    assert "must not be repeated blindly" in record["error"]
    assert out["answer"] == "checked"
