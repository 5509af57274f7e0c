"""Validating arguments with the tool's own pydantic model, and reporting it like the rest.

A tool whose `args_schema` is a pydantic model is judged by that model (`model_validate`
in lax mode), so its arguments get pydantic's own coercion (`"3"` to 3, `"yes"` to true,
`"2024-05-01"` to a date...), its validators and its defaults. A few things models often
send that lax mode refuses are repaired where pydantic refused them, and judged again:
an array or object sent as a JSON string, a lone value for a list, a number for a string.
The result is JSON data (the model's JSON dump, or the values as sent when that dump would
lose them, as a secret's does), with one note per value that changed and one error per
argument, in the shape `validate` gives for JSON-schema tools.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError
from pydantic_core import ErrorDetails

from agentloop.governance.arguments.schema import short

__all__ = ["ModelCheck", "check_with_model", "location_text"]

MAX_MESSAGES_PER_ARGUMENT = 3
MAX_MESSAGE_CHARS = 300
_CONTAINER_ERRORS = frozenset(
    {"list_type", "tuple_type", "set_type", "frozen_set_type", "dict_type", "model_type"}
)
_LIST_ERRORS = frozenset({"list_type", "tuple_type", "set_type", "frozen_set_type"})


@dataclass
class ModelCheck:
    """What the model made of the arguments."""

    arguments: dict[str, Any]
    """The model's JSON dump when they are valid (the arguments as given when that dump
    would not validate back to the same values), else the arguments as given."""
    errors: dict[str, list[str]] = field(default_factory=dict)
    """Messages per top-level argument ("" for the call as a whole)."""
    notes: list[str] = field(default_factory=list)
    """One note per value the model changed, like `count: '3' -> 3`."""


def check_with_model(
    model: type[BaseModel], arguments: dict[str, Any], reported: set[str]
) -> ModelCheck:
    """Validate `arguments` (already a copy) with `model`; errors of `reported` are left out.

    Never raises: a validator of the model that fails otherwise is one error for the call.
    """
    try:
        return _check(model, arguments, reported)
    except Exception as error:  # a validator or serializer of the model itself failed
        check = ModelCheck(arguments)
        check.errors[""] = [f"invalid arguments: {error}"[:MAX_MESSAGE_CHARS]]
        return check


def _check(model: type[BaseModel], arguments: dict[str, Any], reported: set[str]) -> ModelCheck:
    try:
        validated = model.model_validate(arguments)
    except PydanticValidationError as refused:
        first = refused.errors(include_url=False)
        repaired = _repaired(arguments, first)
        if repaired is None:
            return _refusal(arguments, first, reported)
        try:
            validated = model.model_validate(repaired)
        except PydanticValidationError as still_refused:
            return _refusal(
                arguments, _as_sent(first, still_refused, arguments, repaired), reported
            )
    dumped = validated.model_dump(mode="json", by_alias=True)
    # a dump equal to what was sent lost nothing; another may be lossy (a secret, a serializer)
    if dumped != arguments and model.model_validate(dumped) != validated:
        return ModelCheck(dict(arguments))  # as sent, accepted: the tool fills its defaults
    check = ModelCheck(dumped)
    for name, before in arguments.items():
        if name in dumped:
            _note_changes(str(name), before, dumped[name], check.notes)
    return check


def _as_sent(
    first: Sequence[ErrorDetails],
    refused: PydanticValidationError,
    arguments: Mapping[str, Any],
    repaired: Mapping[str, Any],
) -> list[ErrorDetails]:
    """The errors left after repair, told about the values as sent where a repair did not help."""
    changed = {name for name in arguments if repaired.get(name) is not arguments[name]}
    problems = [_top(problem) for problem in refused.errors(include_url=False)]
    failing = {argument for argument, _ in problems}
    return [problem for argument, problem in problems if argument not in changed] + [
        problem for argument, problem in map(_top, first) if argument in changed & failing
    ]


def _top(problem: ErrorDetails) -> tuple[str, ErrorDetails]:
    location = problem.get("loc") or ()
    return (str(location[0]) if location else ""), problem


def _refusal(
    arguments: dict[str, Any], problems: Sequence[ErrorDetails], reported: set[str]
) -> ModelCheck:
    check = ModelCheck(arguments)
    for problem in problems:
        location = problem.get("loc") or ()
        argument = str(location[0]) if location else ""
        if argument in reported:
            continue
        messages = check.errors.setdefault(argument, [])
        text = _describe(problem)
        if text not in messages and len(messages) < MAX_MESSAGES_PER_ARGUMENT:
            messages.append(text)
    return check


def _describe(problem: ErrorDetails) -> str:
    location = problem.get("loc") or ()
    if problem["type"] == "missing" and len(location) > 1:
        text = f"missing field {location[-1]!r}"
        location = location[:-1]  # where the field is missing, as for JSON-schema tools
    elif problem["type"] == "missing":
        text = "missing required argument"
    else:
        text = f"{problem['msg']}, got {short(problem.get('input'))}"
    text = text[:MAX_MESSAGE_CHARS]
    if len(location) > 1:
        text += f" (at {location_text(location)})"
    return text


def _repaired(arguments: dict[str, Any], problems: Sequence[ErrorDetails]) -> dict[str, Any] | None:
    """The arguments with the values models commonly mis-send fixed, or None for none."""
    repaired: Any = arguments
    changed = False
    for problem in problems:
        value = _repair(problem["type"], problem.get("input"))
        if value is not _UNREPAIRABLE:
            repaired, done = _replace(repaired, problem.get("loc") or (), value)
            changed = changed or done
    return repaired if changed else None


_UNREPAIRABLE = object()


def _repair(kind: str, value: Any) -> Any:
    if kind in _CONTAINER_ERRORS and isinstance(value, str) and value.strip()[:1] in ("[", "{"):
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            return _UNREPAIRABLE
        return parsed if isinstance(parsed, list | dict) else _UNREPAIRABLE
    if kind in _LIST_ERRORS and isinstance(value, str | int | float | bool | dict):
        return [value]
    if kind == "string_type" and isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return _UNREPAIRABLE


def _replace(node: Any, location: Sequence[Any], value: Any) -> tuple[Any, bool]:
    """A copy of `node` with the value at `location` replaced (unchanged when not found)."""
    if not location:
        return value, True
    head, rest = location[0], location[1:]
    if isinstance(node, Mapping) and head in node:
        child, done = _replace(node[head], rest, value)
        return ({**node, head: child}, True) if done else (node, False)
    if isinstance(node, list) and isinstance(head, int) and 0 <= head < len(node):
        child, done = _replace(node[head], rest, value)
        return ([*node[:head], child, *node[head + 1 :]], True) if done else (node, False)
    return node, False


_SCALARS = (str, int, bool, type(None))
"""Types whose equal values of the same type have the same canonical JSON (not float:
-0.0 == 0.0)."""


def _note_changes(path: str, before: Any, after: Any, notes: list[str]) -> None:
    """Note every value pydantic changed (a filled-in default is not a change)."""
    kind = type(before)
    if kind is type(after) and kind in _SCALARS and before == after:  # same JSON, no dumps
        return
    if kind is float and type(after) is float and before == after and before != 0.0:
        return
    if kind is list and type(after) is list and _same_plain_list(before, after):
        return  # a long list of plain values pydantic kept: no walk, no dumps
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        for key, item in before.items():
            if key in after:
                _note_changes(f"{path}.{key}", item, after[key], notes)
        return
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        for index, (item, new) in enumerate(zip(before, after, strict=True)):
            _note_changes(f"{path}[{index}]", item, new, notes)
        return
    if _canonical(before) != _canonical(after):
        notes.append(f"{path}: {short(before)} -> {short(after)}")


def _same_plain_list(before: list[Any], after: list[Any]) -> bool:
    """Whether two lists hold the same plain values of the same types (no item walked)."""
    types = list(map(type, before))
    return set(types) <= _PLAIN and types == list(map(type, after)) and before == after


_PLAIN = frozenset({str, int, float, bool, type(None)})


def _canonical(value: Any) -> str:
    try:
        return json.dumps(value, sort_keys=True, default=repr)
    except (TypeError, ValueError, RecursionError):
        return repr(value)


def location_text(path: Sequence[Any]) -> str:
    """Write a location like `window.start` or `items[0].name`."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text.lstrip(".")
