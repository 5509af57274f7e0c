"""Integration test setup: every MCP toolset a test opened is closed when it ends."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from agentloop.mcp import MCPToolset


@pytest.fixture(autouse=True)
def _close_toolsets(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A toolset a test left open keeps its sessions until it is collected; not here."""
    opened: list[MCPToolset] = []
    start = MCPToolset.__init__

    def recorded(self: MCPToolset, *args: Any, **kwargs: Any) -> None:
        start(self, *args, **kwargs)
        opened.append(self)

    monkeypatch.setattr(MCPToolset, "__init__", recorded)
    yield
    for toolset in opened:
        toolset.close()
