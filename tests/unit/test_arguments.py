from __future__ import annotations

import copy
from typing import Annotated, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.tools import InjectedToolArg, StructuredTool, tool
from pydantic import BaseModel, Field

from agentloop.governance.arguments import (
    ArgumentError,
    ValidatedArguments,
    repair_argument_names,
    tool_json_schema,
    validate_arguments,
)

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "count": {"type": "integer"},
        "ratio": {"type": "number"},
        "flag": {"type": "boolean"},
        "name": {"type": "string", "default": "anon"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
        "size": {"type": ["integer", "null"]},
        "options": {
            "type": "object",
            "properties": {"depth": {"type": "integer"}},
            "required": ["depth"],
        },
    },
    "required": ["count"],
}


def validate(**kwargs: Any) -> ValidatedArguments:
    return validate_arguments(kwargs, SCHEMA)


# --- tool_json_schema -------------------------------------------------------------------


def test_schema_of_mcp_style_tool_is_a_copy_of_the_dict() -> None:
    raw = {
        "type": "object",
        "properties": {"query": {"type": "string"}, "k": {"type": "integer", "default": 3}},
        "required": ["query"],
    }

    def search(**kwargs: Any) -> str:
        return str(kwargs)

    mcp_tool = StructuredTool.from_function(
        search, name="search", description="Search.", args_schema=raw
    )
    schema = tool_json_schema(mcp_tool)
    assert schema["properties"] == raw["properties"]
    assert schema["required"] == ["query"]
    schema["properties"]["query"]["type"] = "integer"
    assert raw["properties"]["query"]["type"] == "string"


def test_mcp_style_tool_gets_validated_and_coerced() -> None:
    raw = {
        "type": "object",
        "properties": {"query": {"type": "string"}, "k": {"type": "integer", "default": 3}},
        "required": ["query"],
        "additionalProperties": False,
    }
    mcp_tool = StructuredTool.from_function(
        lambda **kw: kw, name="search", description="Search.", args_schema=raw
    )
    schema = tool_json_schema(mcp_tool)
    good = validate_arguments({"query": "cats", "k": "5"}, schema)
    assert good.ok
    assert good.arguments == {"query": "cats", "k": 5}
    bad = validate_arguments({"k": "many", "extra": 1}, schema)
    assert not bad.ok
    assert {error.argument for error in bad.errors} == {"query", "k", "extra"}


class Window(BaseModel):
    start: int
    end: int = 10


def test_schema_of_decorated_tool_keeps_required_and_drops_injected() -> None:
    @tool
    def read(
        path: str,
        lines: int = 20,
        window: Window | None = None,
        user_id: Annotated[str, InjectedToolArg] = "",
    ) -> str:
        """Read a file."""
        return path

    schema = tool_json_schema(read)
    assert set(schema["properties"]) == {"path", "lines", "window"}
    assert schema["required"] == ["path"]
    assert schema["properties"]["lines"]["default"] == 20
    assert "$defs" in schema
    result = validate_arguments({"path": "a.txt", "window": {"start": "2"}}, schema)
    assert result.ok, result.error_message()
    assert result.arguments == {"path": "a.txt", "window": {"start": 2}, "lines": 20}
    nested = validate_arguments({"path": "a.txt", "window": {"end": 3}}, schema)
    assert nested.errors == (ArgumentError("window", "missing field 'start'"),)
    wrong = validate_arguments({"path": "a.txt", "window": "soon"}, schema)
    assert wrong.errors == (ArgumentError("window", "expected object or null, got 'soon'"),)
    deep = validate_arguments({"path": "a.txt", "window": {"start": "x"}}, schema)
    assert deep.errors == (ArgumentError("window", "expected integer, got 'x' (at window.start)"),)


def test_schema_of_pydantic_args_schema() -> None:
    class Args(BaseModel):
        city: str = Field(description="The city.")
        days: int = 1

    weather = StructuredTool.from_function(
        lambda city, days=1: city, name="weather", description="Weather.", args_schema=Args
    )
    schema = tool_json_schema(weather)
    assert schema["required"] == ["city"]
    assert schema["properties"]["days"]["type"] == "integer"


def test_schema_with_root_ref_is_inlined() -> None:
    raw = {
        "$ref": "#/definitions/Args",
        "definitions": {
            "Args": {
                "type": "object",
                "properties": {"n": {"type": "integer"}},
                "required": ["n"],
            }
        },
    }
    mcp_tool = StructuredTool.from_function(
        lambda **kw: kw, name="t", description="T.", args_schema=raw
    )
    schema = tool_json_schema(mcp_tool)
    assert schema["properties"] == {"n": {"type": "integer"}}
    assert validate_arguments({"n": "4"}, schema).arguments == {"n": 4}
    assert not validate_arguments({}, raw).ok


# --- repair_argument_names --------------------------------------------------------------

NAMES_SCHEMA = {
    "type": "object",
    "properties": {"file_name": {}, "info_to_extract": {}, "max_results": {}},
}
ALIASES = {"info_to_extract": ["description", "introduction"]}


def test_alias_is_renamed_to_canonical_name() -> None:
    kwargs = {"description": "prices", "file_name": "a"}
    repaired, notes = repair_argument_names(kwargs, NAMES_SCHEMA, ALIASES)
    assert repaired == {"info_to_extract": "prices", "file_name": "a"}
    assert notes == ["renamed argument 'description' to 'info_to_extract'"]
    assert kwargs == {"description": "prices", "file_name": "a"}


def test_alias_is_kept_when_canonical_name_is_given() -> None:
    kwargs = {"description": "x", "info_to_extract": "y"}
    repaired, notes = repair_argument_names(kwargs, NAMES_SCHEMA, ALIASES)
    assert repaired == kwargs
    assert notes == []


def test_alias_that_is_a_declared_property_is_not_renamed() -> None:
    schema = {"properties": {"description": {}, "info_to_extract": {}}}
    repaired, notes = repair_argument_names({"description": "x"}, schema, ALIASES)
    assert repaired == {"description": "x"}
    assert notes == []


@pytest.mark.parametrize(
    ("given_name", "expected"),
    [
        ("fileName", "file_name"),
        ("FileName", "file_name"),
        ("File-Name", "file_name"),
        ("file name", "file_name"),
        ("FILE_NAME", "file_name"),
        ("maxResults", "max_results"),
    ],
)
def test_names_are_matched_after_normalization(given_name: str, expected: str) -> None:
    repaired, notes = repair_argument_names({given_name: 1}, NAMES_SCHEMA)
    assert repaired == {expected: 1}
    assert notes == [f"renamed argument {given_name!r} to {expected!r}"]


def test_normalized_name_is_not_renamed_over_a_given_argument() -> None:
    repaired, notes = repair_argument_names({"fileName": 1, "file_name": 2}, NAMES_SCHEMA)
    assert repaired == {"fileName": 1, "file_name": 2}
    assert notes == []


def test_ambiguous_and_unknown_names_are_left_alone() -> None:
    schema = {"properties": {"file_name": {}, "FileName": {}}}
    repaired, notes = repair_argument_names({"file-name": 1, "colour": 2}, schema)
    assert repaired == {"file-name": 1, "colour": 2}
    assert notes == []


def test_repair_returns_a_new_dict() -> None:
    kwargs = {"file_name": "a"}
    repaired, _ = repair_argument_names(kwargs, NAMES_SCHEMA)
    repaired["file_name"] = "b"
    assert kwargs == {"file_name": "a"}


def test_repair_of_a_non_object() -> None:
    repaired, notes = repair_argument_names([1, 2], NAMES_SCHEMA)  # type: ignore[arg-type]
    assert repaired == {}
    assert notes == ["arguments must be an object, got list"]


# --- coercion ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"), [("3", 3), (" 3 ", 3), ("-4", -4), (3.0, 3), ("3.0", 3)]
)
def test_integer_coercion(value: Any, expected: int) -> None:
    result = validate(count=value)
    assert result.ok
    assert result.arguments["count"] == expected
    assert type(result.arguments["count"]) is int
    assert result.coercions == (f"count: {value!r} -> {expected!r}",)


@pytest.mark.parametrize("value", ["3.5", "abc", "", 3.5, True, [3]])
def test_integer_coercion_refuses_other_values(value: Any) -> None:
    result = validate(count=value)
    assert not result.ok
    assert result.arguments["count"] == value


def test_integer_error_message() -> None:
    result = validate(count="abc")
    assert result.errors == (ArgumentError("count", "expected integer, got 'abc'"),)
    assert result.error_message() == "count: expected integer, got 'abc'"


@pytest.mark.parametrize(("value", "expected"), [("3.5", 3.5), ("3", 3), (" -1e2 ", -100.0)])
def test_number_coercion(value: str, expected: float) -> None:
    result = validate(count=1, ratio=value)
    assert result.ok
    assert result.arguments["ratio"] == expected


@pytest.mark.parametrize("value", ["nan", "inf", "1e999", "3,5"])
def test_number_coercion_refuses_non_finite_and_malformed(value: str) -> None:
    assert not validate(count=1, ratio=value).ok


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("true", True),
        ("FALSE", False),
        ("Yes", True),
        ("no", False),
        ("1", True),
        ("0", False),
        (" True ", True),
        (1, True),
        (0, False),
    ],
)
def test_boolean_coercion(value: Any, expected: bool) -> None:
    result = validate(count=1, flag=value)
    assert result.ok
    assert result.arguments["flag"] is expected


def test_boolean_coercion_refuses_other_words() -> None:
    result = validate(count=1, flag="maybe")
    assert result.errors == (ArgumentError("flag", "expected boolean, got 'maybe'"),)


@pytest.mark.parametrize(
    ("value", "expected"), [(42, "42"), (2.5, "2.5"), (True, "true"), (False, "false")]
)
def test_string_coercion(value: Any, expected: str) -> None:
    result = validate(count=1, name=value)
    assert result.ok
    assert result.arguments["name"] == expected


def test_array_from_json_string_and_scalar() -> None:
    assert validate(count=1, tags='["a", "b"]').arguments["tags"] == ["a", "b"]
    assert validate(count=1, tags="solo").arguments["tags"] == ["solo"]
    assert validate(count=1, tags=("a", "b")).arguments["tags"] == ["a", "b"]


def test_array_items_are_coerced() -> None:
    result = validate(count=1, tags=[1, True, "x"])
    assert result.ok
    assert result.arguments["tags"] == ["1", "true", "x"]
    assert "tags[0]: 1 -> '1'" in result.coercions


def test_json_string_of_the_wrong_type_is_not_parsed() -> None:
    result = validate(count=1, options="[1, 2]")
    assert not result.ok
    assert result.arguments["options"] == "[1, 2]"


def test_object_from_json_string_with_nested_coercion() -> None:
    result = validate(count=1, options='{"depth": "2"}')
    assert result.ok
    assert result.arguments["options"] == {"depth": 2}


def test_nested_object_properties_are_coerced_and_checked() -> None:
    assert validate(count=1, options={"depth": "7"}).arguments["options"] == {"depth": 7}
    result = validate(count=1, options={"depth": "deep"})
    assert result.errors == (
        ArgumentError("options", "expected integer, got 'deep' (at options.depth)"),
    )


def test_optional_integer_through_any_of_and_type_list() -> None:
    result = validate(count=1, limit="5", size="6")
    assert result.ok
    assert result.arguments["limit"] == 5
    assert result.arguments["size"] == 6
    assert validate(count=1, limit=None, size=None).ok


def test_optional_error_names_all_accepted_types() -> None:
    result = validate(count=1, limit="lots")
    assert result.errors == (ArgumentError("limit", "expected integer or null, got 'lots'"),)


def test_union_keeps_a_value_that_already_matches() -> None:
    schema = {"type": "object", "properties": {"v": {"type": ["integer", "string"]}}}
    result = validate_arguments({"v": "3"}, schema)
    assert result.arguments == {"v": "3"}
    assert result.coercions == ()


def test_defaults_are_filled_for_absent_properties() -> None:
    result = validate(count=1)
    assert result.arguments == {"count": 1, "name": "anon", "limit": None}


def test_null_for_a_non_nullable_property_with_a_default_gets_the_default() -> None:
    result = validate(count=1, name=None)
    assert result.ok
    assert result.arguments["name"] == "anon"


def test_null_for_an_optional_non_nullable_property_without_a_default_is_left_out() -> None:
    result = validate(count=1, flag=None)
    assert result.ok, result.errors
    assert "flag" not in result.arguments
    assert validate(count=None).errors == (ArgumentError("count", "missing required argument"),)


def test_refs_are_followed_when_coercing() -> None:
    schema = {
        "type": "object",
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "integer"}}}},
        "properties": {"points": {"type": "array", "items": {"$ref": "#/$defs/Point"}}},
    }
    result = validate_arguments({"points": [{"x": "1"}, {"x": 2.0}]}, schema)
    assert result.ok
    assert result.arguments == {"points": [{"x": 1}, {"x": 2}]}


# --- required and unknown arguments -----------------------------------------------------


@pytest.mark.parametrize("value", [None, "", "   "])
def test_missing_null_or_blank_required_argument(value: Any) -> None:
    result = validate(count=value)
    assert result.errors == (ArgumentError("count", "missing required argument"),)


def test_absent_required_argument() -> None:
    result = validate(flag=True)
    assert result.errors == (ArgumentError("count", "missing required argument"),)
    assert result.error_message() == "count: missing required argument"


def test_required_nullable_argument_may_be_null() -> None:
    schema = {
        "type": "object",
        "properties": {"v": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
        "required": ["v"],
    }
    assert validate_arguments({"v": None}, schema).ok


@pytest.mark.parametrize("extra", [True, {"type": "string"}])
def test_unknown_keys_are_kept_when_additional_properties_are_allowed(extra: Any) -> None:
    schema = {**SCHEMA, "additionalProperties": extra}
    result = validate_arguments({"count": 1, "colour": "red"}, schema)
    assert result.ok
    assert result.arguments["colour"] == "red"


@pytest.mark.parametrize("closed", [None, False])
def test_unknown_keys_are_errors_unless_allowed_explicitly(closed: bool | None) -> None:
    schema = {**SCHEMA} if closed is None else {**SCHEMA, "additionalProperties": closed}
    result = validate_arguments({"count": 1, "admin": True}, schema)
    assert len(result.errors) == 1
    error = result.errors[0]
    assert error.argument == "admin"
    assert error.message.startswith("unknown argument; accepted arguments: count, ratio")


def test_one_line_per_argument() -> None:
    result = validate(count="x", flag="maybe", options={"depth": "deep"})
    lines = result.error_message().splitlines()
    assert [line.split(":")[0] for line in lines] == ["count", "flag", "options"]


def test_other_jsonschema_errors_are_reported() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 1}, "mode": {"enum": ["a", "b"]}},
        "minProperties": 3,
    }
    result = validate_arguments({"n": "0", "mode": "c"}, schema)
    by_argument = {error.argument: error.message for error in result.errors}
    assert by_argument["n"] == "0 is less than the minimum of 1"
    assert by_argument["mode"] == "expected one of 'a', 'b', got 'c'"
    assert "" in by_argument
    assert by_argument[""] in result.error_message().splitlines()


# --- robustness -------------------------------------------------------------------------


def test_input_is_not_mutated() -> None:
    kwargs: dict[str, Any] = {"count": "3", "tags": ["a", 1], "options": {"depth": "2"}}
    before = copy.deepcopy(kwargs)
    result = validate_arguments(kwargs, SCHEMA)
    assert kwargs == before
    result.arguments["tags"].append("z")
    assert kwargs["tags"] == ["a", 1]


@pytest.mark.parametrize("kwargs", [[1, 2], "count=3", None, 42])
def test_non_object_arguments(kwargs: Any) -> None:
    result = validate_arguments(kwargs, SCHEMA)
    assert not result.ok
    assert result.errors[0].argument == ""
    assert result.errors[0].message.startswith("arguments must be an object, got ")


def test_invalid_schema_means_coercion_only() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": "zero"}}}
    result = validate_arguments({"n": "3", "x": object()}, schema)
    assert result.ok
    assert result.arguments["n"] == 3


def test_unresolvable_remote_ref_does_not_fetch_or_raise() -> None:
    schema = {"type": "object", "properties": {"n": {"$ref": "https://example.invalid/s.json"}}}
    result = validate_arguments({"n": 1}, schema)
    assert result.arguments == {"n": 1}


def test_recursive_schema_and_deep_value() -> None:
    schema = {
        "type": "object",
        "$defs": {"Node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/Node"}}}},
        "properties": {"root": {"$ref": "#/$defs/Node"}},
    }
    value: dict[str, Any] = {}
    for _ in range(2000):
        value = {"child": value}
    result = validate_arguments({"root": value}, schema)
    assert isinstance(result, ValidatedArguments)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=10)
    | st.sampled_from(["3", "3.5", "yes", "[1, 2]", '{"a": 1}', " ", "null"]),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=12,
)
property_schemas = st.sampled_from(
    [
        {"type": "integer"},
        {"type": "number", "minimum": 0},
        {"type": "boolean"},
        {"type": "string", "maxLength": 3},
        {"type": "array", "items": {"type": "integer"}},
        {"type": ["integer", "null"]},
        {"anyOf": [{"type": "string"}, {"type": "null"}]},
        {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
        {"enum": [1, "a"]},
        {"$ref": "#/$defs/Missing"},
        {"type": "integer", "minimum": "bad"},
        {"type": 5},
        {},
    ]
)
schemas = st.builds(
    lambda properties, required, closed: {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": not closed,
    },
    st.dictionaries(st.sampled_from(["a", "b", "c"]), property_schemas, max_size=3),
    st.lists(st.sampled_from(["a", "b", "z"]), max_size=2),
    st.booleans(),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kwargs=st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), json_values, max_size=4)
    | json_values,
    schema=schemas,
)
def test_validate_never_raises(kwargs: Any, schema: dict[str, Any]) -> None:
    before = copy.deepcopy(kwargs)
    result = validate_arguments(kwargs, schema)
    assert isinstance(result, ValidatedArguments)
    assert result.ok == (not result.errors)
    assert isinstance(result.error_message(), str)
    assert repr(kwargs) == repr(before)
    if result.ok and isinstance(kwargs, dict):  # a null may stand for "not given"
        assert {key for key, value in kwargs.items() if value is not None} <= set(result.arguments)


@settings(max_examples=150, deadline=None)
@given(
    kwargs=st.dictionaries(st.text(max_size=12), st.integers(), max_size=5),
    names=st.lists(st.text(max_size=12), max_size=5),
)
def test_repair_never_raises_and_keeps_values(kwargs: dict[str, Any], names: list[str]) -> None:
    schema = {"type": "object", "properties": {name: {} for name in names}}
    repaired, notes = repair_argument_names(kwargs, schema, {"x": ["y", "z"]})
    assert sorted(repaired.values()) == sorted(kwargs.values())
    assert len(notes) == len(set(kwargs) - set(repaired))


def test_exotic_values_do_not_raise() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    kwargs = {"count": object(), "tags": cycle, "ratio": {1, 2}, "flag": b"yes", 3: "x"}
    result = validate_arguments(kwargs, {**SCHEMA, "additionalProperties": False})
    assert not result.ok
    assert {"count", "ratio", "flag", "3"} <= {error.argument for error in result.errors}
