"""Real MCP servers whose secrets reach the logs: at startup (their env, credentials they
print), in their URL. None shows.
"""

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
from agentloop.cli.servers import bundled_servers_config
from agentloop.observability.redaction import REDACTED
from agentloop.testing import ScriptedChatModel, plan_reply

TOKEN = "tok-leaky-5f4e3d2c1b0a"

LEAKY_SERVER = (
    "import base64, os, runpy, sys\n"
    "token = os.environ['API_TOKEN']\n"
    "print('leaky server starting with API_TOKEN=' + token, file=sys.stderr, flush=True)\n"
    "print('LEAKY ' + token.upper(), file=sys.stderr, flush=True)\n"
    "print('leaky b64 ' + base64.b64encode(token.encode()).decode(), file=sys.stderr, flush=True)\n"
    "sys.argv = ['calculator']\n"
    "runpy.run_module('agentloop.cli.servers.calculator', run_name='__main__')\n"
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


PRINTED = {
    "bare key wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY": "K7MDENG/bPxRfiCY",
    "aws_secret_access_key = N1XaKGj0osnRI9u9JLTe6T+ppRlvfwIS00tCe7mc": "ppRlvfwIS00tCe7mc",
    "stripe key sk_live_4eC39HqLyjWDarjtT1zdp7dc": "4eC39HqLyjWDarjtT1zdp7dc",
    "restricted key rk_live_ZLzkpal6VDX6rPc9FRQj5j0i0V0n7KilW2CFioQd": "ZLzkpal6VDX6rPc9FRQj",
    "storage DefaultEndpointsProtocol=https;AccountName=billing;"
    "AccountKey=uwsy+HScaGyVBfRtogaiKYexQDsHw+5m9iDDBYZYv8I4/iCo66L5Vr9YVyJg==;"
    "EndpointSuffix=core.windows.net": "uwsy+HScaGyVBfRtogaiKYexQDsHw",
    "connecting to postgres://billing:Sup3rS3cret!@db.internal:5432/app": "Sup3rS3cret!",
    'service account {"private_key_id": "6494657e373ff6c8ac4ef2c5da2870486e67f8fb"}': (
        "6494657e373ff6c8ac4ef2c5da2870486e67f8fb"
    ),
    "sendgrid 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": (
        "okxJNG6ctWjltaqa0e"
    ),
    "twilio SK3d382c8390b94d504e822334811390a4": "3d382c8390b94d504e822334811390a4",
    "npm npm_q1m4sVW5vuvRlx8HMAyB0jdIA6KVop2YqCei": "q1m4sVW5vuvRlx8HMAyB0jdIA6KVop2YqCei",
    "hugging face 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": "qBiiKnfJFTMBnIXiCWmfJkpupPJCBJonJZ",
}
"""Lines a server prints at startup (from its own files: no config knows them), each with
the part of it that must not reach the logs."""

CHATTY_SERVER = (
    "import runpy, sys\n"
    f"for line in {list(PRINTED)!r}:\n"
    "    print('chatty ' + line, file=sys.stderr, flush=True)\n"
    "sys.argv = ['calculator']\n"
    "runpy.run_module('agentloop.cli.servers.calculator', run_name='__main__')\n"
)


async def test_credentials_a_server_prints_reach_no_log_line(
    run_loop: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    calculator = bundled_servers_config(tmp_path / "notes.jsonl")["mcpServers"]["calculator"]
    server = {"command": sys.executable, "args": ["-c", CHATTY_SERVER], "env": calculator["env"]}
    toolset = MCPToolset({"mcpServers": {"chatty": server}})
    install_log_redaction(toolset.redact)  # before its server starts and logs
    command = {"tool_name": "calculate", "tool_kwargs": {"expression": "2+3"}}
    graph = create_tool_loop(
        ScriptedChatModel([plan_reply("execute", [command]), plan_reply("response")]),
        tools=[toolset],
        models=ModelOptions(answer_model=ScriptedChatModel(["ok"], repeat_last=True)),
    )
    out = await run_loop(graph, {"user_input": "2+3"})
    assert out["tool_logs"][0]["success"] is True
    deadline = time.monotonic() + 10
    while caplog.text.count("chatty ") < len(PRINTED) and time.monotonic() < deadline:
        time.sleep(0.05)
    lines = [r.getMessage() for r in caplog.records if "chatty " in r.getMessage()]
    assert len(lines) == len(PRINTED), lines
    names = {r.name for r in caplog.records if "chatty " in r.getMessage()}
    assert names == {"agentloop.mcp.server.chatty"}  # the library's own log lines
    assert all(REDACTED in line for line in lines), lines
    assert "postgres://billing:[REDACTED]@db.internal:5432/app" in caplog.text
    assert [secret for secret in PRINTED.values() if secret in caplog.text] == []


PATH_TOKEN = "pathtok-0a1b2c3d4e5f"
QUERY_TOKEN = "querytok-6a7b8c9d0e1f"

SERVE_UNDER_SECRET_PATH = f"""
import sys
from agentloop.cli.servers.calculator import mcp
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
