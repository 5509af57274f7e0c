"""A real MCP server that prints its secrets at startup: no log line shows them."""

from __future__ import annotations

import base64
import logging
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agentloop import create_tool_loop
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
    graph = create_tool_loop(
        ScriptedChatModel([plan_reply("execute", [command]), plan_reply("response")]),
        mcp_servers=leaky_config(tmp_path),
        answer_model=ScriptedChatModel(["ok"], repeat_last=True),
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
