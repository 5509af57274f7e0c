"""Small MCP servers shipped with agentloop, each runnable over stdio.

- `docs` (`python -m agentloop.cli.servers.docsearch`): search and read the bundled
  documents.
- `calculator` (`python -m agentloop.cli.servers.calculator`): safe arithmetic.
- `notes` (`python -m agentloop.cli.servers.notes`): a JSON-lines notes store whose
  file is set by `AGENTLOOP_NOTES_FILE`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from agentloop.durability.identity import OWNER_META_KEY

__all__ = ["DEFAULT_NOTES_FILE", "NOTES_FILE_ENV", "OWNER_META_KEY", "bundled_servers_config"]

NOTES_FILE_ENV = "AGENTLOOP_NOTES_FILE"
"""The environment variable that tells the notes server where its file is (its `--file`
argument wins; the config passes the path as an argument, since the loop redacts the
values of a server's `env` as secrets)."""

DEFAULT_NOTES_FILE = "agentloop-notes.jsonl"
"""The notes file, relative to the server's working directory, when none is set."""

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])
"""The folder that holds the `agentloop` package, so a child interpreter can import it."""


def _python_path() -> str:
    inherited = os.environ.get("PYTHONPATH")
    return os.pathsep.join([_PACKAGE_ROOT, inherited] if inherited else [_PACKAGE_ROOT])


def _server(module: str, *args: str) -> dict[str, Any]:
    return {
        "command": sys.executable,
        "args": ["-m", f"agentloop.cli.servers.{module}", *args],
        "env": {"PYTHONPATH": _python_path()},
    }


def bundled_servers_config(notes_file: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Describe the bundled servers in the `mcpServers` shape `load_mcp_config` reads.

    Each server runs with the current interpreter, and `PYTHONPATH` points at
    this copy of agentloop, so the servers work from a source checkout too.

    Args:
        notes_file: The notes server's JSON-lines file; `agentloop-notes.jsonl`
            in the current directory when omitted. Made absolute here so the
            server's working directory does not matter.

    Returns:
        `{"mcpServers": {"docs": ..., "calculator": ..., "notes": ...}}`.
    """
    notes_path = os.path.abspath(notes_file if notes_file is not None else DEFAULT_NOTES_FILE)
    return {
        "mcpServers": {
            "docs": _server("docsearch"),
            "calculator": _server("calculator"),
            "notes": {**_server("notes", "--file", notes_path), "send_owner": True},
        }
    }
