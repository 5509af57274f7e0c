"""Repair, coerce and validate the arguments a model sends to a tool.

Compiled once per tool (`ArgumentSpec`): argument names are repaired on the JSON schema
(`names`); a tool whose `args_schema` is a pydantic model is then judged by that model,
with pydantic's own coercion (`model`); a tool whose schema is a plain JSON-schema dict,
as MCP tools have, gets its values coerced to the declared types and defaults filled in
(`coerce`) and is checked with `jsonschema` (`validate`). Either way, what is still wrong
is reported per argument in words a model can act on, and every converted value is noted.
Nothing here raises on bad input.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentloop.governance.arguments.names import NOT_AN_OBJECT, NameIndex
from agentloop.governance.arguments.schema import inline_root_ref, properties, tool_json_schema
from agentloop.governance.arguments.validate import (
    MISSING_ARGUMENT,
    UNKNOWN_ARGUMENT,
    ArgumentError,
    ArgumentSpec,
    ValidatedArguments,
    validate_arguments,
)

__all__ = [
    "MISSING_ARGUMENT",
    "NOT_AN_OBJECT",
    "UNKNOWN_ARGUMENT",
    "ArgumentError",
    "ArgumentSpec",
    "ValidatedArguments",
    "repair_argument_names",
    "tool_json_schema",
    "validate_arguments",
]


def repair_argument_names(
    kwargs: Mapping[str, Any],
    schema: Mapping[str, Any],
    aliases: Mapping[str, Sequence[str]] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """Rename misspelt or aliased argument names to the names the schema declares.

    An alias is renamed to its canonical name when the canonical name is absent and the
    alias is not itself a declared property. A key the schema does not declare is renamed
    when it matches exactly one declared property that is not given yet: up to case and
    separators, or by a close spelling. Other keys are left for validation to judge.

    Args:
        kwargs: The arguments as the model sent them; not modified.
        schema: The JSON schema of the tool's arguments.
        aliases: Canonical argument names mapped to the other names models use.

    Returns:
        A new dict of arguments, and one note per renamed argument.
    """
    root = inline_root_ref(schema) if isinstance(schema, Mapping) else {}
    return NameIndex(properties(root)).repair(kwargs, aliases)
