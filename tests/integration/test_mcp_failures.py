"""MCP servers that fail: nothing leaked, the reason kept and shown, failures fast.

Each server is a real process: this suite's small servers (`servers/`) that die at
start, write garbage to stdout, or exit mid-call.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from processes import child_pids
from third_party import own_server

from agentloop import create_tool_loop
from agentloop.errors import ConfigurationError, MCPTransportError
from agentloop.mcp import MCPToolset
from agentloop.options import GovernanceOptions
from agentloop.testing import ScriptedChatModel
from agentloop.tools.policy import ToolPolicy

pytestmark = pytest.mark.integration

SERVERS = str(Path(__file__).resolve().parent / "servers")


def own_processes() -> list[int]:
    """Live children of this test process running one of this suite's servers."""
    return child_pids(SERVERS)


# -- nothing leaked ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "options", "error"),
    [
        pytest.param(
            {"plain": "plain", "late": "wakes_late:required"},
            {},
            MCPTransportError,
            id="a required server fails",
        ),
        pytest.param(
            {"one": "plain", "two": "plain"}, {}, ConfigurationError, id="duplicate tool names"
        ),
        pytest.param(
            {"plain": "plain"},
            {"governance": GovernanceOptions(policies={"nowhere": ToolPolicy(read_only=True)})},
            ConfigurationError,
            id="a policy for no tool",
        ),
    ],
)
def test_three_failed_builds_leave_no_process(
    tmp_path: Path, config: dict[str, str], options: dict[str, Any], error: type[Exception]
) -> None:
    servers = {}
    for name, entry in config.items():
        script, _, flag = entry.partition(":")
        args = [str(tmp_path / "never")] if script == "wakes_late" else []
        servers[name] = own_server(script, *args, required=flag == "required")
    for _ in range(3):
        with pytest.raises(error):
            create_tool_loop(ScriptedChatModel([]), [], mcp_servers=servers, **options)
    assert own_processes() == []


def test_a_failed_build_with_a_given_toolset_stops_what_it_started(tmp_path: Path) -> None:
    config = {"plain": own_server("plain"), "again": own_server("plain")}
    with MCPToolset(config) as toolset:
        for _ in range(3):
            with pytest.raises(ConfigurationError, match="both offer a tool"):
                create_tool_loop(ScriptedChatModel([]), [], mcp_servers=toolset)
            assert own_processes() == []
    assert own_processes() == []

