from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from agentloop.cli.servers import NOTES_FILE_ENV, bundled_servers_config
from agentloop.errors import ConfigurationError
from agentloop.mcp import INHERITED_ENV, MCPServerSpec, load_mcp_config

CONFIG: dict[str, Any] = {
    "mcpServers": {
        "calc": {
            "command": "python",
            "args": ["-m", "agentloop.cli.servers.calculator"],
            "env": {"MODE": "test", "PORT": 8080},
            "allow": ["calculate"],
        },
        "remote": {
            "url": "https://example.invalid/mcp",
            "headers": {"Authorization": "Bearer x"},
            "denyTools": ["delete_all"],
        },
        "events": {"url": "http://localhost:9000/sse", "transport": "sse"},
        "off": {"command": "python", "disabled": True},
    }
}


def by_name(specs: list[MCPServerSpec]) -> dict[str, MCPServerSpec]:
    return {spec.name: spec for spec in specs}


def test_dict_config_builds_connections() -> None:
    specs = by_name(load_mcp_config(CONFIG))

    assert list(specs) == ["calc", "remote", "events"]  # "off" is disabled
    calc = specs["calc"].connection
    assert calc["transport"] == "stdio"
    assert calc["command"] == "python"
    assert calc["args"] == ["-m", "agentloop.cli.servers.calculator"]
    assert calc["env"]["MODE"] == "test"
    assert calc["env"]["PORT"] == "8080"
    assert specs["remote"].connection == {
        "transport": "streamable_http",
        "url": "https://example.invalid/mcp",
        "headers": {"Authorization": "Bearer x"},
    }
    assert specs["events"].connection == {"transport": "sse", "url": "http://localhost:9000/sse"}


def test_allow_and_deny_lists() -> None:
    specs = by_name(load_mcp_config(CONFIG))

    assert specs["calc"].allow == frozenset({"calculate"})
    assert specs["calc"].deny == frozenset()
    assert specs["remote"].allow is None
    assert specs["remote"].deny == frozenset({"delete_all"})
    aliases = load_mcp_config({"s": {"command": "x", "include": ["a"], "exclude": ["b"]}})
    assert (aliases[0].allow, aliases[0].deny) == (frozenset({"a"}), frozenset({"b"}))


def test_bare_mapping_and_http_transport_aliases() -> None:
    for transport in ("http", "streamable_http", "streamable-http"):
        (spec,) = load_mcp_config({"s": {"url": "http://localhost/mcp", "transport": transport}})
        assert spec.connection["transport"] == "streamable_http"


def test_json_file(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(CONFIG), encoding="utf-8")

    assert [s.name for s in load_mcp_config(path)] == ["calc", "remote", "events"]
    assert [s.name for s in load_mcp_config(str(path))] == ["calc", "remote", "events"]


def test_yaml_file_with_relative_cwd(tmp_path: Path) -> None:
    path = tmp_path / "mcp.yaml"
    path.write_text(
        "mcpServers:\n"
        "  notes:\n"
        "    command: python\n"
        "    args: [-m, agentloop.cli.servers.notes]\n"
        "    cwd: work\n"
        "    deny: [save_note]\n",
        encoding="utf-8",
    )

    (spec,) = load_mcp_config(path)

    assert spec.name == "notes"
    assert spec.connection["cwd"] == str(tmp_path / "work")
    assert spec.deny == frozenset({"save_note"})


def test_stdio_env_does_not_leak_parent_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTLOOP_TEST_SECRET", "hunter2")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")

    (spec,) = load_mcp_config({"s": {"command": "python", "env": {"PATH": "/opt/bin"}}})

    env = spec.connection["env"]
    assert "AGENTLOOP_TEST_SECRET" not in env
    assert "hunter2" not in env.values()
    assert env["PATH"] == "/opt/bin"  # the server's own env wins
    assert set(env) <= set(INHERITED_ENV)


def test_bundled_servers_config_loads(tmp_path: Path) -> None:
    specs = by_name(load_mcp_config(bundled_servers_config(tmp_path / "notes.jsonl")))

    assert list(specs) == ["docs", "calculator", "notes"]
    assert specs["docs"].connection["command"] == sys.executable
    assert specs["docs"].connection["args"] == ["-m", "agentloop.cli.servers.docsearch"]
    assert specs["notes"].connection["args"][-2:] == ["--file", str(tmp_path / "notes.jsonl")]
    assert NOTES_FILE_ENV not in specs["notes"].connection["env"]


@pytest.mark.parametrize(
    ("content", "suffix", "expected"),
    [
        ("{not json", ".json", "invalid JSON at line 1"),
        ("a: [1, 2", ".yaml", "invalid YAML"),
        ("[1, 2]", ".json", "expected a mapping of MCP servers"),
        ("{}", ".toml", "must be a .json, .yaml or .yml file"),
    ],
)
def test_bad_files(tmp_path: Path, content: str, suffix: str, expected: str) -> None:
    path = tmp_path / f"mcp{suffix}"
    path.write_text(content, encoding="utf-8")

    with pytest.raises(ConfigurationError, match=expected) as caught:
        load_mcp_config(path)

    assert str(path) in str(caught.value)
    assert "\n" not in str(caught.value)


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.json"
    with pytest.raises(ConfigurationError, match="MCP config file not found") as caught:
        load_mcp_config(path)
    assert str(caught.value).startswith(str(path))


@pytest.mark.parametrize(
    ("server", "expected"),
    [
        ({"args": ["x"]}, "server 'bad': needs either 'command' \\(stdio\\) or 'url' \\(HTTP\\)"),
        ({"command": "x", "url": "http://h/mcp"}, "either 'command' \\(stdio\\) or 'url'"),
        ({"command": ["python"]}, "'command' must be a non-empty string"),
        ({"command": "x", "args": "-m x"}, "'args' must be a list of strings"),
        ({"command": "x", "env": {"A": ["b"]}}, "'env' must map names to strings"),
        ({"command": "x", "disabled": "yes"}, "'disabled' must be true or false"),
        ({"command": "x", "allow": "calculate"}, "'allow' must be a list of tool names"),
        ({"command": "x", "allow": ["a"], "allowTools": ["b"]}, "give only one of"),
        ({"url": "ftp://h/x"}, "'url' must be an http:// or https:// URL"),
        ({"url": "http://h/x", "transport": "carrier-pigeon"}, "unknown transport"),
        ({"command": "x", "transport": "sse"}, "needs a 'url'"),
        ("python -m x", "expected a mapping, got str"),
    ],
)
def test_bad_servers(server: Any, expected: str) -> None:
    with pytest.raises(ConfigurationError, match=f"^MCP config: (server 'bad': )?.*{expected}"):
        load_mcp_config({"mcpServers": {"bad": server}})


def test_mcp_servers_must_be_a_mapping() -> None:
    with pytest.raises(ConfigurationError, match="'mcpServers' must be a mapping"):
        load_mcp_config({"mcpServers": ["a"]})


def test_log_level() -> None:
    (spec,) = load_mcp_config({"s": {"command": "x", "log_level": "warning"}})
    assert spec.log_level == "warning"
    (default,) = load_mcp_config({"s": {"command": "x"}})
    assert default.log_level is None
    with pytest.raises(ConfigurationError, match="'log_level' must be one of debug, info"):
        load_mcp_config({"s": {"command": "x", "log_level": "loud"}})


def test_tool_lists_in_a_tools_mapping_with_patterns() -> None:
    (spec,) = load_mcp_config(
        {"s": {"command": "x", "tools": {"include": ["git_*", "echo"], "exclude": ["git_push"]}}}
    )
    assert (spec.allow, spec.deny) == (frozenset({"git_*", "echo"}), frozenset({"git_push"}))


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ({"command": "x", "tools": ["a"]}, "'tools' must be a mapping"),
        ({"command": "x", "tools": {"only": ["a"]}}, "'tools' must be a mapping"),
        ({"command": "x", "tools": {"include": ["a"]}, "deny": ["b"]}, "not both"),
        ({"command": "x", "tools": {"include": "a*"}}, "list of tool names or patterns"),
    ],
)
def test_a_bad_tools_mapping_is_refused(entry: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigurationError, match=problem):
        load_mcp_config({"s": entry})
