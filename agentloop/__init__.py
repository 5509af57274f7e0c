"""agentloop: a declarative, debuggable plan / execute tool loop for LangGraph.

Build a loop with `create_tool_loop(model, tools)`; declare how each tool may be called
with `ToolPolicy`; replay scripted models with `agentloop.testing.ScriptedChatModel`.
"""

from agentloop.answer import to_action_results
from agentloop.errors import (
    AgentLoopError,
    ConfigurationError,
    ModelBehaviorError,
    PromptTemplateError,
    ToolCallError,
)
from agentloop.events import EVENT_TYPES
from agentloop.graph import create_tool_loop
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
from agentloop.tools.cache import ResultCache
from agentloop.tools.interceptors import AuditLog, Interceptor, ToolCall
from agentloop.tools.outcome import ToolOutcome
from agentloop.tools.policy import ToolPolicy, ToolRetry

__all__ = [
    # building a loop
    "create_tool_loop",
    "LoopContext",
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
