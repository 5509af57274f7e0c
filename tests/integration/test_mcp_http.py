"""An MCP server over streamable HTTP (a real server process on a loopback port)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from agentloop import create_tool_loop
from agentloop.testing import ScriptedChatModel, plan_reply

pytestmark = pytest.mark.integration

SERVE = """
import sys
from agentloop.servers.calculator import mcp
mcp.settings.host = "127.0.0.1"
mcp.settings.port = int(sys.argv[1])
mcp.run(transport="streamable-http")
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def http_server() -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-c", SERVE, str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert process.poll() is None, "the HTTP MCP server exited"
            time.sleep(0.2)
        else:
            pytest.fail("the HTTP MCP server did not start")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=30)


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
        planner, [], answer_model=ScriptedChatModel(["42"]), mcp_servers=config
    )
    out = await graph.ainvoke({"user_input": "6*7?"})
    good, bad = out["tool_logs"]
    assert good["success"] and good["result"]["result"] == 42
    assert bad["success"] is False and bad["error"]
    assert out["answer"] == "42"
