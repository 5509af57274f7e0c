"""The app's `system_prompt`, first in every planner and answer request.

As in `create_agent`, an app gives its instructions as text or as a `SystemMessage`. The
loop keeps one system message per request: the app's instructions, then the loop's own
rules. Both are static for a loop, so the prefix that provider prompt caches reuse stays
the same from call to call; a `SystemMessage`'s content blocks (with their cache
markers) are kept as they are.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage

from agentloop.errors import ConfigurationError

__all__ = ["app_instructions", "loop_rules", "with_app_instructions"]


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


def with_app_instructions(
    messages: list[BaseMessage], instructions: SystemMessage | None
) -> list[BaseMessage]:
    """Put the app's instructions before the loop's rules in a request's system message."""
    if instructions is None or not messages or not isinstance(messages[0], SystemMessage):
        return messages
    rules = messages[0].content
    app = instructions.content
    content: Any
    if isinstance(app, str) and isinstance(rules, str):
        content = f"{app}\n\n{rules}"
    else:
        content = [*_blocks(app), *_blocks(rules)]
    system = SystemMessage(content=content, additional_kwargs=dict(instructions.additional_kwargs))
    return [system, *messages[1:]]


def loop_rules(system: SystemMessage, instructions: SystemMessage | None) -> SystemMessage:
    """The loop's rules of a system message `with_app_instructions` made (its inverse).

    `wrap_model_call` middleware sees the app's instructions as the request's system
    message, as under `create_agent`; the loop's rules are added back to what the
    handler sends, so a middleware that replaces the system prompt (`@dynamic_prompt`)
    replaces the app's part only.
    """
    if instructions is None:
        return system
    app, merged = instructions.content, system.content
    if isinstance(app, str) and isinstance(merged, str):
        prefix = f"{app}\n\n"
        return SystemMessage(merged[len(prefix) :] if merged.startswith(prefix) else merged)
    blocks = _blocks(merged)
    return SystemMessage(content=blocks[len(_blocks(app)) :])


def _blocks(content: str | list[Any]) -> list[Any]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
