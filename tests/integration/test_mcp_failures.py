"""MCP servers that fail: nothing leaked, the reason kept and shown, failures fast.

Each server is a real process: this suite's small servers (`servers/`) that die at
start, write garbage to stdout, or exit mid-call.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from processes import child_pids
from third_party import cmd, own_server

from agentloop import ModelOptions, create_tool_loop
from agentloop.errors import ConfigurationError, MCPTransportError
from agentloop.governance.policy import ToolPolicy
from agentloop.mcp import MCPToolset
from agentloop.options import GovernanceOptions
from agentloop.testing import ScriptedChatModel, plan_reply

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
            create_tool_loop(ScriptedChatModel([]), [MCPToolset(servers)], **options)
    assert own_processes() == []


def test_a_failed_build_with_a_given_toolset_stops_what_it_started(tmp_path: Path) -> None:
    config = {"plain": own_server("plain"), "again": own_server("plain")}
    with MCPToolset(config) as toolset:
        for _ in range(3):
            with pytest.raises(ConfigurationError, match="both offer a tool"):
                create_tool_loop(ScriptedChatModel([]), [toolset])
            assert own_processes() == []
    assert own_processes() == []


# -- failures explained ------------------------------------------------------------------------

MISSING_SETTING = "missing setting FIELD_API_TOKEN"


def test_a_required_server_that_exits_says_why(tmp_path: Path) -> None:
    config = {"field": own_server("dies_saying", MISSING_SETTING, required=True)}
    with pytest.raises(MCPTransportError) as raised:
        create_tool_loop(ScriptedChatModel([]), [MCPToolset(config)])
    message = str(raised.value)
    assert "'field' could not be started" in message
    assert MISSING_SETTING in message
    assert own_processes() == []


def test_stderr_in_reasons_is_redacted_and_bounded() -> None:
    secret = "s3cr3t-value-0123456789"
    lines = [f"line {n}" for n in range(30)]
    config = {
        "field": own_server(
            "dies_saying",
            "\n".join([*lines, f"token={secret}", "x" * 5000]),
            env={"FIELD_API_TOKEN": secret},
        )
    }
    with MCPToolset(config) as toolset:
        assert toolset.tools == []
        reason = toolset.unavailable["field"]
    assert secret not in reason and "[REDACTED]" in reason
    assert "line 29" in reason and "line 0\n" not in reason
    assert len(reason) < 5000


async def test_the_unavailable_event_and_the_log_carry_the_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = {"field": own_server("dies_saying", MISSING_SETTING), "plain": own_server("plain")}
    with MCPToolset(config) as toolset, caplog.at_level(logging.WARNING, logger="agentloop"):
        graph = create_tool_loop(
            ScriptedChatModel([plan_reply("response")]),
            [toolset],
            models=ModelOptions(answer_model=ScriptedChatModel(["none"])),
        )
        events = [
            chunk
            async for chunk in graph.astream({"user_input": "hi"}, stream_mode="custom")
            if chunk["type"] == "mcp_server_unavailable"
        ]
    (event,) = events
    assert event["server"] == "field" and MISSING_SETTING in event["reason"]
    warnings = [r for r in caplog.records if "'field'" in r.getMessage()]
    assert len(warnings) == 1 and MISSING_SETTING in warnings[0].getMessage()


async def test_the_record_of_a_call_whose_server_died_quotes_its_stderr(
    tmp_path: Path,
) -> None:
    with MCPToolset({"plain": own_server("plain")}) as toolset:
        graph = create_tool_loop(
            ScriptedChatModel(
                [
                    plan_reply("execute", [cmd("explode", marker_file=str(tmp_path / "m"))]),
                    plan_reply("response"),
                ]
            ),
            [toolset],
            models=ModelOptions(answer_model=ScriptedChatModel(["done"])),
        )
        out = await graph.ainvoke({"user_input": "explode"})
    (record,) = out["tool_logs"]
    assert record["success"] is False
    assert "out of coffee" in record["error"], record


async def test_a_write_whose_server_died_mid_call_is_unknown_and_not_sent_again(
    tmp_path: Path, run_loop: Any
) -> None:
    marker = tmp_path / "m"
    with MCPToolset({"plain": own_server("plain")}) as toolset:
        graph = create_tool_loop(
            ScriptedChatModel(
                [
                    plan_reply("execute", [cmd("explode", marker_file=str(marker))]),
                    plan_reply("response"),
                ]
            ),
            [toolset],
            models=ModelOptions(answer_model=ScriptedChatModel(["done"])),
            checkpointer=InMemorySaver(),
        )
        thread = {"configurable": {"thread_id": f"died-{run_loop.entry}"}}
        out = await run_loop(graph, {"user_input": "explode"}, thread)
        assert await toolset.call("plain", "toggle", {}) == 1  # a new process serves
    (record,) = out["tool_logs"]
    assert record["error_type"] == "unknown_outcome" and record["status"] == "unknown", record
    assert "out of coffee" in record["error"]
    assert "must not be repeated blindly" in record["error"]
    assert marker.read_text(encoding="utf-8").splitlines() == ["called"]  # it ran once


@pytest.mark.parametrize("serve", [False, True], ids=["says nothing more", "then serves"])
def test_text_on_stdout_fails_fast_and_is_quoted(
    serve: bool, caplog: pytest.LogCaptureFixture
) -> None:
    banner = "Welcome to the weather server!"
    config = {"noisy": own_server("garbage", banner, *(["serve"] if serve else []))}
    # a start-up timeout no test outlasts: only a start that fails fast ends at all (the
    # suite's per-test timeout bounds the hang of one that does not)
    with (
        MCPToolset(config, startup_timeout_s=3600) as toolset,
        caplog.at_level(logging.WARNING, logger="agentloop"),
    ):
        names = [tool.name for tool in toolset.tools]
        reason = toolset.unavailable.get("noisy", "")
    if serve:  # a banner before the answer is tolerated, and reported once
        assert names == ["hello"]
        (warning,) = [r.getMessage() for r in caplog.records if banner in r.getMessage()]
        assert "not an MCP message" in warning
    else:
        assert names == []
        assert "not an MCP message" in reason and repr(banner) in reason
    assert "Failed to parse JSONRPC message" not in caplog.text


def test_a_failing_server_is_logged_once_though_tried_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = {"field": own_server("dies_saying", MISSING_SETTING)}

    def said() -> list[logging.LogRecord]:
        return [r for r in caplog.records if r.getMessage() == MISSING_SETTING]

    with (
        caplog.at_level(logging.DEBUG, logger="agentloop"),
        MCPToolset(config, retry_interval_s=0.1) as toolset,
    ):
        assert toolset.tools == []
        deadline = time.monotonic() + 30
        while len(said()) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)  # the start, its second try, then tries in the background
    assert len(said()) >= 4
    assert [r.levelno for r in said()].count(logging.INFO) == 1
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and MISSING_SETTING in warnings[0].getMessage()
