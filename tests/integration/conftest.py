"""Integration test setup: every MCP toolset a test opened is closed when it ends."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agentloop.mcp import toolset as toolset_module


@pytest.fixture(autouse=True)
def _close_toolsets() -> Iterator[None]:
    """A loop built from an MCP config keeps its sessions until process exit; not here."""
    before = set(toolset_module._live_toolsets)
    yield
    for toolset in set(toolset_module._live_toolsets) - before:
        toolset.close()
