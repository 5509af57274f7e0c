"""Coercing argument values to the types their schema declares, and filling defaults.

Values are converted where the intent is plain: `"3"` to 3 for an integer, a scalar to
a one-item list, a JSON string to the array or object it encodes, `"yes"` to true.
Every conversion is noted. Nothing here raises on bad input: what cannot be converted
is left for validation to report.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from typing import Any

from agentloop.governance.arguments.schema import (
    SchemaContext,
    is_type,
    options,
    properties,
)

__all__ = ["ABSENT", "allows_null", "coerce_arguments"]

ABSENT = object()
"""Stands for an argument that was not given."""
_MAX_DEPTH = 32
_FAILED = object()
_INTEGER = re.compile(r"[+-]?\d+", re.ASCII)
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)
_TRUE_WORDS = frozenset({"true", "yes", "1"})
_FALSE_WORDS = frozenset({"false", "no", "0"})


def coerce_arguments(arguments: dict[Any, Any], context: SchemaContext) -> dict[Any, Any]:
    """Coerce the declared arguments in place and fill in defaults; return `arguments`."""
    declared = properties(context.root)
    for name, schema in declared.items():
        if name in arguments:
            arguments[name] = _coerce(arguments[name], schema, name, context, 0)
    _fill_defaults(arguments, declared, context)
    return arguments


def _coerce(value: Any, schema: Any, path: str, context: SchemaContext, depth: int) -> Any:
    if depth > _MAX_DEPTH:
        return value
    choices = options(schema, context)
    for kind, option in choices:
        if is_type(value, kind):
            return _coerce_children(value, kind, option, path, context, depth)
    if value is None:
        return value
    for kind, option in choices:
        converted = _convert(value, kind, option, context)
        if converted is not _FAILED:
            context.note(path, value, converted)
            return _coerce_children(converted, kind, option, path, context, depth)
    return value


def _coerce_children(
    value: Any, kind: str, schema: Mapping[str, Any], path: str, context: SchemaContext, depth: int
) -> Any:
    if kind == "array" and isinstance(value, list):
        return _coerce_items(value, schema, path, context, depth)
    if kind == "object" and isinstance(value, dict):
        return _coerce_fields(value, schema, path, context, depth)
    return value


def _coerce_items(
    items: list[Any], schema: Mapping[str, Any], path: str, context: SchemaContext, depth: int
) -> list[Any]:
    prefix = schema.get("prefixItems")
    prefix_schemas = prefix if isinstance(prefix, list) else []
    rest = schema.get("items")
    coerced = []
    for index, item in enumerate(items):
        item_schema = prefix_schemas[index] if index < len(prefix_schemas) else rest
        if isinstance(item_schema, Mapping):
            item = _coerce(item, item_schema, f"{path}[{index}]", context, depth + 1)
        coerced.append(item)
    return coerced


def _coerce_fields(
    value: dict[Any, Any], schema: Mapping[str, Any], path: str, context: SchemaContext, depth: int
) -> dict[Any, Any]:
    declared = properties(schema)
    extra = schema.get("additionalProperties")
    coerced = {}
    for key, item in value.items():
        item_schema = declared.get(key, extra) if isinstance(key, str) else None
        if isinstance(item_schema, Mapping):
            item = _coerce(item, item_schema, f"{path}.{key}", context, depth + 1)
        coerced[key] = item
    return coerced


def _convert(value: Any, kind: str, schema: Mapping[str, Any], context: SchemaContext) -> Any:
    """Convert `value` to the JSON type `kind`, or return `_FAILED`."""
    if kind == "integer":
        return _to_integer(value)
    if kind == "number":
        return _to_number(value)
    if kind == "boolean":
        return _to_boolean(value)
    if kind == "string":
        return _to_string(value)
    if kind == "array":
        return _to_array(value, schema, context)
    if kind == "object":
        return _parse_json(value, dict)
    return _FAILED


def _to_integer(value: Any) -> Any:
    if isinstance(value, float):
        return int(value) if value.is_integer() else _FAILED
    if isinstance(value, str):
        number = _to_number(value)
        if isinstance(number, int):
            return number
        if isinstance(number, float) and number.is_integer():
            return int(number)
    return _FAILED


def _to_number(value: Any) -> Any:
    if not isinstance(value, str):
        return _FAILED
    text = value.strip()
    try:
        if _INTEGER.fullmatch(text):
            return int(text)
        if _NUMBER.fullmatch(text):
            number = float(text)
            return number if number - number == 0 else _FAILED
    except ValueError:
        pass
    return _FAILED


def _to_boolean(value: Any) -> Any:
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE_WORDS:
            return True
        if word in _FALSE_WORDS:
            return False
    elif isinstance(value, int) and value in (0, 1):
        return bool(value)
    return _FAILED


def _to_string(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        try:
            return str(value)
        except ValueError:
            return _FAILED
    return _FAILED


def _to_array(value: Any, schema: Mapping[str, Any], context: SchemaContext) -> Any:
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    parsed = _parse_json(value, list)
    if parsed is not _FAILED:
        return parsed
    if isinstance(value, str | int | float | bool):
        return [value]
    item_kinds = {kind for kind, _ in options(schema.get("items"), context)}
    if isinstance(value, dict) and "object" in item_kinds:
        return [value]
    return _FAILED


def _parse_json(value: Any, expected: type) -> Any:
    if not isinstance(value, str) or not value.strip().startswith(("[", "{")):
        return _FAILED
    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError):
        return _FAILED
    return parsed if isinstance(parsed, expected) else _FAILED


def _fill_defaults(
    arguments: dict[str, Any], declared: Mapping[str, Any], context: SchemaContext
) -> None:
    """Give absent properties their defaults.

    A null where null is not allowed means "not given": the property gets its default,
    or is left out when it is optional (a required one stays missing).
    """
    required = context.root.get("required") if isinstance(context.root, Mapping) else None
    needed = set(required) if isinstance(required, list) else set()
    for name, schema in declared.items():
        present = arguments.get(name, ABSENT)
        if present is not ABSENT and (present is not None or allows_null(schema, context)):
            continue
        default = _default_of(schema, context)
        if default is ABSENT or (present is None and default is None):
            if present is None and name not in needed:
                del arguments[name]
                context.notes.append(f"{name}: None -> left out")
            continue
        try:
            arguments[name] = copy.deepcopy(default)
        except Exception:
            continue
        if present is None:
            context.note(name, None, default)


def _default_of(schema: Any, context: SchemaContext) -> Any:
    if isinstance(schema, Mapping) and "default" in schema:
        return schema["default"]
    resolved = context.resolve(schema)
    if resolved is not None and "default" in resolved:
        return resolved["default"]
    return ABSENT


def allows_null(schema: Any, context: SchemaContext) -> bool:
    """Tell whether a schema accepts null."""
    return any(kind == "null" for kind, _ in options(schema, context))
