"""References between the commands of one plan: `"$N"` and `"${N}"` in tool arguments.

A command's `tool_kwargs` may use the result of another command of the same plan,
numbered from 1:

- a string that is exactly `"$N"` is the whole result of command N, with its type (text,
  number, object...);
- `"${N}"` inside a string is replaced by the text of that result (`result_text`); a
  string that is only `"${N}"` is that text too. One string may hold several.

References are looked for in every value of the arguments, at any depth of dicts and
lists (never in keys). A command may only refer to commands listed before it: a plan
with a forward, self or out-of-range reference is refused before anything runs
(`reference_problem`). Since every reference points backward, the references of a plan
never form a cycle: running the commands in their listed order always meets each
command after the ones it needs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from agentloop.base.jsonable import copy_data
from agentloop.state import ToolCommand

__all__ = [
    "GENERIC_REFERENCE_EXAMPLE",
    "REFERENCE_FAILED_TEMPLATE",
    "REFERENCE_UNAVAILABLE_TEMPLATE",
    "command_dependencies",
    "reference_problem",
    "referenced_numbers",
    "resolve_references",
    "result_text",
]

_WHOLE = re.compile(r"\$(\d+)")
"""A whole-value reference (matched against the entire string)."""
_EMBEDDED = re.compile(r"\$\{(\d+)\}")
"""A text reference, anywhere in a string."""

REFERENCE_FAILED_TEMPLATE = (
    "{tool_name} was not run: its argument refers to ${number} ({referenced_tool}), "
    "which failed: {error}"
)
"""The error of a call whose reference points at a command that failed or did not run."""

REFERENCE_UNAVAILABLE_TEMPLATE = (
    "{tool_name} was not run: its argument refers to ${number} ({referenced_tool}), whose "
    "whole result is no longer at hand (only a cut copy is), and a tool that may write is "
    "never given part of a result"
)
"""The error of a write whose reference points at a result only kept cut."""

GENERIC_REFERENCE_EXAMPLE = '"tool_kwargs": {"text": "${1}"} uses the text of command 1\'s result'
"""How the plan prompt shows a reference when no tool has an argument to show it with."""


def _numbers_in(text: str) -> list[int]:
    whole = _WHOLE.fullmatch(text)
    if whole is not None:
        return [int(whole.group(1))]
    return [int(number) for number in _EMBEDDED.findall(text)]


_SCALARS = (int, float, bool, type(None))


def referenced_numbers(value: Any) -> list[int]:
    """The command numbers (1-based) a value refers to, sorted, each once.

    Args:
        value: A command's arguments, or any part of them.
    """
    found: set[int] = set()
    pending = [*value.values()] if type(value) is dict else [value]
    for item in pending:  # grows while it is read: each part is visited once
        kind = type(item)
        if kind in _SCALARS:  # most arguments: no reference, no ABC check
            continue
        if kind is dict:
            pending.extend(item.values())
        elif isinstance(item, str):
            found.update(_numbers_in(item))
        elif isinstance(item, Mapping):
            pending.extend(item.values())
        elif isinstance(item, list | tuple):
            pending.extend(item)
    return sorted(found) if found else []


def command_dependencies(command: ToolCommand) -> list[int]:
    """The positions (0-based) of the commands whose results a command's arguments use."""
    return [number - 1 for number in referenced_numbers(command["tool_kwargs"])]


def reference_problem(commands: Sequence[ToolCommand]) -> str:
    """Why the references of a plan cannot be used ("" when they can).

    A command may refer only to a command listed before it; a reference to itself, to a
    later command or to a number outside the plan is a problem.

    Args:
        commands: The plan's commands, in order.
    """
    count = len(commands)
    for position, command in enumerate(commands, start=1):
        where = f"command {position} ({command['tool_name']}) refers to "
        for number in referenced_numbers(command["tool_kwargs"]):
            if number == position:
                return f"{where}${number}, its own result; use only results of earlier commands"
            if number < 1 or number > count:
                return f"{where}${number}, but the plan's commands are numbered 1 to {count}"
            if number > position:
                return (
                    f"{where}${number}, a later command; a command can use only the results "
                    "of the commands listed before it"
                )
    return ""


def result_text(result: Any) -> str:
    """The text a `"${N}"` reference stands for: a string as it is, anything else as JSON."""
    if isinstance(result, str):
        return result
    return json.dumps(result, ensure_ascii=False, separators=(",", ":"), default=str)


def resolve_references(value: Any, results: Mapping[int, Any]) -> Any:
    """Replace the references in a value by the results they name (a new value).

    Args:
        value: A command's arguments, or any part of them.
        results: The results of the referenced commands, by command number (1-based). A
            reference to a number missing here is left as it is written.

    Returns:
        The value with `"$N"` replaced by (a copy of) result N and `"${N}"` by its text.
    """
    if isinstance(value, str):
        whole = _WHOLE.fullmatch(value)
        if whole is not None:
            number = int(whole.group(1))
            return copy_data(results[number]) if number in results else value

        def text(match: re.Match[str]) -> str:
            number = int(match.group(1))
            return result_text(results[number]) if number in results else match.group(0)

        return _EMBEDDED.sub(text, value)
    if isinstance(value, Mapping):
        return {key: resolve_references(item, results) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [resolve_references(item, results) for item in value]
    return value
