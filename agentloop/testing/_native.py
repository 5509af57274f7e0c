"""A scripted JSON plan as the reply of a planner bound to the loop's tools.

`ScriptedChatModel` scripts are written as JSON plans (`plan_reply`). When a request
binds tools and none of them is the plan tool, the planner calls the tools themselves
(`plan_mode="native"`), so a JSON plan reply becomes the reply such a planner gives:

- `execute` with commands: one tool call per command, in order (name = `tool_name`,
  arguments = `tool_kwargs`), and no text;
- anything else (`response`, or `execute` without commands): a short text reply and no
  tool call.

Every other reply (plain text, a message with tool calls, text that is not a JSON plan)
is left as it is, so one script serves every plan mode.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import AIMessage, ToolCall

from agentloop.planning.prompt import PLAN_TOOL

__all__ = ["NATIVE_RESPONSE_TEXT", "as_native_reply"]

NATIVE_RESPONSE_TEXT = "I have what I need to answer."
"""The text reply that stands for a scripted `response` plan."""

_PLAN_TOOL_NAME = PLAN_TOOL["function"]["name"]


def _binds_loop_tools(options: Mapping[str, Any]) -> bool:
    """Whether a request binds tools and none of them is the plan tool."""
    tools = options.get("tools") or []
    names = {tool.get("function", {}).get("name") for tool in tools if isinstance(tool, dict)}
    return bool(tools) and _PLAN_TOOL_NAME not in names


def _scripted_plan(reply: str | AIMessage) -> dict[str, Any] | None:
    """The JSON plan a reply's text holds, or None when it holds none."""
    if isinstance(reply, AIMessage):
        if reply.tool_calls or reply.invalid_tool_calls or not isinstance(reply.content, str):
            return None
        text = reply.content
    else:
        text = reply
    try:
        plan = json.loads(text)
    except ValueError:
        return None
    if not isinstance(plan, dict) or "next_action" not in plan:
        return None
    return plan


def _tool_call(position: int, command: Any) -> ToolCall:
    """The tool call of one scripted command.

    Raises:
        TypeError: The command has no tool name or its arguments are not an object, which
            a tool call cannot carry.
    """
    fields = command if isinstance(command, dict) else {}
    name, kwargs = fields.get("tool_name"), fields.get("tool_kwargs") or {}
    if not isinstance(name, str) or not isinstance(kwargs, dict):
        msg = (
            f"command {position + 1} of a scripted plan cannot be a tool call: it needs a "
            f"'tool_name' text and 'tool_kwargs' as an object, got {command!r}"
        )
        raise TypeError(msg)
    return ToolCall(name=name, args=dict(kwargs), id=None)


def as_native_reply(reply: str | AIMessage, options: Mapping[str, Any]) -> str | AIMessage:
    """Return the reply a planner bound to the loop's tools gives for a scripted reply.

    Args:
        reply: The scripted reply (text or a message).
        options: The request's options, as the model receives them (`tools`, ...).

    Returns:
        The reply unchanged unless the request binds the loop's tools and the reply is a
        JSON plan; then the equivalent message: tool calls, or a short text.

    Raises:
        TypeError: A command of the plan cannot be written as a tool call.
    """
    if not _binds_loop_tools(options):
        return reply
    plan = _scripted_plan(reply)
    if plan is None:
        return reply
    metadata: dict[str, Any] = {}
    if isinstance(reply, AIMessage):
        metadata = {
            "response_metadata": dict(reply.response_metadata),
            "usage_metadata": reply.usage_metadata,
        }
    commands = plan.get("execution_commands") or []
    if plan.get("next_action") != "execute" or not isinstance(commands, list) or not commands:
        return AIMessage(NATIVE_RESPONSE_TEXT, **metadata)
    calls = [_tool_call(position, command) for position, command in enumerate(commands)]
    return AIMessage("", tool_calls=calls, **metadata)
