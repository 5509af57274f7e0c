"""Integration test setup: every MCP toolset a test opened is closed when it ends."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agentloop.mcp import toolset_sessions


@pytest.fixture(autouse=True)
def _close_toolsets() -> Iterator[None]:
    """A toolset a test left open keeps its sessions until process exit; not here."""
    before = set(toolset_sessions._live)
    yield
    for toolset in set(toolset_sessions._live) - before:
        toolset.close()
