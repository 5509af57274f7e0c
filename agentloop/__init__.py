"""agentloop: a declarative, debuggable plan / execute tool loop for LangGraph.

Build a loop with `create_tool_loop(model, tools)`; group what you change in
`GovernanceOptions`, `PlanningOptions` and `ModelOptions`; declare how each tool may be
called with `ToolPolicy`; replay scripted models with `agentloop.testing.ScriptedChatModel`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentloop.durability import SideEffectLedger
    from agentloop.errors import (
        AgentLoopError,
        ConfigurationError,
        ErrorType,
        IdempotencyConflictError,
        InputError,
        MCPToolError,
        MCPTransportError,
        ModelBehaviorError,
        ModelCallTimeout,
        PromptTemplateError,
        ToolCallError,
    )
    from agentloop.governance.cache import ResultCache
    from agentloop.governance.outcome import ToolOutcome
    from agentloop.governance.policy import ToolPolicy, ToolRetry
    from agentloop.governance.threads import ToolThreads
    from agentloop.graph import create_tool_loop
    from agentloop.mcp import MCPToolset
    from agentloop.models.calls import ModelRetryPolicy
    from agentloop.models.stream import ModelLimits
    from agentloop.nodes.answer_call import to_action_results
    from agentloop.observability.audit import AuditLog
    from agentloop.observability.display import report, show_graph
    from agentloop.observability.events import EVENT_TYPES
    from agentloop.observability.redaction import LogRedaction, Redactor, install_log_redaction
    from agentloop.options import GovernanceOptions, ModelOptions, PlanningOptions
    from agentloop.planning import normalize_plan_decision
    from agentloop.settings import LoopContext
    from agentloop.state import (
        CallStatus,
        InputState,
        LoopState,
        OutputState,
        PlanDecision,
        RoundState,
        RunStatus,
        ToolCommand,
        ToolExecutionRecord,
        call_status,
    )
    from agentloop.subagents import as_tool

__all__ = [
    # building a loop
    "create_tool_loop",
    "GovernanceOptions",
    "LoopContext",
    "MCPToolset",
    "ModelLimits",
    "ModelOptions",
    "ModelRetryPolicy",
    "PlanningOptions",
    "as_tool",
    # tool governance
    "AuditLog",
    "LogRedaction",
    "Redactor",
    "ResultCache",
    "install_log_redaction",
    "SideEffectLedger",
    "ToolOutcome",
    "ToolPolicy",
    "ToolRetry",
    "ToolThreads",
    # state, records and events
    "CallStatus",
    "EVENT_TYPES",
    "ErrorType",
    "InputState",
    "LoopState",
    "OutputState",
    "PlanDecision",
    "RoundState",
    "RunStatus",
    "ToolCommand",
    "ToolExecutionRecord",
    "call_status",
    # showing a loop and a run
    "report",
    "show_graph",
    # pure helpers
    "normalize_plan_decision",
    "to_action_results",
    # errors
    "AgentLoopError",
    "ConfigurationError",
    "IdempotencyConflictError",
    "InputError",
    "MCPToolError",
    "MCPTransportError",
    "ModelBehaviorError",
    "ModelCallTimeout",
    "PromptTemplateError",
    "ToolCallError",
]

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "create_tool_loop": "agentloop.graph",
    "GovernanceOptions": "agentloop.options",
    "ModelOptions": "agentloop.options",
    "PlanningOptions": "agentloop.options",
    "LoopContext": "agentloop.settings",
    "MCPToolset": "agentloop.mcp",
    "ModelLimits": "agentloop.models.stream",
    "ModelRetryPolicy": "agentloop.models.calls",
    "as_tool": "agentloop.subagents",
    "report": "agentloop.observability.display",
    "show_graph": "agentloop.observability.display",
    "AuditLog": "agentloop.observability.audit",
    "Redactor": "agentloop.observability.redaction",
    "LogRedaction": "agentloop.observability.redaction",
    "install_log_redaction": "agentloop.observability.redaction",
    "ResultCache": "agentloop.governance.cache",
    "SideEffectLedger": "agentloop.durability",
    "ToolOutcome": "agentloop.governance.outcome",
    "ToolPolicy": "agentloop.governance.policy",
    "ToolRetry": "agentloop.governance.policy",
    "ToolThreads": "agentloop.governance.threads",
    "EVENT_TYPES": "agentloop.observability.events",
    "ErrorType": "agentloop.errors",
    "InputState": "agentloop.state",
    "LoopState": "agentloop.state",
    "OutputState": "agentloop.state",
    "PlanDecision": "agentloop.state",
    "RoundState": "agentloop.state",
    "RunStatus": "agentloop.state",
    "ToolCommand": "agentloop.state",
    "ToolExecutionRecord": "agentloop.state",
    "CallStatus": "agentloop.state",
    "call_status": "agentloop.state",
    "normalize_plan_decision": "agentloop.planning",
    "to_action_results": "agentloop.nodes.answer_call",
    "AgentLoopError": "agentloop.errors",
    "ConfigurationError": "agentloop.errors",
    "IdempotencyConflictError": "agentloop.errors",
    "InputError": "agentloop.errors",
    "MCPToolError": "agentloop.errors",
    "MCPTransportError": "agentloop.errors",
    "ModelBehaviorError": "agentloop.errors",
    "ModelCallTimeout": "agentloop.errors",
    "PromptTemplateError": "agentloop.errors",
    "ToolCallError": "agentloop.errors",
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
