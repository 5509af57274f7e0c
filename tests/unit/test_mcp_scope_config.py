"""MCP config: the `thread` session scope and `send_owner`."""

from __future__ import annotations

import pytest

from agentloop import ConfigurationError
from agentloop.cli.servers import bundled_servers_config
from agentloop.mcp.config import load_mcp_config


def test_thread_scope_and_send_owner_are_read() -> None:
    (spec,) = load_mcp_config(
        {"mcpServers": {"s": {"command": "srv", "scope": "thread", "send_owner": True}}}
    )
    assert spec.scope == "thread" and spec.send_owner is True
    (default,) = load_mcp_config({"mcpServers": {"s": {"command": "srv"}}})
    assert default.scope == "toolset" and default.send_owner is False


def test_an_unknown_scope_names_the_three() -> None:
    with pytest.raises(ConfigurationError, match="'toolset', 'thread' or 'run'"):
        load_mcp_config({"mcpServers": {"s": {"command": "srv", "scope": "user"}}})


def test_only_the_bundled_notes_server_receives_the_owner() -> None:
    specs = {spec.name: spec for spec in load_mcp_config(bundled_servers_config("n.jsonl"))}
    assert {name for name, spec in specs.items() if spec.send_owner} == {"notes"}
