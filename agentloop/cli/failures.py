"""Model failures of a CLI run: seen as they happen, told once, mapped to an exit code.

A run whose planner or answer model failed still ends with a state (the loop never
crashes on a model error); the command turns it into one `agentloop: error:` line. The
provider's exception itself is caught through a LangChain callback, so the error is
classified by its type (langchain-core's `ModelError` hierarchy first), never by parsing
the text of the run's answer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.exceptions import (
    ModelAuthenticationError,
    ModelConnectionError,
    ModelError,
    ModelInvalidRequestError,
    ModelNotFoundError,
    ModelPermissionDeniedError,
    ModelRateLimitError,
    ModelTimeoutError,
)

from agentloop.cli.parser import EXIT_FAILED, EXIT_MODEL_UNAVAILABLE, EXIT_USAGE
from agentloop.errors import is_retryable_model_error, status_code
from agentloop.nodes.answer_call import ANSWER_TAGS
from agentloop.nodes.plan import PLAN_TAGS
from agentloop.observability.display import shorten

__all__ = ["ModelFailure", "ModelFailures", "describe_model_error"]

_DETAIL_CHARS = 240

_PERMANENT: list[tuple[type[BaseException], int, str]] = [
    (ModelAuthenticationError, 401, "the model rejected the credentials (check the API key)"),
    (ModelPermissionDeniedError, 403, "the model refused access (permission denied)"),
    (ModelNotFoundError, 404, "the provider knows no such model (check the model name)"),
    (ModelInvalidRequestError, 400, "the model rejected the request as invalid"),
]
_TRANSIENT: list[tuple[type[BaseException], int, str]] = [
    (ModelRateLimitError, 429, "the model is rate limited"),
    (ModelTimeoutError, 408, "the model did not answer in time"),
]


def _message_of(body: Any) -> str:
    """The `message` of a provider's JSON error body (`{"error": {"message": ...}}`)."""
    inner = body.get("error", body) if isinstance(body, Mapping) else None
    message = inner.get("message") if isinstance(inner, Mapping) else inner
    return message.strip() if isinstance(message, str) else ""


def _provider_message(error: BaseException) -> str:
    """The provider's own words: the message of its error body, else the error's text."""
    text = str(error)
    found = _message_of(getattr(error, "body", None))
    if not found:
        try:
            found = _message_of(json.loads(text))
        except ValueError:
            found = ""
    return found or text


def describe_model_error(error: BaseException) -> tuple[bool, str]:
    """Say what a model error means: (whether retrying could help, one clear line)."""
    status = status_code(error)
    for kinds, transient in ((_PERMANENT, False), (_TRANSIENT, True)):
        for kind, code, summary in kinds:
            if isinstance(error, kind) or status == code:
                return transient, _with_detail(summary, error, status)
    if isinstance(error, ModelConnectionError | ConnectionError) or (
        status is None and "connect" in type(error).__name__.lower()
    ):
        return True, _with_detail("the model cannot be reached", error, status)
    retryable = error.is_retryable if isinstance(error, ModelError) else None
    if retryable is None:
        retryable = is_retryable_model_error(error)
    return retryable, _with_detail("the model failed", error, status)


def _with_detail(summary: str, error: BaseException, status: int | None) -> str:
    detail = shorten(_provider_message(error), _DETAIL_CHARS) or type(error).__name__
    code = f"HTTP {status}: " if status is not None else ""
    return f"{summary} ({code}{detail})"


@dataclass(frozen=True)
class ModelFailure:
    """Why a run failed because of its model, and the exit code that says so."""

    code: int
    message: str
    error: BaseException | None


_ROLE_TAGS = {"planner": PLAN_TAGS[0], "answer": ANSWER_TAGS[0]}
"""The tags the loop puts on its planner's and its answer model's calls."""


class ModelFailures(BaseCallbackHandler):
    """A callback that keeps every error a chat model raised during a run."""

    def __init__(self) -> None:
        super().__init__()
        self.errors: list[tuple[BaseException, tuple[str, ...]]] = []
        """The errors and the tags of their calls, in order (retried attempts included)."""

    def on_llm_error(
        self, error: BaseException, *, tags: list[str] | None = None, **kwargs: Any
    ) -> None:
        """Keep the error a chat model raised."""
        self.errors.append((error, tuple(tags or ())))

    def failure(self, state: Mapping[str, Any]) -> ModelFailure | None:
        """Return the run's model failure, or None when no model failed it.

        A failure that no retry can fix (credentials, permissions, unknown model, bad
        request) exits with 2, like any configuration error; one that persisted through
        the retries (rate limit, unreachable, too slow) exits with 4.
        """
        status = state.get("status")
        if status not in ("planner_failed", "answer_failed"):
            return None
        which = "planner" if status == "planner_failed" else "answer"
        errors = [error for error, tags in self.errors if _ROLE_TAGS[which] in tags]
        if not errors:
            if status == "answer_failed":
                reason = " ".join(str(state.get("status_reason") or "").split())
                return ModelFailure(EXIT_FAILED, f"the answer model failed: {reason}", None)
            return None  # the planner answered, but its plan could not be used
        error = errors[-1]
        transient, line = describe_model_error(error)
        if transient:
            tries = f" after {len(errors)} attempts" if len(errors) > 1 else ""
            return ModelFailure(
                EXIT_MODEL_UNAVAILABLE, f"{which} model failed{tries}: {line}", error
            )
        return ModelFailure(EXIT_USAGE, f"{which} model failed: {line}", error)
