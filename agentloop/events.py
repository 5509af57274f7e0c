"""Progress events, written to LangGraph's `custom` stream mode as dicts with a `type`."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Literal, Protocol, get_args

from agentloop.checkpoint_safe import checkpoint_safe

__all__ = ["EVENT_TYPES", "Emit", "EventType", "make_emitter", "null_emit"]

EventType = Literal[
    "round_started",
    "plan_reasked",
    "plan_decided",
    "tool_queued",
    "tool_dispatched",
    "tool_started",
    "tool_progress",
    "tool_retry",
    "tool_thread_abandoned",
    "tool_abandoned",
    "tool_completed",
    "tool_error",
    "tool_rolled_back",
    "queue_drained",
    "round_completed",
    "answer_started",
    "answer_speculated",
    "answer_completed",
    "agent_started",
    "agent_progress",
    "agent_completed",
    "durability_warning",
    "mcp_server_unavailable",
    "mcp_log",
]
EVENT_TYPES: tuple[str, ...] = get_args(EventType)
"""Every event type the loop emits."""


class Emit(Protocol):
    """`emit(event_type, **fields)`: send one event (only a declared `EventType`)."""

    def __call__(self, event_type: EventType, /, **fields: Any) -> None:
        """Send one event."""


def null_emit(event_type: str, /, **fields: Any) -> None:
    """Drop an event (used when nothing listens)."""


def make_emitter(
    writer: Callable[[Any], None] | None,
    *,
    loop_name: str,
    redact: Callable[[str], str] | None = None,
) -> Emit:
    """Build an emitter that writes `{"type", "loop", "ts", **fields}` to a stream writer.

    Fields are redacted and made serializable (`checkpoint_safe`); a failing writer never
    breaks the loop: the event is dropped.

    Args:
        writer: LangGraph's stream writer (`runtime.stream_writer`), or None.
        loop_name: The `name` of the tool loop, so composed loops can be told apart.
        redact: Applied to every string of every event.

    Returns:
        The emitter.
    """
    if writer is None:
        return null_emit

    def emit(event_type: str, /, **fields: Any) -> None:
        event = {"type": event_type, "loop": loop_name, "ts": time.time(), **fields}
        try:
            writer(checkpoint_safe(event, redact))
        except Exception:
            return

    return emit
