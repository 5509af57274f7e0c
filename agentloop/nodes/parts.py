"""What the nodes of one compiled loop share: settings, models, tools, retry and prices."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langgraph.runtime import Runtime

from agentloop.durability import SideEffectLedger
from agentloop.model_calls import ModelRetry
from agentloop.models import ModelProvider
from agentloop.settings import LoopSettings, RunScope
from agentloop.tools.pipeline import ToolRunner
from agentloop.tools.registry import ToolRegistry
from agentloop.usage import Prices

__all__ = ["LoopParts"]


@dataclass(frozen=True)
class LoopParts:
    """The parts of one compiled loop, built once by `create_tool_loop`."""

    settings: LoopSettings
    models: ModelProvider
    registry: ToolRegistry
    runner: ToolRunner
    model_retry: ModelRetry
    prices: Prices | None = None
    ledger: SideEffectLedger | None = None
    """A ledger given explicitly; otherwise the one that goes with the checkpointer."""

    def scope(self, runtime: Runtime[Any]) -> RunScope:
        """The scope of one node call."""
        return RunScope.of(self.settings, runtime)
