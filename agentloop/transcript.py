"""The run's transcript in `messages`, as `create_agent` keeps it.

Each executed plan is an `AIMessage` whose `tool_calls` are the round's commands (in
every plan mode: a JSON plan is translated), each call's outcome a `ToolMessage` (in
command order, `status` "success" or "error", the result as the model would read it,
the tool's `artifact`), and the answer the final `AIMessage`. Both are built from the
prepared calls and the records the loop keeps anyway: a call's `tool_call_id` is the id
on its `ToolCall`, on its `ToolMessage`, in its record and the one its tool sees.

Earlier turns of a conversation are rendered for the planner and the answer model as
the user's messages and the final answers only (`agentloop.messages.conversation_turns`):
a run's results reach its own prompts through its round records, never twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, ToolCall, ToolMessage

from agentloop.prompts import to_prompt_json
from agentloop.state import PreparedCall, ToolExecutionRecord
from agentloop.tools.call_id import tool_call_id

__all__ = ["outcome_content", "plan_message", "tool_messages"]


def plan_message(calls: Sequence[PreparedCall], message_id: str) -> AIMessage:
    """The `AIMessage` that asks for a round's calls, one `ToolCall` per command, in order.

    Args:
        calls: The round's prepared calls (those settled without running included).
        message_id: The message's id, the same whenever the round is prepared again
            (a resumed or replayed run replaces it instead of adding a copy).
    """
    tool_calls = [
        ToolCall(
            name=call["tool_name"],
            args=dict(call["kwargs"]) if isinstance(call["kwargs"], dict) else {},
            id=tool_call_id(call),
            type="tool_call",
        )
        for call in calls
    ]
    return AIMessage("", tool_calls=tool_calls, id=message_id)


def outcome_content(record: ToolExecutionRecord) -> str:
    """A call's outcome as the model reads it: the result, or what went wrong.

    A flagged call gives its error; a stale fallback the error beside the stale result;
    another failure the error result the loop hands the model (with a suggestion), or
    its error.
    """
    value: Any
    if record.get("flagged"):
        value = record["error"]
    elif record.get("stale"):
        value = {
            "error": record["error"],
            "stale_result": record["result"],
            "stale_age_s": record.get("stale_age_s", 0.0),
        }
    elif record["success"] or record["result"] is not None:
        value = record["result"]
    else:
        value = record["error"]
    return value if isinstance(value, str) else to_prompt_json(value)


def tool_messages(records: Sequence[ToolExecutionRecord]) -> list[ToolMessage]:
    """One `ToolMessage` per record, in the order given (command order)."""
    messages: list[ToolMessage] = []
    for record in records:
        call_id = record.get("call_id") or ""
        message = ToolMessage(
            outcome_content(record),
            tool_call_id=record.get("tool_call_id") or call_id,
            name=record["tool_name"],
            status="success" if record["success"] else "error",
            artifact=record.get("artifact"),
            id=f"{call_id}:outcome" if call_id else None,
        )
        messages.append(message)
    return messages
