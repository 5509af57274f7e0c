"""Real MCP servers whose secrets reach the logs: at startup, in their URL. None shows."""

from __future__ import annotations

import base64
import logging
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from processes import free_port, serving

from agentloop import MCPToolset, ModelOptions, create_tool_loop, install_log_redaction
from agentloop.redaction import REDACTED
from agentloop.servers import bundled_servers_config
from agentloop.testing import ScriptedChatModel, plan_reply

TOKEN = "tok-leaky-5f4e3d2c1b0a"

LEAKY_SERVER = (
    "import base64, os, runpy, sys\n"
    "token = os.environ['API_TOKEN']\n"
    "print('leaky server starting with API_TOKEN=' + token, file=sys.stderr, flush=True)\n"
    "print('LEAKY ' + token.upper(), file=sys.stderr, flush=True)\n"
    "print('leaky b64 ' + base64.b64encode(token.encode()).decode(), file=sys.stderr, flush=True)\n"
    "sys.argv = ['calculator']\n"
    "runpy.run_module('agentloop.servers.calculator', run_name='__main__')\n"
)


def leaky_config(tmp_path: Path) -> dict[str, Any]:
    calculator = bundled_servers_config(tmp_path / "notes.jsonl")["mcpServers"]["calculator"]
    return {
        "mcpServers": {
            "leaky": {
                "command": sys.executable,
                "args": ["-c", LEAKY_SERVER],
                "env": {**calculator["env"], "API_TOKEN": TOKEN},
            }
        }
    }


async def test_a_server_printing_its_env_at_startup_logs_no_secret(
    run_loop: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    command = {"tool_name": "calculate", "tool_kwargs": {"expression": "2+2"}}
    toolset = MCPToolset(leaky_config(tmp_path))
    install_log_redaction(toolset.redact)  # before its server starts and logs
    graph = create_tool_loop(
        ScriptedChatModel([plan_reply("execute", [command]), plan_reply("response")]),
        tools=[toolset],
        models=ModelOptions(answer_model=ScriptedChatModel(["ok"], repeat_last=True)),
    )
    out = await run_loop(graph, {"user_input": "2+2"})
    assert out["tool_logs"][0]["success"] is True
    deadline = time.monotonic() + 10
    while caplog.text.count("leaky") < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    lines = [r.getMessage() for r in caplog.records if "leaky" in r.getMessage().lower()]
    assert len(lines) == 3, lines
    assert all(REDACTED in line for line in lines), lines
    encoded = base64.b64encode(TOKEN.encode()).decode()
    for form in (TOKEN, TOKEN.upper(), encoded[2:-2]):
        assert form not in caplog.text


PATH_TOKEN = "pathtok-0a1b2c3d4e5f"
QUERY_TOKEN = "querytok-6a7b8c9d0e1f"

SERVE_UNDER_SECRET_PATH = f"""
import sys
from agentloop.servers.calculator import mcp
mcp.settings.host = "127.0.0.1"
mcp.settings.port = int(sys.argv[1])
mcp.settings.streamable_http_path = "/t/{PATH_TOKEN}/mcp"
mcp.run(transport="streamable-http")
"""


@pytest.fixture
def secret_url() -> Iterator[str]:
    port = free_port()
    with serving(
        [sys.executable, "-c", SERVE_UNDER_SECRET_PATH, str(port)], port, "HTTP MCP server"
    ):
        yield f"http://127.0.0.1:{port}/t/{PATH_TOKEN}/mcp?key={QUERY_TOKEN}"


async def test_a_server_url_path_and_query_never_reach_the_logs(
    run_loop: Any, secret_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    command = {"tool_name": "calculate", "tool_kwargs": {"expression": "6*7"}}
    toolset = MCPToolset({"mcpServers": {"remote": {"url": secret_url}}})
    install_log_redaction(toolset.redact)  # before its server is reached
    graph = create_tool_loop(
        ScriptedChatModel([plan_reply("execute", [command]), plan_reply("response")]),
        tools=[toolset],
        models=ModelOptions(answer_model=ScriptedChatModel(["ok"], repeat_last=True)),
    )
    out = await run_loop(graph, {"user_input": "6*7"})
    assert out["tool_logs"][0]["result"]["result"] == 42
    requests = [r.getMessage() for r in caplog.records if r.name.startswith("httpx")]
    assert requests, "the MCP SDK's HTTP client logs each request"
    assert all(REDACTED in line for line in requests)
    assert PATH_TOKEN not in caplog.text and QUERY_TOKEN not in caplog.text
