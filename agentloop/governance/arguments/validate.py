"""Validating arguments after coercion, and reporting what is wrong in words a model can use.

Required arguments that are missing, null or blank are reported first; keys the schema
does not declare are refused (naming them and the accepted ones) unless the schema
explicitly allows additional properties; the rest is checked with `jsonschema` after the
values are coerced to the declared types (`coerce`), or, for a tool whose arguments are a
pydantic model, by that model with pydantic's own coercion (`model`).
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
from jsonschema.validators import validator_for  # type: ignore[import-untyped]
from pydantic import BaseModel
from referencing import Registry

from agentloop.base.jsonable import copy_data
from agentloop.governance.arguments.coerce import ABSENT, allows_null, coerce_arguments
from agentloop.governance.arguments.model import check_with_model, location_text
from agentloop.governance.arguments.names import NOT_AN_OBJECT, NameIndex
from agentloop.governance.arguments.schema import (
    SchemaContext,
    inline_root_ref,
    options,
    properties,
    short,
)

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError  # type: ignore[import-untyped]

__all__ = [
    "MISSING_ARGUMENT",
    "UNKNOWN_ARGUMENT",
    "ArgumentError",
    "ArgumentSpec",
    "ValidatedArguments",
    "allows_additional",
    "validate_arguments",
    "validator_for_schema",
]

MISSING_ARGUMENT = "missing required argument"
UNKNOWN_ARGUMENT = "unknown argument; accepted arguments: {accepted}"

_MAX_MESSAGES_PER_ARGUMENT = 3
_MAX_MESSAGE_CHARS = 300


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


def allows_additional(root: Mapping[str, Any]) -> bool:
    """Whether a schema explicitly accepts keys it does not declare."""
    extra = root.get("additionalProperties")
    return extra is True or isinstance(extra, Mapping)


class ArgumentSpec:
    """The argument schema of one tool, compiled once: names, validator, required list.

    Args:
        schema: The JSON schema of the tool's arguments.
        model: The tool's pydantic model, when it has one: it then coerces and validates
            the values (after name repair), not the JSON-schema coercion and `jsonschema`.
    """

    def __init__(self, schema: Mapping[str, Any], model: type[BaseModel] | None = None) -> None:
        self.model = model
        self.root = inline_root_ref(schema) if isinstance(schema, Mapping) else {}
        self.declared = properties(self.root)
        self.names = NameIndex(self.declared)
        self.additional = allows_additional(self.root)
        patterns = self.root.get("patternProperties")
        self._patterns = _compile_patterns(patterns) if isinstance(patterns, Mapping) else []
        required = self.root.get("required")
        self.required = [name for name in required or [] if isinstance(name, str)]
        self._unknown_message = UNKNOWN_ARGUMENT.format(accepted=", ".join(self.declared) or "none")
        self._validator = None if model is not None else validator_for_schema(self.root)
        self.usable = model is not None or self._validator is not None
        """Whether the schema can judge arguments (an invalid one only coerces them)."""

    def repair(
        self, kwargs: Mapping[str, Any], aliases: Mapping[str, Any] | None = None
    ) -> tuple[dict[str, Any], list[str]]:
        """Rename aliased, miscased or misspelt argument names (see `NameIndex.repair`)."""
        return self.names.repair(kwargs, aliases)

    def validate(self, kwargs: Mapping[str, Any]) -> ValidatedArguments:
        """Coerce arguments to the declared types, then validate them (see `validate_arguments`)."""
        if type(kwargs) is not dict and not isinstance(kwargs, Mapping):  # no ABC check for a dict
            error = ArgumentError("", NOT_AN_OBJECT.format(kind=type(kwargs).__name__))
            return ValidatedArguments({}, (error,), ())
        context = SchemaContext(self.root)
        if self.model is not None:
            return self._validate_with_model(self.model, _deep_copy(kwargs), context)
        arguments = coerce_arguments(_deep_copy(kwargs), context)
        errors = self._missing_or_unknown(arguments, context)
        reported = {error.argument for error in errors}
        errors += self._schema_errors(arguments, reported, context)
        return ValidatedArguments(arguments, tuple(errors), tuple(context.notes))

    def _missing_or_unknown(
        self, arguments: Mapping[Any, Any], context: SchemaContext
    ) -> list[ArgumentError]:
        missing = self._missing(arguments, context)
        errors = [ArgumentError(name, MISSING_ARGUMENT) for name in missing] if missing else []
        return errors + self._unknown(arguments)

    def _validate_with_model(
        self, model: type[BaseModel], arguments: dict[Any, Any], context: SchemaContext
    ) -> ValidatedArguments:
        """Judge with the tool's pydantic model; a null optional argument takes its default."""
        errors = self._missing_or_unknown(arguments, context)
        reported = {error.argument for error in errors} if errors else set()
        sent = dict(arguments)
        defaulted: list[Any] = []
        for name, value in arguments.items():  # a loop, not a comprehension: a call less
            if (
                value is None
                and name in self.declared
                and name not in self.required
                and not allows_null(self.declared[name], context)
            ):
                defaulted.append(name)
        for name in defaulted:
            del arguments[name]
        check = check_with_model(model, arguments, reported)
        if check.errors:
            errors += [
                ArgumentError(name, "; ".join(texts)) for name, texts in check.errors.items()
            ]
        notes = [
            f"{name}: None -> {short(check.arguments[name])}"
            for name in defaulted
            if check.arguments.get(name) is not None
        ]
        if errors:  # as sent, so the record shows what the model asked for
            return ValidatedArguments(sent, tuple(errors), ())
        return ValidatedArguments(check.arguments, (), (*notes, *check.notes))

    def _missing(self, arguments: Mapping[str, Any], context: SchemaContext) -> list[str]:
        missing: list[str] = []
        for name in self.required:
            if name in missing:
                continue
            value = arguments.get(name, ABSENT)
            blank = isinstance(value, str) and not value.strip()
            null = value is None and not allows_null(self.declared.get(name), context)
            if value is ABSENT or blank or null:
                missing.append(name)
        return missing

    def _unknown(self, arguments: Mapping[Any, Any]) -> list[ArgumentError]:
        unknown: list[ArgumentError] = []
        if self.additional or not self.usable:
            return unknown
        for key in arguments:  # a loop, not a comprehension: a call less
            if key not in self.declared and not self._matches_pattern(key):
                unknown.append(ArgumentError(str(key), self._unknown_message))
        return unknown

    def _matches_pattern(self, key: Any) -> bool:
        return isinstance(key, str) and any(pattern.search(key) for pattern in self._patterns)

    def _schema_errors(
        self, arguments: Mapping[Any, Any], reported: set[str], context: SchemaContext
    ) -> list[ArgumentError]:
        by_argument: dict[str, list[str]] = {}
        for error in _run_validator(self._validator, arguments):
            if error.validator == "additionalProperties" and not error.absolute_path:
                continue  # unknown keys are reported by `_unknown`, one per key
            argument = _argument_of(error)
            if argument in reported:
                continue
            messages = by_argument.setdefault(argument, [])
            message = _describe(error, context)
            if message not in messages and len(messages) < _MAX_MESSAGES_PER_ARGUMENT:
                messages.append(message)
        return [ArgumentError(name, "; ".join(texts)) for name, texts in by_argument.items()]


def _compile_patterns(patterns: Mapping[Any, Any]) -> list[re.Pattern[str]]:
    compiled = []
    for pattern in patterns:
        try:
            if isinstance(pattern, str):
                compiled.append(re.compile(pattern))
        except re.error:
            continue
    return compiled


def validate_arguments(kwargs: Mapping[str, Any], schema: Mapping[str, Any]) -> ValidatedArguments:
    """Coerce arguments to the types `schema` declares, then validate them.

    Works on a deep copy. Values are converted where the intent is plain
    (`"3"` to 3 for an integer, a scalar to a one-item list, a JSON string to
    the array or object it encodes...), defaults are filled in, required
    arguments that are missing, null or blank are reported, keys the schema does
    not declare are refused unless it allows additional properties, and what
    remains is checked with `jsonschema`. A schema that is itself invalid is not
    used for validation. Never raises. The schema is compiled on each call: to check
    many calls against one schema, build an `ArgumentSpec` once and call its `validate`.

    Args:
        kwargs: The arguments as the model sent them; not modified.
        schema: The JSON schema of the tool's arguments.

    Returns:
        The coerced arguments with the errors found and the conversions made.
    """
    return ArgumentSpec(schema).validate(kwargs)


_IMMUTABLE = (str, int, float, bool, type(None))


def _deep_copy(kwargs: Mapping[Any, Any]) -> dict[Any, Any]:
    copied = dict(kwargs)
    for value in copied.values():
        if type(value) not in _IMMUTABLE:
            break
    else:  # the usual arguments: nothing below the top level to share
        return copied
    try:
        whole: dict[Any, Any] = copy_data(copied)
    except Exception:  # an uncopyable value: coercion builds new containers anyway
        return copied
    return whole


def validator_for_schema(root: Mapping[str, Any]) -> Any:
    """Return a checked jsonschema validator for a schema, or None for an unusable one.

    Each `ArgumentSpec` (one per tool, built when its loop's registry is) builds its own:
    nothing is cached across loops.
    """
    try:  # a copy of plain JSON data: the validator never sees the caller's schema change
        root = json.loads(json.dumps(root, sort_keys=True, default=str))
    except (TypeError, ValueError):  # a schema that is not JSON data
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            validator_class = validator_for(root, default=Draft202012Validator)
            validator_class.check_schema(root)
            return validator_class(root, registry=Registry())
        except Exception:  # a malformed schema or an unresolvable $ref
            return None


def _run_validator(validator: Any, arguments: Mapping[Any, Any]) -> list[ValidationError]:
    """Validate with jsonschema; an unusable schema validates nothing."""
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


def _describe(error: ValidationError, context: SchemaContext) -> str:
    """Write one validation error the way a model can act on it."""
    got = short(error.instance)
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
        choices = ", ".join(short(choice) for choice in error.validator_value[:10])
        text = f"expected one of {choices}, got {got}"
    else:
        text = str(error.message)[:_MAX_MESSAGE_CHARS]
    if len(error.absolute_path) > 1:
        text += f" (at {location_text(error.absolute_path)})"
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


def _union_types(error: ValidationError, context: SchemaContext) -> list[str]:
    kinds: list[str] = []
    for kind, _ in options({"anyOf": error.validator_value}, context):
        if kind not in kinds:
            kinds.append(kind)
    return kinds
