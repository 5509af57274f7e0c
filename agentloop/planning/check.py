"""Whether a plan can be used, and what to tell a planner whose plan cannot.

A plan is usable when it is a clean `response`, or an `execute` with at least one
command that names an available tool with arguments (not a copy of a JSON schema)
and whose references (`"$N"`, `"${N}"`) all point at earlier commands of the plan.
Anything else goes back to the planner with a short, specific reason and the shape
it should have written (`reask_message`), a bounded number of times.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.messages import HumanMessage

from agentloop.durability.identity import IDEMPOTENCY_ARGUMENT
from agentloop.planning.references import GENERIC_REFERENCE_EXAMPLE, reference_problem
from agentloop.planning.templates import PromptSet, to_prompt_json
from agentloop.state import PlanDecision, ToolCommand

__all__ = [
    "plan_example",
    "plan_problem",
    "reask_message",
    "reference_example",
    "schema_shaped",
]

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
    references = reference_problem(commands)
    if references:
        return references
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
    kwargs = _example_kwargs(tool)
    return to_prompt_json(
        {
            "next_action": "execute",
            "execution_commands": [{"tool_name": tool["name"], "tool_kwargs": kwargs}],
        }
    )


def reference_example(descriptions: Sequence[Mapping[str, Any]]) -> str:
    """Two commands of a plan, with real tool names, the second using the first's result.

    The second command is a tool with a text argument, which gets `"${1}"` (read-only
    tools first); the first is another tool when there is one. Without a text argument,
    any argument gets `"$1"`; without any argument, a generic line is returned.

    Args:
        descriptions: The tools as the planner sees them (`name`, `args_schema`,
            `read_only`).

    Returns:
        `"execution_commands": [...]` (only tool names and arguments, to keep the prompt
        short), or the generic line.
    """
    ordered = sorted(descriptions, key=lambda tool: not tool.get("read_only"))
    chosen = next(((t, name) for t in ordered for name in _text_arguments(t)), None)
    reference = "${1}"
    if chosen is None:
        chosen = next(((t, name) for t in ordered for name in _arguments(t)[:1]), None)
        reference = "$1"
    if chosen is None:
        return GENERIC_REFERENCE_EXAMPLE
    second, argument = chosen
    first = next((t for t in ordered if t["name"] != second["name"]), second)
    second_kwargs = _example_kwargs(second)
    second_kwargs[argument] = reference
    commands = [
        {"tool_name": first["name"], "tool_kwargs": _example_kwargs(first)},
        {"tool_name": second["name"], "tool_kwargs": second_kwargs},
    ]
    return f'"execution_commands": {to_prompt_json(commands)}'


def _arguments(tool: Mapping[str, Any]) -> list[str]:
    """A tool's required arguments, else all of them."""
    schema = tool.get("args_schema") or {}
    properties: dict[str, Any] = schema.get("properties") or {}
    return [n for n in schema.get("required") or [] if n in properties] or list(properties)


def _text_arguments(tool: Mapping[str, Any]) -> list[str]:
    properties: dict[str, Any] = (tool.get("args_schema") or {}).get("properties") or {}
    names = [*_arguments(tool), *properties]
    return [
        n
        for n in dict.fromkeys(names)
        if n != IDEMPOTENCY_ARGUMENT and _is_text(properties.get(n) or {})
    ]


def _is_text(schema: Mapping[str, Any]) -> bool:
    kind = schema.get("type")
    if isinstance(kind, list):
        return "string" in kind and "enum" not in schema
    return kind == "string" and "enum" not in schema


def _example_kwargs(tool: Mapping[str, Any]) -> dict[str, Any]:
    """Values for a tool's required arguments (its first argument when none is required)."""
    schema = tool.get("args_schema") or {}
    properties: dict[str, Any] = schema.get("properties") or {}
    required = list(schema.get("required") or [])
    names = required or list(properties)[:1]
    return {name: _example_value(properties.get(name) or {}) for name in names}


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


def reask_message(
    prompts: PromptSet, problem: str, reply: str, example: str, *, native: bool = False
) -> HumanMessage:
    """The message that asks the planner again after an unusable reply.

    Args:
        prompts: The loop's prompt templates (`plan_reask`, or `plan_native_reask`).
        problem: Why the reply could not be used.
        reply: The reply, quoted back (cut to a few hundred characters).
        example: A usable plan for this loop's tools (`plan_example`; not shown to a
            native planner, which calls the tools).
        native: The planner calls the tools themselves (`plan_mode="native"`).
    """
    quoted = reply.strip()
    if len(quoted) > _QUOTED_REPLY_LIMIT:
        quoted = quoted[:_QUOTED_REPLY_LIMIT] + " [...]"
    return HumanMessage(
        prompts.render(
            "plan_native_reask" if native else "plan_reask",
            problem=to_prompt_json(problem),
            reply=to_prompt_json(quoted or "(nothing)"),
            plan_example=example,
        )
    )
