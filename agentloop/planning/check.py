"""Whether a plan can be used, and what to tell a planner whose plan cannot.

A plan is usable when it is a clean `response`, or an `execute` with at least one
command that names an available tool with arguments (not a copy of a JSON schema).
Anything else goes back to the planner with a short, specific reason and the shape
it should have written (`reask_message`), a bounded number of times.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.messages import HumanMessage

from agentloop.prompts import PromptSet, to_prompt_json
from agentloop.state import PlanDecision, ToolCommand

__all__ = ["plan_example", "plan_problem", "reask_message", "schema_shaped"]

_SCHEMA_KEYS = frozenset({"type", "properties", "required", "title", "description", "enum"})
_QUOTED_REPLY_LIMIT = 600
"""How much of an unusable reply is quoted back to the planner."""


def schema_shaped(kwargs: Mapping[str, Any]) -> bool:
    """Whether arguments look like a copy of a JSON schema instead of values.

    True for `{"query": {"type": "string"}}` (every value a schema fragment) and for
    `{"type": "object", "properties": {...}}`.
    """
    if not kwargs:
        return False
    if "properties" in kwargs and isinstance(kwargs["properties"], dict):
        return True
    return all(
        isinstance(value, dict) and "type" in value and set(value) <= _SCHEMA_KEYS | {"default"}
        for value in kwargs.values()
    )


def plan_problem(decision: PlanDecision, is_tool: Callable[[str], bool]) -> str:
    """Why a normalized plan cannot be used ("" when it can).

    Args:
        decision: The normalized plan.
        is_tool: Whether a tool name is available to the loop now.
    """
    if decision.get("parse_error"):
        return str(decision["parse_error"])
    if decision["next_action"] != "execute":
        return ""
    commands = decision["execution_commands"]
    if any(_usable(command, is_tool) for command in commands):
        return ""
    unknown = sorted({c["tool_name"] for c in commands if not is_tool(c["tool_name"])})
    if unknown:
        return f"no command names an available tool (unknown: {', '.join(unknown)})"
    return "every command's tool_kwargs is a copy of a JSON schema, not argument values"


def _usable(command: ToolCommand, is_tool: Callable[[str], bool]) -> bool:
    return is_tool(command["tool_name"]) and not schema_shaped(command["tool_kwargs"])


def plan_example(descriptions: Sequence[Mapping[str, Any]]) -> str:
    """A one-command plan written with the first available tool's real names.

    Argument values come from the schema (an example, default or enum value, else a
    value of the declared type), so a model that copies the example still writes a
    call that validates.

    Args:
        descriptions: The tools as the planner sees them (`name`, `args_schema`,
            `read_only`); the first read-only one is used.
    """
    if not descriptions:
        return to_prompt_json({"next_action": "response", "execution_commands": []})
    tool = next((t for t in descriptions if t.get("read_only")), descriptions[0])
    schema = tool.get("args_schema") or {}
    properties: dict[str, Any] = schema.get("properties") or {}
    required = list(schema.get("required") or [])
    names = required or list(properties)[:1]
    kwargs = {name: _example_value(properties.get(name) or {}) for name in names}
    return to_prompt_json(
        {
            "next_action": "execute",
            "execution_commands": [
                {
                    "purpose": f"what this {tool['name']} call finds out",
                    "tool_name": tool["name"],
                    "tool_kwargs": kwargs,
                    "todo_suggestion": "what to do once the result is known",
                }
            ],
        }
    )


def _example_value(schema: Mapping[str, Any]) -> Any:
    for key in ("examples",):
        values = schema.get(key)
        if isinstance(values, list) and values:
            return values[0]
    if "default" in schema:
        return schema["default"]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    return {
        "integer": 1,
        "number": 1.5,
        "boolean": True,
        "array": [],
        "object": {},
    }.get(str(kind), "text from the request")


def reask_message(prompts: PromptSet, problem: str, reply: str, example: str) -> HumanMessage:
    """The message that asks the planner again after an unusable reply.

    Args:
        prompts: The loop's prompt templates (`plan_reask`).
        problem: Why the reply could not be used.
        reply: The reply, quoted back (cut to a few hundred characters).
        example: A usable plan for this loop's tools (`plan_example`).
    """
    quoted = reply.strip()
    if len(quoted) > _QUOTED_REPLY_LIMIT:
        quoted = quoted[:_QUOTED_REPLY_LIMIT] + " [...]"
    return HumanMessage(
        prompts.render(
            "plan_reask",
            problem=problem,
            reply=to_prompt_json(quoted or "(nothing)"),
            plan_example=example,
        )
    )
