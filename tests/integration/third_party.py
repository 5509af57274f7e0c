"""Where the third-party and test MCP servers are, as `mcpServers` entries.

`.ci/run` installs them: mcp-server-time and mcp-server-git with the dev extras, the
node servers with `npm ci --prefix .ci/mcp-servers`. Outside CI a missing server skips
its tests; in CI it fails them.

The Python servers (the third-party ones and this suite's own, written for mcp 1.x) run
on `SERVER_PYTHON`: this interpreter, or the one `AGENTLOOP_TEST_SERVER_PYTHON` names (an
mcp 1.x environment, when the client under test runs on mcp 2.x).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
NODE_MODULES = Path(
    os.environ.get("AGENTLOOP_TEST_NODE_MODULES", ROOT / ".ci" / "mcp-servers" / "node_modules")
)
OWN_SERVERS = Path(__file__).resolve().parent / "servers"
SERVER_PYTHON = os.environ.get("AGENTLOOP_TEST_SERVER_PYTHON") or sys.executable
"""The Python that runs the test servers (and whose environment has the Python ones)."""


def _missing(what: str) -> None:
    message = f"{what} is not installed (bash .ci/run installs it)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def _python_script(name: str) -> str:
    path = Path(SERVER_PYTHON).parent / name
    if not path.exists():
        _missing(name)
    return str(path)


def _node_package(package: str) -> list[str]:
    node = shutil.which("node")
    entry = NODE_MODULES / "@modelcontextprotocol" / package / "dist" / "index.js"
    if node is None:
        _missing("node")
    if not entry.exists():
        _missing(f"@modelcontextprotocol/{package}")
    return [str(node), str(entry)]


def time_server() -> dict[str, Any]:
    """mcp-server-time, in UTC (the machine's zone would end up in a tool description)."""
    return {"command": _python_script("mcp-server-time"), "args": ["--local-timezone", "UTC"]}


def git_server() -> dict[str, Any]:
    """mcp-server-git (tools take `repo_path`)."""
    if shutil.which("git") is None:
        _missing("git")
    return {"command": _python_script("mcp-server-git")}


def everything_server(**options: Any) -> dict[str, Any]:
    """@modelcontextprotocol/server-everything over stdio."""
    command, *args = _node_package("server-everything")
    return {"command": command, "args": [*args, "stdio"], **options}


def memory_server(memory_file: Path) -> dict[str, Any]:
    """@modelcontextprotocol/server-memory, its graph in `memory_file` (absolute)."""
    command, *args = _node_package("server-memory")
    return {"command": command, "args": args, "env": {"MEMORY_FILE_PATH": str(memory_file)}}


def filesystem_server(*directories: Path, **options: Any) -> dict[str, Any]:
    """@modelcontextprotocol/server-filesystem, allowed `directories` (or its roots)."""
    command, *args = _node_package("server-filesystem")
    return {"command": command, "args": [*args, *map(str, directories)], **options}


def own_server(script: str, *args: str, **options: Any) -> dict[str, Any]:
    """One of this suite's small servers (`tests/integration/servers/<script>.py`)."""
    return {
        "command": SERVER_PYTHON,
        "args": [str(OWN_SERVERS / f"{script}.py"), *args],
        **options,
    }


def make_repo(path: Path) -> Path:
    """A git repository with one untracked file, `a.txt`."""
    path.mkdir()
    for command in (
        ["git", "init", "-q", "-b", "main"],
        ["git", "config", "user.name", "Test"],
        ["git", "config", "user.email", "test@example.com"],
    ):
        subprocess.run(command, cwd=path, check=True)
    (path / "a.txt").write_text("hello\n")
    return path


def prompt_tools(messages: Any) -> dict[str, dict[str, Any]]:
    """The tool list of a planner request (the end of its system message), by name."""
    text = str(messages[0].content)
    start = text.index("<available_tools>") + len("<available_tools>")
    listed = text[start : text.index("</available_tools>")].replace("<\\/", "</")
    return {tool["name"]: tool for tool in json.loads(listed)}


def cmd(tool_name: str, purpose: str = "", **kwargs: Any) -> dict[str, Any]:
    """One planner command."""
    return {
        "purpose": purpose or f"call {tool_name}",
        "tool_name": tool_name,
        "tool_kwargs": kwargs,
    }
