"""The update each node returns: only keys of `LoopState`, each with a value its channel takes.

mypy checks every node's return value against its update type. A key without a reducer
has exactly the state's type; a key with one takes the state's type, what its reducer
accepts (`round_state` takes a `NewRound`), or `Overwrite(...)` (which resets it).
A unit test holds these types to `LoopState`, so a changed state field fails it.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AnyMessage
from langgraph.types import Overwrite
from typing_extensions import TypedDict

from agentloop.state import (
    NewRound,
    PlanDecision,
    RunBook,
    RunStatus,
    ToolExecutionRecord,
)

__all__ = [
    "AnswerUpdate",
    "CallToolUpdate",
    "CollectUpdate",
    "ExecuteUpdate",
    "PlanUpdate",
    "PrepareUpdate",
    "ReleaseSessionsUpdate",
]


class PrepareUpdate(TypedDict, total=False):
    """`prepare`: the run's request, identity and limits, and a fresh start of the rest."""

    user_input: str
    user_extra_requirement: str
    messages: list[AnyMessage]
    round_state: Overwrite
    decision: PlanDecision
    answer: str
    action_results: dict[str, Any]
    tool_logs: Overwrite
    rollbacks: list[dict[str, Any]]
    usage: Overwrite
    status: RunStatus
    status_reason: str
    round_calls: Overwrite
    call_results: Overwrite
    idempotency_key: str | None
    run_book: RunBook


class ExecuteUpdate(TypedDict, total=False):
    """`execute`: the round's prepared calls and the plan's tool calls.

    Also the records and `ToolMessage`s of the calls settled without running.
    """

    round_calls: Overwrite
    call_results: Overwrite
    messages: list[AnyMessage]


class CallToolUpdate(TypedDict, total=False):
    """`call_tool`: the record of one call, keyed by its call id, and its `ToolMessage`."""

    call_results: dict[str, ToolExecutionRecord]
    messages: list[AnyMessage]


class CollectUpdate(TypedDict, total=False):
    """The end of a round, which `plan` writes first.

    The round recorded (or rolled back), its calls cleared.
    """

    round_calls: Overwrite
    call_results: Overwrite
    tool_logs: list[ToolExecutionRecord]
    usage: dict[str, dict[str, Any]]
    round_state: NewRound
    rollbacks: list[dict[str, Any]]
    run_book: RunBook
    answer: str
    """Set when the round's calls were all of `return_direct` tools: the run ends with it."""
    status: RunStatus


class PlanUpdate(TypedDict, total=False):
    """`plan`: the end of the last round, then the decision and the planner's calls.

    Also the planner's tokens and the records of calls it dropped; with `after_model`
    hooks, the round's `AIMessage` (`agentloop.middleware.transcript`). In a run without a
    checkpointer, the first `plan` starts the run too (`PrepareUpdate`'s keys).
    """

    # the run's start, in a run without a checkpointer (as `PrepareUpdate`)
    user_input: str
    user_extra_requirement: str
    action_results: dict[str, Any]
    idempotency_key: str | None
    # the run's bookkeeping: at its start, the end of a round, the plan
    run_book: RunBook
    # the end of the last round (as `CollectUpdate`)
    round_calls: Overwrite
    call_results: Overwrite
    tool_logs: list[ToolExecutionRecord] | Overwrite
    usage: dict[str, dict[str, Any]] | Overwrite
    round_state: NewRound | Overwrite
    rollbacks: list[dict[str, Any]]
    answer: str
    status: RunStatus
    # the plan
    decision: PlanDecision
    status_reason: str
    messages: list[AnyMessage]


class AnswerUpdate(TypedDict, total=False):
    """`answer`: the answer, its message and tokens, and how the run ended."""

    answer: str
    action_results: dict[str, Any]
    messages: list[AnyMessage]
    run_book: RunBook
    status: RunStatus
    status_reason: str
    usage: dict[str, dict[str, Any]]
    structured_response: Any


class ReleaseSessionsUpdate(TypedDict, total=False):
    """`release_sessions`: nothing (it closes the run's own MCP sessions)."""
