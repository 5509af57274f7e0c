"""The outcome of one tool call as it travels back through the pipeline, and error types."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.tools import BaseTool

from agentloop.errors import ErrorType, MCPTransportError, UnknownOutcomeError
from agentloop.governance.policy import ResolvedPolicy, is_subagent
from agentloop.governance.threads import AbandonedCall, CallTimedOut

__all__ = ["ERROR_SUGGESTIONS", "ToolOutcome", "cut_off", "graceful_error", "timed_out"]

ERROR_SUGGESTIONS: dict[ErrorType, str] = {
    "timeout": "The tool took too long. Try a narrower request, or another tool.",
    "invalid_arguments": "Fix the arguments listed in the message and call again.",
    "tool_not_found": "Call one of the available tools listed in the message.",
    "network_error": "The service could not be reached. Try again later or use another source.",
    "internal_error": "The tool failed. Check the arguments or try another approach.",
    "unknown_outcome": (
        "The call may or may not have taken effect. Do not repeat it blindly: check first."
    ),
    "duplicate": "This exact query already ran. Use its result instead of repeating it.",
    "useless_result": "The result did not help. Try different arguments or another tool.",
    "tool_crashed": "The tool stopped abruptly. Check the arguments or try another approach.",
    "tool_unavailable": "The tool is busy with earlier calls that hung. Use another tool.",
    "too_many_commands": "Plan fewer calls per round, the most important first.",
    "reference_failed": "Fix the command it refers to, or call it with values, not a reference.",
    "reference_unavailable": (
        "The whole result it refers to is no longer available. Run that command again in "
        "the same plan as this one, or pass the values themselves."
    ),
    "arguments_unavailable": "Plan the call again if it is still needed.",
    "cancelled": "It was started for a plan that was rejected. Plan it again if it is needed.",
    "unserializable_result": "The tool returned data that cannot be read. Try another tool.",
    "unsupported_result": "The tool cannot be used by this loop. Use another tool.",
    "refused": "This app does not allow the call. Do not repeat it; answer without it.",
}


@dataclass(frozen=True)
class ToolOutcome:
    """What a call produced: a value or an error, and how it got there."""

    value: Any = None
    success: bool = True
    error: str = ""
    error_type: ErrorType | Literal[""] = ""
    attempts: int = 1
    from_cache: bool = False
    fallback: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)
    artifact: Any = None
    """What the tool returned beside its content (`response_format="content_and_artifact"`)."""
    stale_age_s: float | None = None
    """The age of a stale result returned because the tool failed (None otherwise)."""
    truncated: bool = False
    """A bound cut the result while it was read (an iterator's items, time or size)."""
    whole: Any = None
    """The complete result when a size bound cut `value` and it was at hand, for the
    references of later commands (`agentloop.governance.deferred`); never recorded."""
    pending: Any = None
    """The work of a call that timed out and could not be stopped: completes with its
    late result (a `concurrent.futures.Future` or an `asyncio.Task`), else None."""
    state_update: dict[str, Any] | None = None
    """What a tool's `Command` writes to the graph's state (keys the state has)."""
    exception: BaseException | None = field(default=None, compare=False, repr=False)
    """The exception the tool itself raised (its last attempt's), for the app's
    `wrap_tool_call` middleware to see as `create_agent`'s sees it; never recorded."""

    @classmethod
    def failure(cls, error_type: ErrorType, message: str, *, attempts: int = 1) -> ToolOutcome:
        """Build a failed outcome."""
        return cls(None, False, message, error_type, attempts)

    @classmethod
    def refused(cls, error_type: ErrorType, tool_name: str, message: str) -> ToolOutcome:
        """Build the outcome of a call that was not run, with the model-facing error."""
        return cls(graceful_error(error_type, tool_name, message), False, message, error_type, 0)

    def with_changes(self, **changes: Any) -> ToolOutcome:
        """Return a copy with some fields changed.

        As `dataclasses.replace` (an unknown field is a `TypeError`), without rebuilding
        every field through `__init__`: every call's outcome is changed a few times.
        """
        unknown = changes.keys() - _OUTCOME_FIELDS
        if unknown:
            msg = f"ToolOutcome has no field {sorted(unknown)[0]!r}"
            raise TypeError(msg)
        clone = object.__new__(ToolOutcome)
        fields = clone.__dict__
        fields.update(self.__dict__)
        fields.update(changes)
        return clone


_OUTCOME_FIELDS = frozenset(ToolOutcome.__dataclass_fields__)


def graceful_error(error_type: ErrorType, tool_name: str, message: str) -> dict[str, str]:
    """Build the error result the model sees when every fallback failed.

    Args:
        error_type: See `ErrorType`.
        tool_name: The tool that failed.
        message: What happened.

    Returns:
        `{"error", "tool", "message", "suggestion"}`.
    """
    return {
        "error": error_type,
        "tool": tool_name,
        "message": message,
        "suggestion": ERROR_SUGGESTIONS[error_type],
    }


def timed_out(
    tool: BaseTool, policy: ResolvedPolicy, timeout_s: float, error: TimeoutError
) -> Exception:
    """The error of a call that outlived its timeout.

    A call with side effects that timed out is `unknown_outcome`, never a clean timeout:
    it may have taken effect before it was stopped, or its work may still complete (its
    thread or task could not be stopped, an MCP server or a sub-agent may finish it). It
    must not be repeated blindly, as a call cut off by a crash.

    Args:
        tool: The tool.
        policy: Its policy.
        timeout_s: Its time limit.
        error: What the timeout raised (a `CallTimedOut` when the loop's time limit
            stopped or abandoned the call; another `TimeoutError` when the tool raised it).
    """
    metadata = tool.metadata or {}
    if isinstance(error, AbandonedCall):
        why, still = str(error), "It may still take effect"
    elif is_subagent(tool):
        why = f"{tool.name} did not finish within {timeout_s:g}s; the calls of the sub-agent "
        why += "may still complete"
        still = "It may still take effect"
    elif "mcp_server" in metadata:
        why = f"{tool.name} did not finish within {timeout_s:g}s; its MCP server may still "
        why += "complete it"
        still = "It may still take effect"
    elif isinstance(error, CallTimedOut):
        why, still = str(error), "It may have taken effect before it stopped"
    else:
        return TimeoutError(f"{tool.name} did not finish within {timeout_s:g}s")
    if policy.idempotent:
        return TimeoutError(why)
    message = (
        f"{why}. {still}: it was not repeated because it is not idempotent, and it must not "
        "be repeated blindly; check whether it took effect first."
    )
    return UnknownOutcomeError(message, getattr(error, "pending", None))


def cut_off(policy: ResolvedPolicy, error: MCPTransportError) -> Exception:
    """The error of an MCP call whose connection broke.

    A request that had left for its server when the connection broke may have run
    there: a call with side effects is then `unknown_outcome`, never a failure to try
    again, as a call that timed out. One that provably never left stays the transport
    error (a `network_error` a retry policy may repeat).

    Args:
        policy: The tool's policy.
        error: What the call raised.
    """
    if not error.sent or policy.idempotent:
        return error
    message = (
        f"{error}. The request had reached the server, so it may have taken effect: it was "
        "not repeated because it is not idempotent, and it must not be repeated blindly; "
        "check whether it took effect first."
    )
    return UnknownOutcomeError(message)
