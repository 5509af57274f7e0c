"""The JSON schema of a tool's arguments, and reading it: references, unions, types.

A dict `args_schema` (as MCP tools have) is used as it is; a pydantic one is turned into
JSON schema. `SchemaContext` follows local `$ref`s and single-branch `allOf`s and lists
the types a value may take, for coercion and for error messages.
"""

from __future__ import annotations

import copy
import reprlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import PydanticUserError

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

__all__ = [
    "SchemaContext",
    "declared_types",
    "single_all_of",
    "inline_root_ref",
    "is_type",
    "options",
    "properties",
    "resolve_pointer",
    "short",
    "tool_json_schema",
]

MAX_REF_HOPS = 16
PYTHON_TYPES: dict[str, type | tuple[type, ...]] = {
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


def tool_json_schema(tool: BaseTool) -> dict[str, Any]:
    """Return the JSON schema of the arguments a model may send to `tool`.

    A dict `args_schema` (as MCP tools have) is copied; a pydantic one is taken
    from `tool.tool_call_schema`, which leaves out injected arguments; without one, what
    LangChain binds for the tool (a `Tool`'s one text, a subclass's `_run` arguments). A model
    whose JSON schema cannot be generated yields a permissive object schema:
    LangChain still validates such tools with pydantic when they run.
    """
    args_schema = tool.args_schema
    if args_schema is None:  # a `Tool`, or a subclass whose `_run` declares its arguments
        return _inferred_schema(tool)
    if isinstance(args_schema, dict):
        return inline_root_ref(copy.deepcopy(args_schema))
    return inline_root_ref(_model_schema(tool))


def _inferred_schema(tool: BaseTool) -> dict[str, Any]:
    """The arguments LangChain binds for a tool without `args_schema`, as `create_agent` does.

    A `Tool` takes one text (`__arg1`); a `BaseTool` subclass, the arguments of its `_run`.
    """
    try:
        parameters = convert_to_openai_tool(tool)["function"].get("parameters")
    except (PydanticUserError, TypeError, ValueError):
        return _empty_object_schema()
    if not isinstance(parameters, dict) or parameters.get("type") != "object":
        return _empty_object_schema()
    return copy.deepcopy(parameters)


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


def inline_root_ref(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Merge a root `$ref` (`{"$ref": "#/definitions/X", ...}`) into the root."""
    root = dict(schema)
    if "$ref" not in root or "properties" in root:
        return root
    target = resolve_pointer(root, root["$ref"])
    if not isinstance(target, Mapping):
        return root
    merged = dict(target)
    for key, value in root.items():
        if key != "$ref":
            merged.setdefault(key, value)
    return merged


def resolve_pointer(root: Mapping[str, Any], ref: Any) -> Any:
    """Return what a local JSON pointer (`#/$defs/X`) points to, or None."""
    if not isinstance(ref, str) or not ref.startswith("#"):
        return None
    node: Any = root
    for raw in ref[1:].split("/")[1:]:
        part = raw.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


@dataclass
class SchemaContext:
    """The root schema, for `$ref` lookups, and the coercion notes so far."""

    root: Mapping[str, Any]
    notes: list[str] = field(default_factory=list)

    def resolve(self, schema: Any) -> Mapping[str, Any] | None:
        """Follow local `$ref`s and single-branch `allOf`s to a schema mapping."""
        for _ in range(MAX_REF_HOPS):
            if not isinstance(schema, Mapping):
                return None
            if "$ref" in schema:
                target = resolve_pointer(self.root, schema["$ref"])
                if target is None:
                    return schema
                schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
            elif "type" not in schema and single_all_of(schema) is not None:
                rest = {k: v for k, v in schema.items() if k != "allOf"}
                schema = {**single_all_of(schema), **rest}
            else:
                return schema
        return None

    def note(self, path: str, before: Any, after: Any) -> None:
        """Record that the value at `path` was converted."""
        self.notes.append(f"{path}: {short(before)} -> {short(after)}")


def single_all_of(schema: Mapping[str, Any]) -> Any:
    """Return the only branch of an `allOf`, or None."""
    all_of = schema.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], Mapping):
        return all_of[0]
    return None


def properties(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Return the declared properties of an object schema, by name."""
    declared = schema.get("properties")
    if not isinstance(declared, Mapping):
        return {}
    return {name: sub for name, sub in declared.items() if isinstance(name, str)}


def declared_types(schema: Mapping[str, Any]) -> list[str]:
    """Return the JSON types a schema declares (or implies by its keywords)."""
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


def options(schema: Any, context: SchemaContext) -> list[tuple[str, Mapping[str, Any]]]:
    """List the (type, schema) pairs a value may take, looking into unions."""
    resolved = context.resolve(schema)
    if resolved is None:
        return []
    branches = resolved.get("anyOf", resolved.get("oneOf"))
    if "type" not in resolved and isinstance(branches, list):
        found = []
        for branch in branches:
            branch_schema = context.resolve(branch)
            if branch_schema is not None:
                found += [(kind, branch_schema) for kind in declared_types(branch_schema)]
        return found
    return [(kind, resolved) for kind in declared_types(resolved)]


def is_type(value: Any, kind: str) -> bool:
    """Tell whether `value` already has the JSON type `kind`."""
    if kind in ("integer", "number") and isinstance(value, bool):
        return False
    expected = PYTHON_TYPES.get(kind)
    return expected is not None and isinstance(value, expected)


def short(value: Any) -> str:
    """A short repr of a value, for messages."""
    return _SHORT_REPR.repr(value)
