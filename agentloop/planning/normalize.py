"""Turn whatever the planner produced into a well-formed `PlanDecision`."""

from __future__ import annotations

import json
from typing import Any

from agentloop.state import PlanDecision, ToolCommand

__all__ = ["default_purpose", "normalize_plan_decision", "unparseable_decision"]

_RAW_TEXT_LIMIT = 2_000
"""How many characters of the planner's raw text a decision keeps."""

_COMMAND_LIST_KEYS = ("execution_commands", "tool_commands", "tool_command")
_TOOL_NAME_KEYS = ("tool_name", "tool", "name")
_KWARGS_KEYS = ("tool_kwargs", "kwargs", "arguments", "args")
_ACTIONS = frozenset({"execute", "response"})


def normalize_plan_decision(raw: Any) -> PlanDecision:
    """Normalize a parsed planner reply into a `PlanDecision`.

    The function is pure: it never raises and never mutates `raw`.

    Commands are read from the first of `execution_commands`, `tool_commands`
    and `tool_command` that is present and not null; a single object is promoted
    to a one-item list and any other container yields no command. A command
    without a usable tool name is dropped. Unknown tool names are kept: the
    executor reports them.

    A missing or invalid `next_action` becomes `execute` when there is at
    least one valid command. A reply that is neither a usable `execute` nor a
    clean `response` (no decision at all, an unknown `next_action`, `execute`
    without a usable command) is a `response` with `parse_error` saying why, so
    the planner can be asked again; it never passes for a plain `response`.

    Args:
        raw: The decoded planner output, usually a dict.

    Returns:
        The normalized decision. A non-dict `raw` gives a `response` decision
        with `parse_error` set.
    """
    if not isinstance(raw, dict):
        reason = f"planner output is not a JSON object (got {type(raw).__name__})"
        return {"next_action": "response", "execution_commands": [], "parse_error": reason}

    default_todo = _first_text(raw, ("next", "todo_suggestion"))
    items = _command_items(raw)
    commands: list[ToolCommand] = []
    nameless = 0
    for item in items:
        command = _normalize_command(item, default_todo)
        if command is not None:
            commands.append(command)
        elif isinstance(item, dict):
            nameless += 1
            commands.append(_nameless_command(item, default_todo))
    if nameless == len(commands):  # nothing to run: the planner is asked again
        commands = []

    written = _as_text(raw.get("next_action")).strip().lower()
    action = written if written in _ACTIONS else ("execute" if commands else "response")
    if action == "execute" and commands:
        return {"next_action": "execute", "execution_commands": commands}
    problem = _decision_problem(raw, written, items)
    if problem:
        return {"next_action": "response", "execution_commands": [], "parse_error": problem}
    return {"next_action": "response", "execution_commands": []}


def _decision_problem(raw: dict[Any, Any], written: str, items: list[Any]) -> str:
    """Why a reply that is not a usable `execute` is not a clean `response` either."""
    if written == "response":
        return ""
    if written == "execute":
        if items:
            return "none of the execution_commands has a tool_name"
        return 'next_action is "execute" but execution_commands is empty'
    if "next_action" in raw:
        return f'next_action must be "execute" or "response", got {_preview(raw["next_action"])}'
    if items:
        return "none of the execution_commands has a tool_name"
    if any(key in raw for key in _COMMAND_LIST_KEYS):
        return ""  # `{"execution_commands": []}`: nothing to run, a response
    return 'the JSON object has neither "next_action" nor "execution_commands"'


def _preview(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def unparseable_decision(reason: str, raw_text: str = "") -> PlanDecision:
    """Build the `response` decision used when the planner's output could not be read.

    Args:
        reason: Why the output could not be used; stored as `parse_error`.
        raw_text: The planner's raw text; at most 2,000 characters are kept.

    Returns:
        A `response` decision without commands.
    """
    return {
        "next_action": "response",
        "execution_commands": [],
        "parse_error": reason,
        "raw": raw_text[:_RAW_TEXT_LIMIT],
    }


def _command_items(raw: dict[Any, Any]) -> list[Any]:
    """Return the raw command entries of a decision, as a list."""
    for key in _COMMAND_LIST_KEYS:
        container = raw.get(key)
        if container is None:
            continue
        if isinstance(container, list):
            return list(container)
        if isinstance(container, dict):
            return [container]
        return []
    return []


def default_purpose(tool_name: str) -> str:
    """The purpose of a command that gives none (the planner's view leaves it out)."""
    return f"Use {tool_name}"


def _normalize_command(item: Any, default_todo: str) -> ToolCommand | None:
    """Normalize one command, or return None when it cannot be used."""
    if not isinstance(item, dict):
        return None
    tool_name = _first_text(item, _TOOL_NAME_KEYS)
    if not tool_name:
        return None
    purpose = item.get("purpose")
    purpose = (purpose if type(purpose) is str else _as_text(purpose)).strip()
    purpose = purpose or default_purpose(tool_name)
    todo = _first_text(item, ("todo_suggestion", "next")) or default_todo
    command: ToolCommand = {
        "purpose": purpose,
        "tool_name": tool_name,
        "tool_kwargs": _kwargs_of(item),
        "todo_suggestion": todo,
        "next": todo,
    }
    return _with_call_id(command, item)


def _with_call_id(command: ToolCommand, item: dict[Any, Any]) -> ToolCommand:
    """The command with the planner's own id of the call, when it gave a text one."""
    given = item.get("tool_call_id")
    if isinstance(given, str) and given.strip():
        command["tool_call_id"] = given.strip()
    return command


def _nameless_command(item: dict[Any, Any], default_todo: str) -> ToolCommand:
    """A call without a tool name, beside usable ones: kept, so its record says so."""
    todo = _first_text(item, ("todo_suggestion", "next")) or default_todo
    command: ToolCommand = {
        "purpose": _as_text(item.get("purpose")).strip() or "a call with no tool name",
        "tool_name": "",
        "tool_kwargs": _kwargs_of(item),
        "todo_suggestion": todo,
        "next": todo,
    }
    return _with_call_id(command, item)


def _kwargs_of(item: dict[Any, Any]) -> dict[str, Any]:
    """Return a copy of the first usable arguments object of a command, else `{}`."""
    for key in _KWARGS_KEYS:
        value = item.get(key)
        if isinstance(value, str):
            value = _loads_or_none(value)
        if isinstance(value, dict):
            return {  # JSON object keys are text already
                name if type(name) is str else _key_text(name): arg for name, arg in value.items()
            }
    return {}


def _loads_or_none(text: str) -> Any:
    """Decode a JSON string, or return None when it is not valid JSON."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _first_text(source: dict[Any, Any], keys: tuple[str, ...]) -> str:
    """Return the first non-blank text value under `keys`, stripped, else ""."""
    for key in keys:
        value = source.get(key)
        if value is None:  # the usual absent key: no conversion
            continue
        text = (value if type(value) is str else _as_text(value)).strip()  # text mostly
        if text:
            return text
    return ""


def _as_text(value: Any) -> str:
    """Return `value` as text when it is a string or a number, else ""."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return _safe_str(value)
    return ""


def _key_text(key: Any) -> str:
    """Return an argument name as text (JSON object keys already are)."""
    return key if isinstance(key, str) else _safe_str(key)


def _safe_str(value: Any) -> str:
    """Return `str(value)`, or "" when it cannot be converted (e.g. a huge integer)."""
    try:
        return str(value)
    except ValueError:
        return ""
