"""An MCP server over streamable HTTP (a real server process on a loopback port)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
from processes import free_port, serving
from third_party import SERVER_PYTHON

from agentloop import GovernanceOptions, MCPToolset, ModelOptions, create_tool_loop
from agentloop.testing import ScriptedChatModel, plan_reply

pytestmark = pytest.mark.integration

SERVE = """
import sys
from agentloop.cli.servers.calculator import mcp
mcp.settings.host = "127.0.0.1"
mcp.settings.port = int(sys.argv[1])
mcp.run(transport="streamable-http")
"""


@pytest.fixture
def http_server(http_process: tuple[str, subprocess.Popen[bytes]]) -> str:
    return http_process[0]


@pytest.fixture
def http_process() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = free_port()
    with serving([SERVER_PYTHON, "-c", SERVE, str(port)], port, "HTTP MCP server") as process:
        yield f"http://127.0.0.1:{port}/mcp", process


async def test_loop_calls_a_streamable_http_server(http_server: str) -> None:
    planner = ScriptedChatModel(
        [
            plan_reply(
                "execute",
                [
                    {"tool_name": "calculate", "tool_kwargs": {"expression": "6 * 7"}},
                    {"tool_name": "calculate", "tool_kwargs": {"expression": "1 / 0"}},
                ],
            ),
            plan_reply("response"),
        ]
    )
    config = {"mcpServers": {"remote": {"url": http_server}}}
    graph = create_tool_loop(
        planner, [MCPToolset(config)], models=ModelOptions(answer_model=ScriptedChatModel(["42"]))
    )
    out = await graph.ainvoke({"user_input": "6*7?"})
    good, bad = out["tool_logs"]
    assert good["success"] and good["result"]["result"] == 42
    assert bad["success"] is False and bad["error"]
    assert out["answer"] == "42"


async def test_a_stopped_server_fails_calls_unless_stale_results_are_allowed(
    http_process: tuple[str, subprocess.Popen[bytes]],
) -> None:
    url, process = http_process
    calc = {"tool_name": "calculate", "tool_kwargs": {"expression": "6 * 7"}}
    loops = {}
    for name, entry in (
        ("default", {"url": url}),
        ("stale", {"url": url, "policies": {"calculate": {"stale_fallback_s": 3600}}}),
    ):
        planner = ScriptedChatModel(
            [plan_reply("execute", [calc]), plan_reply("response")] * 2, keep_requests=True
        )
        graph = create_tool_loop(
            planner,
            [MCPToolset({"mcpServers": {"remote": entry}})],
            models=ModelOptions(answer_model=ScriptedChatModel(["a", "b"])),
            governance=GovernanceOptions(default_retry=None),
        )
        loops[name] = graph, planner
        first = await graph.ainvoke({"user_input": "6*7?"})
        assert first["tool_logs"][0]["result"]["result"] == 42

    process.terminate()
    process.wait(timeout=30)
    default = await loops["default"][0].ainvoke({"user_input": "6*7 again?"})
    (failed,) = default["tool_logs"]
    assert failed["success"] is False and not failed.get("stale")
    assert failed["result"] != {"result": 42}

    graph, planner = loops["stale"]
    stale = await graph.ainvoke({"user_input": "6*7 again?"})
    (record,) = stale["tool_logs"]
    assert record["success"] is False and record["stale"] is True
    assert record["result"]["result"] == 42 and record["stale_age_s"] >= 0
    assert "stale_age_s" in "\n".join(str(m.content) for m in planner.requests[-1])
