"""agentloop: a declarative, debuggable plan / execute tool loop for LangGraph.

Build a loop with `create_tool_loop(model, tools)`; declare how each tool may be called
with `ToolPolicy`; replay scripted models with `agentloop.testing.ScriptedChatModel`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentloop.errors import (
        AgentLoopError,
        ConfigurationError,
        ModelBehaviorError,
        PromptTemplateError,
        ToolCallError,
    )
    from agentloop.events import EVENT_TYPES
    from agentloop.graph import create_tool_loop
    from agentloop.mcp_toolset import MCPToolset
    from agentloop.model_calls import ModelRetry
    from agentloop.nodes.answer import to_action_results
    from agentloop.planning import normalize_plan_decision
    from agentloop.settings import LoopContext
    from agentloop.state import (
        InputState,
        LoopState,
        OutputState,
        PlanDecision,
        RoundState,
        ToolCommand,
        ToolExecutionRecord,
    )
    from agentloop.subagents import as_tool
    from agentloop.tools.cache import ResultCache
    from agentloop.tools.interceptors import AuditLog, Interceptor, ToolCall
    from agentloop.tools.outcome import ToolOutcome
    from agentloop.tools.policy import ToolPolicy, ToolRetry

__all__ = [
    # building a loop
    "create_tool_loop",
    "LoopContext",
    "MCPToolset",
    "ModelRetry",
    "as_tool",
    # tool governance
    "AuditLog",
    "Interceptor",
    "ResultCache",
    "ToolCall",
    "ToolOutcome",
    "ToolPolicy",
    "ToolRetry",
    # state, records and events
    "EVENT_TYPES",
    "InputState",
    "LoopState",
    "OutputState",
    "PlanDecision",
    "RoundState",
    "ToolCommand",
    "ToolExecutionRecord",
    # pure helpers
    "normalize_plan_decision",
    "to_action_results",
    # errors
    "AgentLoopError",
    "ConfigurationError",
    "ModelBehaviorError",
    "PromptTemplateError",
    "ToolCallError",
]

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "as_tool": "agentloop.subagents",
    "MCPToolset": "agentloop.mcp_toolset",
    "ModelRetry": "agentloop.model_calls",
    "to_action_results": "agentloop.nodes.answer",
    "AgentLoopError": "agentloop.errors",
    "ConfigurationError": "agentloop.errors",
    "ModelBehaviorError": "agentloop.errors",
    "PromptTemplateError": "agentloop.errors",
    "ToolCallError": "agentloop.errors",
    "EVENT_TYPES": "agentloop.events",
    "create_tool_loop": "agentloop.graph",
    "normalize_plan_decision": "agentloop.planning",
    "LoopContext": "agentloop.settings",
    "InputState": "agentloop.state",
    "LoopState": "agentloop.state",
    "OutputState": "agentloop.state",
    "PlanDecision": "agentloop.state",
    "RoundState": "agentloop.state",
    "ToolCommand": "agentloop.state",
    "ToolExecutionRecord": "agentloop.state",
    "ResultCache": "agentloop.tools.cache",
    "AuditLog": "agentloop.tools.interceptors",
    "Interceptor": "agentloop.tools.interceptors",
    "ToolCall": "agentloop.tools.interceptors",
    "ToolOutcome": "agentloop.tools.outcome",
    "ToolPolicy": "agentloop.tools.policy",
    "ToolRetry": "agentloop.tools.policy",
}
"""Where each public name lives: imported on first use, so `import agentloop` stays cheap."""


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        msg = f"module 'agentloop' has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
