"""Progress events, written to LangGraph's `custom` stream mode as dicts with a `type`.

Each event is declared once, below, as a frozen dataclass: its `type` (the name readers
match on) and its payload fields. `EVENT_TYPES` and `EVENTS` are derived from these
declarations, emitters take only declared events (mypy checks the fields at every call
site, and an emitter refuses anything else at runtime), and the stream carries
`{"type", "loop", "ts", **payload}`. A field declared `optional()` is left out of the
payload when it is None.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar, Literal

from agentloop.observability._event_base import (
    Emit,
    HeldEvents,
    LoopEvent,
    declared_events,
    make_emitter,
    null_emit,
)
from agentloop.observability._event_base import optional as _optional

__all__ = [
    "EVENTS",
    "EVENT_TYPES",
    "AgentCompleted",
    "AgentProgress",
    "AgentStarted",
    "AnswerCompleted",
    "AnswerSpeculated",
    "AnswerStarted",
    "DurabilityWarning",
    "Emit",
    "HeldEvents",
    "LoopEvent",
    "McpLog",
    "McpServerUnavailable",
    "PlanDecided",
    "PlanReasked",
    "QueueDrained",
    "RoundCompleted",
    "RoundStarted",
    "ToolAbandoned",
    "ToolCompleted",
    "ToolDispatched",
    "ToolFailed",
    "ToolProgress",
    "ToolQueued",
    "ToolRetrying",
    "ToolRolledBack",
    "ToolStarted",
    "ToolThreadAbandoned",
    "make_emitter",
    "null_emit",
]

# -- the plan -----------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class RoundStarted(LoopEvent):
    """A round begins: the planner is asked for a plan."""

    type: ClassVar[Literal["round_started"]] = "round_started"
    round_index: int
    replan: bool
    """True when the planner is asked again after a rolled-back round."""


@dataclass(frozen=True, kw_only=True)
class PlanReasked(LoopEvent):
    """The planner's reply could not be used; it is asked again with the reason."""

    type: ClassVar[Literal["plan_reasked"]] = "plan_reasked"
    attempt: int
    reason: str


@dataclass(frozen=True, kw_only=True)
class PlanDecided(LoopEvent):
    """The plan of the round is decided: `execute` (its commands) or `response`."""

    type: ClassVar[Literal["plan_decided"]] = "plan_decided"
    next_action: str
    command_count: int
    short_circuited: bool
    chunks: int
    duration_ms: float
    parse_error: str
    reasks: int


# -- tool calls ---------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ToolQueued(LoopEvent):
    """A call of the plan is prepared and given its batch."""

    type: ClassVar[Literal["tool_queued"]] = "tool_queued"
    call_id: str
    tool_name: str
    index: int
    batch: int
    will_run: bool


@dataclass(frozen=True, kw_only=True)
class ToolDispatched(LoopEvent):
    """A read-only call started while its plan was still streaming."""

    type: ClassVar[Literal["tool_dispatched"]] = "tool_dispatched"
    call_id: str
    tool_name: str
    index: int


@dataclass(frozen=True, kw_only=True)
class ToolStarted(LoopEvent):
    """A call starts running."""

    type: ClassVar[Literal["tool_started"]] = "tool_started"
    call_id: str
    tool_name: str
    index: int
    kwargs: dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class ToolProgress(LoopEvent):
    """An MCP server reported the progress of a call."""

    type: ClassVar[Literal["tool_progress"]] = "tool_progress"
    call_id: str
    tool_name: str
    server: str
    progress: float
    total: float | None
    message: str | None


@dataclass(frozen=True, kw_only=True)
class ToolRetrying(LoopEvent):
    """A call failed and is tried again after a wait."""

    type: ClassVar[Literal["tool_retry"]] = "tool_retry"
    call_id: str
    tool_name: str
    attempt: int
    error: str
    wait_s: float


@dataclass(frozen=True, kw_only=True)
class ToolThreadAbandoned(LoopEvent):
    """A sync tool ran past its timeout; its thread is left to finish on its own."""

    type: ClassVar[Literal["tool_thread_abandoned"]] = "tool_thread_abandoned"
    call_id: str
    tool_name: str
    hung_threads: int
    cap: int


@dataclass(frozen=True, kw_only=True)
class ToolAbandoned(LoopEvent):
    """An async tool ignored its cancellation and is left to finish on its own."""

    type: ClassVar[Literal["tool_abandoned"]] = "tool_abandoned"
    call_id: str
    tool_name: str
    hung: int
    cap: int


@dataclass(frozen=True, kw_only=True)
class ToolCompleted(LoopEvent):
    """A call finished (successful or not), or its recorded outcome was replayed."""

    type: ClassVar[Literal["tool_completed"]] = "tool_completed"
    call_id: str
    tool_name: str
    index: int
    duration_ms: float
    success: bool
    attempts: int | None = _optional()
    from_cache: bool | None = _optional()
    fallback: str | None = _optional()
    replayed: bool | None = _optional()
    """True when the ledger already held the outcome (the tool did not run again)."""


@dataclass(frozen=True, kw_only=True)
class ToolFailed(LoopEvent):
    """A call failed, or was refused without running (bad call, duplicate, unknown outcome)."""

    type: ClassVar[Literal["tool_error"]] = "tool_error"
    call_id: str
    tool_name: str
    index: int
    error: str
    error_type: str
    success: bool = False
    duration_ms: float
    attempts: int | None = _optional()
    from_cache: bool | None = _optional()
    fallback: str | None = _optional()

    @classmethod
    def of(cls, completed: ToolCompleted, *, error: str, error_type: str) -> ToolFailed:
        """Return the error event of a call that ran and failed (before its `completed`)."""
        return cls(
            call_id=completed.call_id,
            tool_name=completed.tool_name,
            index=completed.index,
            error=error,
            error_type=error_type,
            success=completed.success,
            duration_ms=completed.duration_ms,
            attempts=completed.attempts,
            from_cache=completed.from_cache,
            fallback=completed.fallback,
        )


# -- rounds -------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ToolRolledBack(LoopEvent):
    """Every call of the round was flagged: the round is rolled back and replanned."""

    type: ClassVar[Literal["tool_rolled_back"]] = "tool_rolled_back"
    round_index: int
    consecutive: int
    reasons: list[str]


@dataclass(frozen=True, kw_only=True)
class QueueDrained(LoopEvent):
    """Every call of the round has finished."""

    type: ClassVar[Literal["queue_drained"]] = "queue_drained"
    round_index: int
    calls: int


@dataclass(frozen=True, kw_only=True)
class RoundCompleted(LoopEvent):
    """The round is accepted and recorded."""

    type: ClassVar[Literal["round_completed"]] = "round_completed"
    round_index: int
    calls: int
    succeeded: int
    failed: int


# -- the answer ---------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class AnswerStarted(LoopEvent):
    """The answer model is asked, or the planner's text reply is the answer (`planner_reply`)."""

    type: ClassVar[Literal["answer_started"]] = "answer_started"
    tool_results: int
    media: int
    planner_reply: bool = False
    """The planner's reply is the answer: no answer model call."""


@dataclass(frozen=True, kw_only=True)
class AnswerSpeculated(LoopEvent):
    """An answer started early was `adopted`, or dropped: `cancelled`, `unusable`, `stale`."""

    type: ClassVar[Literal["answer_speculated"]] = "answer_speculated"
    outcome: str
    """`adopted`, `cancelled`, `unusable` or `stale`."""
    adopted: bool
    """Whether the answer node used it."""
    input_tokens: int
    """Tokens a dropped answer cost (0 when adopted)."""
    output_tokens: int
    wasted_input_chars: int
    """Characters of a dropped answer's prompt (0 when adopted)."""


@dataclass(frozen=True, kw_only=True)
class AnswerCompleted(LoopEvent):
    """The answer is produced (or failed, or was cut)."""

    type: ClassVar[Literal["answer_completed"]] = "answer_completed"
    chars: int
    error: str
    cut: str
    status: str
    duration_ms: float
    planner_reply: bool = False
    """The answer is the planner's text reply."""


# -- sub-agents (stream envelope `{"agent", "ts", "type", ...}`) --------------------------


@dataclass(frozen=True, kw_only=True)
class AgentStarted(LoopEvent):
    """A sub-agent starts (on the parent's stream)."""

    type: ClassVar[Literal["agent_started"]] = "agent_started"
    input: str


@dataclass(frozen=True, kw_only=True)
class AgentProgress(LoopEvent):
    """One event of a sub-agent, wrapped for the parent's stream."""

    type: ClassVar[Literal["agent_progress"]] = "agent_progress"
    event: Any


@dataclass(frozen=True, kw_only=True)
class AgentCompleted(LoopEvent):
    """A sub-agent finished: its error, or its rounds, calls, tokens and duration."""

    type: ClassVar[Literal["agent_completed"]] = "agent_completed"
    success: bool
    error: str | None = _optional()
    rounds: int | None = _optional()
    tool_calls: int | None = _optional()
    input_tokens: int | None = _optional()
    output_tokens: int | None = _optional()
    duration_ms: float | None = _optional()


# -- durability and MCP servers -----------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class DurabilityWarning(LoopEvent):
    """Calls are less durable than the run may seem (`exit` durability, in-process ledger)."""

    type: ClassVar[Literal["durability_warning"]] = "durability_warning"
    durability: str | None = _optional()
    ledger: str | None = _optional()
    message: str


@dataclass(frozen=True, kw_only=True)
class McpServerUnavailable(LoopEvent):
    """An MCP server could not be reached; the run goes on without its tools."""

    type: ClassVar[Literal["mcp_server_unavailable"]] = "mcp_server_unavailable"
    server: str
    reason: str


@dataclass(frozen=True, kw_only=True)
class McpLog(LoopEvent):
    """An MCP server sent a log message during a call."""

    type: ClassVar[Literal["mcp_log"]] = "mcp_log"
    call_id: str
    tool_name: str
    server: str
    level: str
    logger: str | None
    data: Any


EVENTS: Mapping[str, type[LoopEvent]] = MappingProxyType(declared_events())
"""Every declared event class, by its `type`."""
EVENT_TYPES: tuple[str, ...] = tuple(EVENTS)
"""Every event type the loop emits."""
