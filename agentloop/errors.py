"""The library's exceptions, the error types records carry, and how errors are classified.

Every exception agentloop raises is an `AgentLoopError`. Errors that reach a record are
classified into an `ErrorType`; model errors are judged retryable or not with
langchain-core's typed `ModelError` hierarchy first (`is_retryable`), then by status
codes and names for providers that do not raise it yet.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal, get_args

from langchain_core.exceptions import (
    ContextOverflowError,
    ModelAuthenticationError,
    ModelError,
    ModelPermissionDeniedError,
)
from pydantic import ValidationError

__all__ = [
    "ERROR_TYPES",
    "AgentLoopError",
    "ConfigurationError",
    "ErrorType",
    "IdempotencyConflictError",
    "InputError",
    "MCPToolError",
    "MCPTransportError",
    "NOT_RUN_ERRORS",
    "ModelBehaviorError",
    "ModelCallTimeout",
    "PromptTemplateError",
    "ToolCallError",
    "UnknownOutcomeError",
    "classify_tool_error",
    "is_retryable_model_error",
    "is_transient_error",
    "model_error_message",
    "status_code",
]

ErrorType = Literal[
    "timeout",
    "invalid_arguments",
    "tool_not_found",
    "network_error",
    "internal_error",
    "tool_crashed",
    "tool_unavailable",
    "unknown_outcome",
    "duplicate",
    "useless_result",
    "too_many_commands",
    "reference_failed",
    "reference_unavailable",
    "arguments_unavailable",
    "cancelled",
    "unserializable_result",
    "unsupported_result",
    "refused",
]
"""Why a call failed, as its record says:

- `timeout`: an attempt took longer than the tool's timeout;
- `invalid_arguments`: the arguments did not fit the tool's schema (not run);
- `tool_not_found`: no tool has that name (not run);
- `network_error`: the tool's service could not be reached;
- `internal_error`: the tool raised an exception;
- `tool_crashed`: the tool raised a `BaseException` that is not an `Exception`;
- `tool_unavailable`: the tool has too many hung calls (not run);
- `unknown_outcome`: a call with side effects may or may not have happened (not repeated):
  its worker died, it timed out and could not be stopped, or the connection to its MCP
  server broke after the request had left;
- `duplicate`: the same query already ran (not run);
- `useless_result`: the result was judged useless;
- `too_many_commands`: beyond the per-round cap (not run);
- `reference_failed`: an argument refers to the result of a command that failed or did
  not run (not run);
- `reference_unavailable`: an argument refers to a result whose record holds it cut, and
  the whole result is no longer at hand (after a resume, or past the memory bound): a
  tool that is not read-only is not given part of it (not run);
- `arguments_unavailable`: the redact hook changed the call's arguments, and the
  planner's own, kept in memory only, were gone when it was to run (after a resume in
  another process, or a long wait): it is not run with the redacted ones (not run);
- `cancelled`: started while its plan was streaming, then stopped because that plan was
  rejected (only reads start early, so there is nothing to undo);
- `unserializable_result`: the tool returned an object that cannot be converted to JSON;
- `unsupported_result`: the tool returned something the loop does not apply;
- `refused`: a `wrap_tool_call` middleware answered with an error `ToolMessage`
  without calling its handler (not run).
"""
ERROR_TYPES: tuple[str, ...] = get_args(ErrorType)

NOT_RUN_ERRORS: frozenset[str] = frozenset(
    {
        "invalid_arguments",
        "tool_not_found",
        "tool_unavailable",
        "duplicate",
        "too_many_commands",
        "reference_failed",
        "reference_unavailable",
        "arguments_unavailable",
        "refused",
        "cancelled",
    }
)
"""Error types of calls settled without their tool running (a bad call, a duplicate, a
middleware's refusal...), or started for a plan that was rejected and cancelled: their
records' `status` is `skipped`, and they changed nothing a later read could see."""


class AgentLoopError(Exception):
    """Base class of every error raised by agentloop."""


class ConfigurationError(AgentLoopError, ValueError):
    """The library was used wrongly: a bad option, tool, policy or config file."""


class InputError(AgentLoopError, ValueError):
    """A run was given input it cannot answer: a field of the wrong type, or no request.

    Raised by the loop's first node, before any model is called; nothing of the
    thread is changed but the failed step.
    """


class IdempotencyConflictError(InputError):
    """An idempotency key was submitted again with another request: a key names one request.

    Raised by the loop's first node, before any call runs; the run is refused whole.
    """

    error_type = "idempotency_conflict"


class PromptTemplateError(ConfigurationError):
    """A prompt template is missing or uses a variable that was not provided."""


class ModelBehaviorError(AgentLoopError):
    """A model failed in a way retries could not fix (auth, context overflow...)."""


class ModelCallTimeout(AgentLoopError, TimeoutError):
    """A model call produced no first output, or no end, within its time limit."""


class ToolCallError(AgentLoopError):
    """A tool call failed; carries the error type the record reports.

    Args:
        error_type: See `ErrorType`.
        message: What went wrong, for the model and the logs.
    """

    def __init__(self, error_type: ErrorType, message: str) -> None:
        super().__init__(message)
        self.error_type: ErrorType = error_type
        self.message = message


class UnknownOutcomeError(ToolCallError):
    """A call with side effects timed out and could not be stopped: it may still take effect.

    Args:
        message: What happened, and that the call must not be repeated blindly.
        pending: Completes with the call's late result when it is known (a
            `concurrent.futures.Future` or an `asyncio.Task`), else None.
    """

    def __init__(self, message: str, pending: Any = None) -> None:
        super().__init__("unknown_outcome", message)
        self.pending = pending


class MCPToolError(ToolCallError):
    """An MCP tool reported an error (`isError`), or the server refused the request.

    Args:
        message: The server's error text.
        server: The server's name, when known.
        tool: The tool's name, when known.
    """

    def __init__(self, message: str, *, server: str | None = None, tool: str | None = None):
        super().__init__("internal_error", message)
        self.server = server
        self.tool = tool


class MCPTransportError(AgentLoopError, ConnectionError):
    """An MCP server could not be started or reached, or its connection broke.

    A `ConnectionError`, so retry policies treat it as transient.

    Args:
        message: What happened.
        sent: The request had left for the server when the connection broke, so the
            server may have run it: a call with side effects is then `unknown_outcome`,
            never repeated. False when it provably never left (the server could not be
            started or connected to).
    """

    def __init__(self, message: str, *, sent: bool = False) -> None:
        super().__init__(message)
        self.sent = sent


# --- classification --------------------------------------------------------------------------

_TRANSIENT_MARKERS = (
    "timeout",
    "timed out",
    "temporarily",
    "rate limit",
    "too many requests",
    "connection",
    "unavailable",
    "try again",
)
_TRANSIENT_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
_AUTH_MARKERS = ("authentication", "unauthorized", "invalid api key")
_OVERFLOW_MARKERS = (
    "context length",
    "context_length",
    "maximum context",
    "context window",
    "too many tokens",
    "prompt is too long",
    "reduce the length",
)


def status_code(error: BaseException) -> int | None:
    """Return the HTTP-like status an error carries (`status_code`, `response.status_code`...)."""
    for attribute in ("status_code", "status", "code", "http_status"):
        value = getattr(error, attribute, None)
        if isinstance(value, int):
            return value
    response = getattr(error, "response", None)
    value = getattr(response, "status_code", None)
    return value if isinstance(value, int) else None


def is_transient_error(error: BaseException) -> bool:
    """Tell whether an error is worth retrying: connection errors, timeouts, 429 and 5xx."""
    if isinstance(error, ModelError):
        return error.is_retryable
    if isinstance(error, ConnectionError | TimeoutError | asyncio.TimeoutError):
        return True
    status = status_code(error)
    if status is not None:
        return status in _TRANSIENT_STATUS or 500 <= status < 600
    name = type(error).__name__.lower()
    if any(word in name for word in ("timeout", "connect", "ratelimit", "unavailable")):
        return True
    text = str(error).lower()
    return any(marker in text for marker in _TRANSIENT_MARKERS) or any(
        f" {code}" in f" {text}" for code in ("429", "502", "503", "504")
    )


def classify_tool_error(error: BaseException) -> ErrorType:
    """Map what a tool (or the pipeline) raised to the error type its record reports."""
    if isinstance(error, ToolCallError):
        return error.error_type
    if not isinstance(error, Exception):  # SystemExit, GeneratorExit, a stray CancelledError
        return "tool_crashed"
    if isinstance(error, TimeoutError | asyncio.TimeoutError):
        return "timeout"
    if isinstance(error, ValidationError):
        return "invalid_arguments"
    if isinstance(error, ConnectionError | OSError) and not isinstance(error, FileNotFoundError):
        return "network_error"
    name = type(error).__name__.lower()
    if "timeout" in name:
        return "timeout"
    if "connect" in name or "network" in name or "transport" in name:
        return "network_error"
    return "internal_error"


def _is_auth_error(error: BaseException) -> bool:
    if isinstance(error, ModelAuthenticationError | ModelPermissionDeniedError):
        return True
    if status_code(error) in (401, 403):
        return True
    name = type(error).__name__.lower()
    return "authentication" in name or "permissiondenied" in name


def _is_overflow_error(error: BaseException) -> bool:
    if isinstance(error, ContextOverflowError):
        return True
    text = f"{type(error).__name__} {error}".lower()
    return "contextoverflow" in text.replace(" ", "") or any(m in text for m in _OVERFLOW_MARKERS)


def is_retryable_model_error(error: BaseException) -> bool:
    """Tell whether a model error is transient (and not auth or context overflow)."""
    from langgraph.errors import GraphBubbleUp

    if isinstance(error, GraphBubbleUp) or _is_auth_error(error) or _is_overflow_error(error):
        return False
    return is_transient_error(error)


def model_error_message(error: BaseException) -> str:
    """Describe a model failure in one clear line."""
    detail = f"{type(error).__name__}: {error}"
    if _is_auth_error(error) or any(m in str(error).lower() for m in _AUTH_MARKERS):
        return f"the model rejected the credentials (check the API key) - {detail}"
    if _is_overflow_error(error):
        return f"the request does not fit in the model's context window - {detail}"
    return detail
