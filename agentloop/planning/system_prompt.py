"""The system message of every planner and answer request: the app's instructions, the loop's rules.

As in `create_agent`, an app gives its instructions as text or as a `SystemMessage`, and
a `wrap_model_call` middleware sees them as `ModelRequest.system_message` (a middleware
that sets the system prompt, `@dynamic_prompt` included, replaces them). The loop adds
its own rules after them in the one system message it sends. Both are static for a loop,
so the prefix that provider prompt caches reuse stays the same from call to call; a
`SystemMessage`'s content blocks (with their cache markers) are kept as they are.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import SystemMessage

from agentloop.errors import ConfigurationError

__all__ = ["app_instructions", "system_message"]


def app_instructions(system_prompt: str | SystemMessage | None) -> SystemMessage | None:
    """Check the `system_prompt` option and return it as a `SystemMessage` (None: none).

    Raises:
        ConfigurationError: It is neither text nor a `SystemMessage`.
    """
    if system_prompt is None or isinstance(system_prompt, SystemMessage):
        return system_prompt
    if isinstance(system_prompt, str):
        return SystemMessage(system_prompt) if system_prompt.strip() else None
    msg = f"system_prompt must be text or a SystemMessage, got {type(system_prompt).__name__}"
    raise ConfigurationError(msg)


def system_message(instructions: SystemMessage | None, rules: str) -> SystemMessage:
    """The system message of a request: the app's instructions (if any), then the loop's rules."""
    if instructions is None:
        return SystemMessage(rules)
    app = instructions.content
    content: Any
    if isinstance(app, str):
        content = f"{app}\n\n{rules}" if rules else app
    else:
        content = [*app, {"type": "text", "text": rules}] if rules else list(app)
    return SystemMessage(content=content, additional_kwargs=dict(instructions.additional_kwargs))
