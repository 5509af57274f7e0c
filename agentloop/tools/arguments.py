"""Repair, coerce and validate the arguments a model sends to a tool.

LangChain validates the arguments of tools whose `args_schema` is a pydantic
model, but not of tools whose schema is a plain JSON-schema dict, as MCP tools
have. Everything here works on plain JSON schema so both kinds get the same
treatment: argument names are repaired, values are coerced to the declared
types, defaults are filled in, and what is still wrong is reported per argument
in words a model can act on. Nothing here raises on bad input.
"""

from __future__ import annotations

import copy
import functools
import json
import re
import reprlib
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
from jsonschema.validators import validator_for  # type: ignore[import-untyped]
from pydantic import PydanticUserError
from referencing import Registry

if TYPE_CHECKING:
    from collections.abc import Iterable

    from jsonschema.exceptions import ValidationError  # type: ignore[import-untyped]
    from langchain_core.tools import BaseTool

__all__ = [
    "ArgumentError",
    "ValidatedArguments",
    "repair_argument_names",
    "tool_json_schema",
    "validate_arguments",
]

MISSING_ARGUMENT = "missing required argument"
NOT_AN_OBJECT = "arguments must be an object, got {kind}"
UNKNOWN_ARGUMENT = "unknown argument; accepted arguments: {accepted}"

_MAX_DEPTH = 32
_MAX_REF_HOPS = 16
_MAX_MESSAGES_PER_ARGUMENT = 3
_MAX_MESSAGE_CHARS = 300
_ABSENT = object()
_FAILED = object()
_INTEGER = re.compile(r"[+-]?\d+", re.ASCII)
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)
_TRUE_WORDS = frozenset({"true", "yes", "1"})
_FALSE_WORDS = frozenset({"false", "no", "0"})
_WORD_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SEPARATORS = re.compile(r"[\s\-._]+")
_PYTHON_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "array": list,
    "object": dict,
    "null": type(None),
}
_SHORT_REPR = reprlib.Repr()
_SHORT_REPR.maxstring = 60
_SHORT_REPR.maxother = 60
_SHORT_REPR.maxlist = _SHORT_REPR.maxdict = _SHORT_REPR.maxtuple = 5


@dataclass(frozen=True)
class ArgumentError:
    """One thing wrong with the arguments of a tool call."""

    argument: str
    """The top-level argument concerned, or "" for the arguments as a whole."""
    message: str
    """What is wrong, written for the model."""


@dataclass(frozen=True)
class ValidatedArguments:
    """Arguments after coercion, with whatever validation still found wrong."""

    arguments: dict[str, Any]
    """The coerced arguments, with defaults filled in; a copy of the input."""
    errors: tuple[ArgumentError, ...]
    """Problems left after coercion; empty when the arguments are valid."""
    coercions: tuple[str, ...]
    """Notes on the values that were converted, like `count: '3' -> 3`."""

    @property
    def ok(self) -> bool:
        """Whether the arguments passed validation."""
        return not self.errors

    def error_message(self) -> str:
        """Describe the errors, one line per argument."""
        return "\n".join(
            f"{error.argument}: {error.message}" if error.argument else error.message
            for error in self.errors
        )


# --- schema of a tool ----------------------------------------------------------------


def tool_json_schema(tool: BaseTool) -> dict[str, Any]:
    """Return the JSON schema of the arguments a model may send to `tool`.

    A dict `args_schema` (as MCP tools have) is copied; a pydantic one is taken
    from `tool.tool_call_schema`, which leaves out injected arguments. A model
    whose JSON schema cannot be generated yields a permissive object schema:
    LangChain still validates such tools with pydantic when they run.
    """
    args_schema = tool.args_schema
    if args_schema is None:
        return _empty_object_schema()
    if isinstance(args_schema, dict):
        return _inline_root_ref(copy.deepcopy(args_schema))
    return _inline_root_ref(_model_schema(tool))


def _empty_object_schema() -> dict[str, Any]:
    return {"type": "object", "properties": {}}


def _model_schema(tool: BaseTool) -> dict[str, Any]:
    call_schema: Any = tool.tool_call_schema
    if isinstance(call_schema, dict):
        return copy.deepcopy(call_schema)
    generate = getattr(call_schema, "model_json_schema", None) or getattr(
        call_schema, "schema", None
    )
    if generate is None:
        return _empty_object_schema()
    try:
        schema = generate()
    except (PydanticUserError, TypeError, ValueError):
        return _empty_object_schema()
    return schema if isinstance(schema, dict) else _empty_object_schema()


def _inline_root_ref(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Merge a root `$ref` (`{"$ref": "#/definitions/X", ...}`) into the root."""
    root = dict(schema)
    if "$ref" not in root or "properties" in root:
        return root
    target = _resolve_pointer(root, root["$ref"])
    if not isinstance(target, Mapping):
        return root
    merged = dict(target)
    for key, value in root.items():
        if key != "$ref":
            merged.setdefault(key, value)
    return merged


def _resolve_pointer(root: Mapping[str, Any], ref: Any) -> Any:
    if not isinstance(ref, str) or not ref.startswith("#"):
        return None
    node: Any = root
    for raw in ref[1:].split("/")[1:]:
        part = raw.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


# --- argument names ------------------------------------------------------------------


def repair_argument_names(
    kwargs: Mapping[str, Any],
    schema: Mapping[str, Any],
    aliases: Mapping[str, Sequence[str]] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """Rename misspelt or aliased argument names to the names the schema declares.

    An alias is renamed to its canonical name when the canonical name is absent
    and the alias is not itself a declared property. A key the schema does not
    declare is renamed when its normalized form (snake_case, case-insensitive)
    matches exactly one declared property that is not given yet. Other keys are
    left for validation to judge.

    Args:
        kwargs: The arguments as the model sent them; not modified.
        schema: The JSON schema of the tool's arguments.
        aliases: Canonical argument names mapped to the other names models use.

    Returns:
        A new dict of arguments, and one note per renamed argument.
    """
    if not isinstance(kwargs, Mapping):
        return {}, [NOT_AN_OBJECT.format(kind=type(kwargs).__name__)]
    properties = _properties(_inline_root_ref(schema) if isinstance(schema, Mapping) else {})
    repaired = dict(kwargs)
    notes: list[str] = []
    repaired = _apply_aliases(repaired, properties, aliases or {}, notes)
    repaired = _apply_normalized_names(repaired, properties, notes)
    return repaired, notes


def _apply_aliases(
    arguments: dict[str, Any],
    properties: Mapping[str, Any],
    aliases: Mapping[str, Sequence[str]],
    notes: list[str],
) -> dict[str, Any]:
    for canonical, names in aliases.items():
        if canonical in arguments:
            continue
        for alias in [names] if isinstance(names, str) else names:
            if alias in arguments and alias not in properties:
                arguments = _renamed(arguments, alias, canonical, notes)
                break
    return arguments


def _apply_normalized_names(
    arguments: dict[str, Any], properties: Mapping[str, Any], notes: list[str]
) -> dict[str, Any]:
    by_normal_name: dict[str, list[str]] = {}
    for name in properties:
        by_normal_name.setdefault(_normalize_name(name), []).append(name)
    for key in list(arguments):
        if not isinstance(key, str) or key in properties:
            continue
        matches = by_normal_name.get(_normalize_name(key), [])
        if len(matches) == 1 and matches[0] not in arguments:
            arguments = _renamed(arguments, key, matches[0], notes)
    return arguments


def _normalize_name(name: str) -> str:
    spaced = _WORD_BOUNDARY.sub("_", name)
    return _SEPARATORS.sub("_", spaced).strip("_").lower()


def _renamed(arguments: dict[str, Any], old: str, new: str, notes: list[str]) -> dict[str, Any]:
    notes.append(f"renamed argument {old!r} to {new!r}")
    return {(new if key == old else key): value for key, value in arguments.items()}


# --- coercion ------------------------------------------------------------------------


@dataclass
class _Context:
    """The root schema, for `$ref` lookups, and the coercion notes so far."""

    root: Mapping[str, Any]
    notes: list[str] = field(default_factory=list)

    def resolve(self, schema: Any) -> Mapping[str, Any] | None:
        """Follow local `$ref`s and single-branch `allOf`s to a schema mapping."""
        for _ in range(_MAX_REF_HOPS):
            if not isinstance(schema, Mapping):
                return None
            if "$ref" in schema:
                target = _resolve_pointer(self.root, schema["$ref"])
                if target is None:
                    return schema
                schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
            elif "type" not in schema and _single_all_of(schema) is not None:
                rest = {k: v for k, v in schema.items() if k != "allOf"}
                schema = {**_single_all_of(schema), **rest}
            else:
                return schema
        return None

    def note(self, path: str, before: Any, after: Any) -> None:
        """Record that the value at `path` was converted."""
        self.notes.append(f"{path}: {_short(before)} -> {_short(after)}")


def _single_all_of(schema: Mapping[str, Any]) -> Any:
    all_of = schema.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], Mapping):
        return all_of[0]
    return None


def _properties(schema: Mapping[str, Any]) -> dict[str, Any]:
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return {}
    return {name: sub for name, sub in properties.items() if isinstance(name, str)}


def _declared_types(schema: Mapping[str, Any]) -> list[str]:
    declared = schema.get("type")
    if isinstance(declared, str):
        return [declared]
    if isinstance(declared, list):
        return [name for name in declared if isinstance(name, str)]
    if "properties" in schema:
        return ["object"]
    if "items" in schema:
        return ["array"]
    return []


def _options(schema: Any, context: _Context) -> list[tuple[str, Mapping[str, Any]]]:
    """List the (type, schema) pairs a value may take, looking into unions."""
    resolved = context.resolve(schema)
    if resolved is None:
        return []
    branches = resolved.get("anyOf", resolved.get("oneOf"))
    if "type" not in resolved and isinstance(branches, list):
        options = []
        for branch in branches:
            branch_schema = context.resolve(branch)
            if branch_schema is not None:
                options += [(kind, branch_schema) for kind in _declared_types(branch_schema)]
        return options
    return [(kind, resolved) for kind in _declared_types(resolved)]


def _coerce(value: Any, schema: Any, path: str, context: _Context, depth: int) -> Any:
    if depth > _MAX_DEPTH:
        return value
    options = _options(schema, context)
    for kind, option in options:
        if _is_type(value, kind):
            return _coerce_children(value, kind, option, path, context, depth)
    if value is None:
        return value
    for kind, option in options:
        converted = _convert(value, kind, option, context)
        if converted is not _FAILED:
            context.note(path, value, converted)
            return _coerce_children(converted, kind, option, path, context, depth)
    return value


def _coerce_children(
    value: Any, kind: str, schema: Mapping[str, Any], path: str, context: _Context, depth: int
) -> Any:
    if kind == "array" and isinstance(value, list):
        return _coerce_items(value, schema, path, context, depth)
    if kind == "object" and isinstance(value, dict):
        return _coerce_fields(value, schema, path, context, depth)
    return value


def _coerce_items(
    items: list[Any], schema: Mapping[str, Any], path: str, context: _Context, depth: int
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
    value: dict[Any, Any], schema: Mapping[str, Any], path: str, context: _Context, depth: int
) -> dict[Any, Any]:
    properties = _properties(schema)
    extra = schema.get("additionalProperties")
    coerced = {}
    for key, item in value.items():
        item_schema = properties.get(key, extra) if isinstance(key, str) else None
        if isinstance(item_schema, Mapping):
            item = _coerce(item, item_schema, f"{path}.{key}", context, depth + 1)
        coerced[key] = item
    return coerced


def _is_type(value: Any, kind: str) -> bool:
    if kind in ("integer", "number") and isinstance(value, bool):
        return False
    expected = _PYTHON_TYPES.get(kind)
    return expected is not None and isinstance(value, expected)


def _convert(value: Any, kind: str, schema: Mapping[str, Any], context: _Context) -> Any:
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


def _to_array(value: Any, schema: Mapping[str, Any], context: _Context) -> Any:
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    parsed = _parse_json(value, list)
    if parsed is not _FAILED:
        return parsed
    if isinstance(value, str | int | float | bool):
        return [value]
    item_kinds = {kind for kind, _ in _options(schema.get("items"), context)}
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


def _short(value: Any) -> str:
    return _SHORT_REPR.repr(value)


# --- defaults and required arguments -------------------------------------------------


def _fill_defaults(
    arguments: dict[str, Any], properties: Mapping[str, Any], context: _Context
) -> None:
    for name, schema in properties.items():
        present = arguments.get(name, _ABSENT)
        if present is not _ABSENT and (present is not None or _allows_null(schema, context)):
            continue
        default = _default_of(schema, context)
        if default is _ABSENT or (present is None and default is None):
            continue
        try:
            arguments[name] = copy.deepcopy(default)
        except Exception:
            continue
        if present is None:
            context.note(name, None, default)


def _default_of(schema: Any, context: _Context) -> Any:
    if isinstance(schema, Mapping) and "default" in schema:
        return schema["default"]
    resolved = context.resolve(schema)
    if resolved is not None and "default" in resolved:
        return resolved["default"]
    return _ABSENT


def _allows_null(schema: Any, context: _Context) -> bool:
    return any(kind == "null" for kind, _ in _options(schema, context))


def _missing_required(
    arguments: Mapping[str, Any], root: Mapping[str, Any], context: _Context
) -> list[str]:
    required = root.get("required")
    if not isinstance(required, list):
        return []
    properties = _properties(root)
    missing: list[str] = []
    for name in required:
        if not isinstance(name, str) or name in missing:
            continue
        value = arguments.get(name, _ABSENT)
        blank = isinstance(value, str) and not value.strip()
        null = value is None and not _allows_null(properties.get(name), context)
        if value is _ABSENT or blank or null:
            missing.append(name)
    return missing


def _unknown_arguments(
    arguments: Mapping[Any, Any], root: Mapping[str, Any]
) -> list[ArgumentError]:
    if root.get("additionalProperties") is not False:
        return []
    properties = _properties(root)
    patterns = root.get("patternProperties")
    accepted = ", ".join(properties) or "none"
    return [
        ArgumentError(str(key), UNKNOWN_ARGUMENT.format(accepted=accepted))
        for key in arguments
        if key not in properties and not _matches_pattern(key, patterns)
    ]


def _matches_pattern(key: Any, patterns: Any) -> bool:
    if not isinstance(key, str) or not isinstance(patterns, Mapping):
        return False
    for pattern in patterns:
        try:
            if isinstance(pattern, str) and re.search(pattern, key):
                return True
        except re.error:
            continue
    return False


# --- validation ----------------------------------------------------------------------


def validate_arguments(kwargs: Mapping[str, Any], schema: Mapping[str, Any]) -> ValidatedArguments:
    """Coerce arguments to the types `schema` declares, then validate them.

    Works on a deep copy. Values are converted where the intent is plain
    (`"3"` to 3 for an integer, a scalar to a one-item list, a JSON string to
    the array or object it encodes...), defaults are filled in, required
    arguments that are missing, null or blank are reported, and what remains
    is checked with `jsonschema`. A schema that is itself invalid is not used
    for validation. Never raises.

    Args:
        kwargs: The arguments as the model sent them; not modified.
        schema: The JSON schema of the tool's arguments.

    Returns:
        The coerced arguments with the errors found and the conversions made.
    """
    if not isinstance(kwargs, Mapping):
        error = ArgumentError("", NOT_AN_OBJECT.format(kind=type(kwargs).__name__))
        return ValidatedArguments({}, (error,), ())
    root = _inline_root_ref(schema) if isinstance(schema, Mapping) else {}
    context = _Context(root)
    arguments = _coerce_arguments(_deep_copy(kwargs), root, context)
    missing = _missing_required(arguments, root, context)
    errors = [ArgumentError(name, MISSING_ARGUMENT) for name in missing]
    unknown = _unknown_arguments(arguments, root)
    reported = {error.argument for error in [*errors, *unknown]}
    errors += unknown
    errors += _schema_errors(arguments, root, reported, context)
    return ValidatedArguments(arguments, tuple(errors), tuple(context.notes))


def _deep_copy(kwargs: Mapping[Any, Any]) -> dict[Any, Any]:
    try:
        return copy.deepcopy(dict(kwargs))
    except Exception:  # an uncopyable value: coercion builds new containers anyway
        return dict(kwargs)


def _coerce_arguments(
    arguments: dict[Any, Any], root: Mapping[str, Any], context: _Context
) -> dict[Any, Any]:
    properties = _properties(root)
    for name, schema in properties.items():
        if name in arguments:
            arguments[name] = _coerce(arguments[name], schema, name, context, 0)
    _fill_defaults(arguments, properties, context)
    return arguments


def _schema_errors(
    arguments: Mapping[Any, Any], root: Mapping[str, Any], reported: set[str], context: _Context
) -> list[ArgumentError]:
    found = _run_validator(arguments, root)
    by_argument: dict[str, list[str]] = {}
    for error in found:
        if _is_unknown_argument_error(error, root):
            continue
        argument = _argument_of(error)
        if argument in reported:
            continue
        messages = by_argument.setdefault(argument, [])
        message = _describe(error, context)
        if message not in messages and len(messages) < _MAX_MESSAGES_PER_ARGUMENT:
            messages.append(message)
    return [ArgumentError(name, "; ".join(texts)) for name, texts in by_argument.items()]


def _is_unknown_argument_error(error: ValidationError, root: Mapping[str, Any]) -> bool:
    """Whether `error` is one `_unknown_arguments` already reported, per key."""
    return (
        error.validator == "additionalProperties"
        and not error.absolute_path
        and root.get("additionalProperties") is False
    )


@functools.lru_cache(maxsize=512)
def _validator(schema_json: str) -> Any:
    """Build (once per distinct schema) a checked validator, or None for an unusable schema."""
    root = json.loads(schema_json)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            validator_class = validator_for(root, default=Draft202012Validator)
            validator_class.check_schema(root)
            return validator_class(root, registry=Registry())
        except Exception:  # a malformed schema or an unresolvable $ref
            return None


def _run_validator(arguments: Mapping[Any, Any], root: Mapping[str, Any]) -> list[ValidationError]:
    """Validate with jsonschema; an unusable schema validates nothing."""
    try:
        validator = _validator(json.dumps(root, sort_keys=True, default=str))
    except (TypeError, ValueError):  # a schema that is not JSON data
        return []
    if validator is None:
        return []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            errors: Iterable[ValidationError] = validator.iter_errors(arguments)
            return sorted(errors, key=_error_order)
        except Exception:  # an unresolvable $ref met while validating
            return []


def _error_order(error: ValidationError) -> tuple[int, int]:
    weak = error.validator in ("anyOf", "oneOf", "allOf", "not")
    return len(error.absolute_path), int(weak)


def _argument_of(error: ValidationError) -> str:
    if error.absolute_path:
        return str(error.absolute_path[0])
    if error.validator == "required":
        return _required_name(error)
    return ""


def _required_name(error: ValidationError) -> str:
    required = error.validator_value
    if not isinstance(required, list):
        return ""
    for name in required:
        if error.message == f"{name!r} is a required property":
            return str(name)
    instance = error.instance
    for name in required:
        if isinstance(instance, Mapping) and name not in instance:
            return str(name)
    return ""


def _describe(error: ValidationError, context: _Context) -> str:
    """Write one validation error the way a model can act on it."""
    got = _short(error.instance)
    if error.validator in ("anyOf", "oneOf"):
        inner = _error_in_matching_branch(error)
        if inner is not None:
            return _describe(inner, context)
    if error.validator == "type":
        text = f"expected {_type_words(error.validator_value)}, got {got}"
    elif error.validator in ("anyOf", "oneOf") and _union_types(error, context):
        text = f"expected {' or '.join(_union_types(error, context))}, got {got}"
    elif error.validator == "required":
        name = _required_name(error)
        text = MISSING_ARGUMENT if len(error.absolute_path) == 0 else f"missing field {name!r}"
    elif error.validator == "enum" and isinstance(error.validator_value, list):
        choices = ", ".join(_short(choice) for choice in error.validator_value[:10])
        text = f"expected one of {choices}, got {got}"
    else:
        text = str(error.message)[:_MAX_MESSAGE_CHARS]
    if len(error.absolute_path) > 1:
        text += f" (at {_location(error.absolute_path)})"
    return text


def _error_in_matching_branch(error: ValidationError) -> ValidationError | None:
    """Pick the error of a union branch the value failed for more than its type."""
    depth = len(error.absolute_path)
    inner = [
        sub
        for sub in error.context or ()
        if not (sub.validator == "type" and len(sub.absolute_path) == depth)
    ]
    return min(inner, key=_error_order, default=None)


def _type_words(declared: Any) -> str:
    if isinstance(declared, list):
        return " or ".join(str(kind) for kind in declared)
    return str(declared)


def _union_types(error: ValidationError, context: _Context) -> list[str]:
    kinds: list[str] = []
    for kind, _ in _options({"anyOf": error.validator_value}, context):
        if kind not in kinds:
            kinds.append(kind)
    return kinds


def _location(path: Iterable[Any]) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text.lstrip(".")
