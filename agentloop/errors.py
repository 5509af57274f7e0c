"""The library's exceptions and the error templates meant for the model."""

from __future__ import annotations

__all__ = [
    "AgentLoopError",
    "ConfigurationError",
    "ModelBehaviorError",
    "ModelTimeoutError",
    "PromptTemplateError",
    "ToolCallError",
]


class AgentLoopError(Exception):
    """Base class of every error raised by agentloop."""


class ConfigurationError(AgentLoopError, ValueError):
    """The library was used wrongly: a bad option, tool, policy or config file."""


class PromptTemplateError(ConfigurationError):
    """A prompt template is missing or uses a variable that was not provided."""


class ModelBehaviorError(AgentLoopError):
    """A model failed in a way retries could not fix (auth, context overflow...)."""


class ModelTimeoutError(AgentLoopError, TimeoutError):
    """A model call produced no first output, or no end, within its time limit."""


class ToolCallError(AgentLoopError):
    """A tool call failed; carries the error type the record reports.

    Args:
        error_type: One of `timeout`, `invalid_arguments`, `tool_not_found`,
            `network_error`, `internal_error`, `unknown_outcome`.
        message: What went wrong, for the model and the logs.
    """

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.message = message
