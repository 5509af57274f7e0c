from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentloop.planning import normalize_plan_decision, unparseable_decision
from agentloop.state import PlanDecision

COMMAND_KEYS = {"purpose", "tool_name", "tool_kwargs", "todo_suggestion", "next"}


def command(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "purpose": "find the weather",
        "tool_name": "weather",
        "tool_kwargs": {"city": "Paris"},
        "todo_suggestion": "summarize",
    }
    base.update(overrides)
    return base


def only_command(decision: PlanDecision) -> dict[str, Any]:
    assert decision["next_action"] == "execute"
    assert len(decision["execution_commands"]) == 1
    return dict(decision["execution_commands"][0])


# --- shape of the output -----------------------------------------------------------------


def test_full_decision_is_kept() -> None:
    raw = {"next_action": "execute", "execution_commands": [command()]}
    assert normalize_plan_decision(raw) == {
        "next_action": "execute",
        "execution_commands": [
            {
                "purpose": "find the weather",
                "tool_name": "weather",
                "tool_kwargs": {"city": "Paris"},
                "todo_suggestion": "summarize",
                "next": "summarize",
            }
        ],
    }


def test_output_key_order() -> None:
    raw = {"execution_commands": [command()], "next_action": "execute"}
    decision = normalize_plan_decision(raw)
    assert list(decision) == ["next_action", "execution_commands"]
    assert list(decision["execution_commands"][0]) == [
        "purpose",
        "tool_name",
        "tool_kwargs",
        "todo_suggestion",
        "next",
    ]


def test_plain_response() -> None:
    assert normalize_plan_decision({"next_action": "response"}) == {
        "next_action": "response",
        "execution_commands": [],
    }


# --- non-dict input ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "type_name"),
    [([], "list"), ("execute", "str"), (None, "NoneType"), (3, "int"), (True, "bool")],
)
def test_non_dict_is_a_response_with_parse_error(raw: Any, type_name: str) -> None:
    decision = normalize_plan_decision(raw)
    assert decision == {
        "next_action": "response",
        "execution_commands": [],
        "parse_error": f"planner output is not a JSON object (got {type_name})",
    }


# --- where commands come from ------------------------------------------------------------


def test_commands_from_tool_commands() -> None:
    decision = normalize_plan_decision({"tool_commands": [command(tool_name="a")]})
    assert only_command(decision)["tool_name"] == "a"


def test_single_tool_command_is_promoted() -> None:
    decision = normalize_plan_decision({"tool_command": command(tool_name="b")})
    assert only_command(decision)["tool_name"] == "b"


@pytest.mark.parametrize("key", ["execution_commands", "tool_commands"])
def test_single_dict_container_is_promoted(key: str) -> None:
    decision = normalize_plan_decision({key: command(tool_name="c")})
    assert only_command(decision)["tool_name"] == "c"


def test_execution_commands_win_over_tool_commands() -> None:
    raw = {
        "execution_commands": [command(tool_name="first")],
        "tool_commands": [command(tool_name="second")],
        "tool_command": command(tool_name="third"),
    }
    assert only_command(normalize_plan_decision(raw))["tool_name"] == "first"


def test_null_container_falls_through_to_next_key() -> None:
    raw = {"execution_commands": None, "tool_commands": [command(tool_name="second")]}
    assert only_command(normalize_plan_decision(raw))["tool_name"] == "second"


@pytest.mark.parametrize("container", ["weather", 3, True, 1.5])
def test_non_list_non_dict_container_gives_no_commands(container: Any) -> None:
    raw = {"next_action": "execute", "execution_commands": container}
    assert normalize_plan_decision(raw) == {
        "next_action": "response",
        "execution_commands": [],
        "parse_error": 'next_action is "execute" but execution_commands is empty',
    }


def test_commands_keep_their_order() -> None:
    raw = {"execution_commands": [command(tool_name=name) for name in ("x", "y", "z")]}
    names = [c["tool_name"] for c in normalize_plan_decision(raw)["execution_commands"]]
    assert names == ["x", "y", "z"]


# --- next_action -------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["EXECUTE", "  Execute\n", "execute"])
def test_next_action_case_and_space_insensitive_execute(value: str) -> None:
    raw = {"next_action": value, "execution_commands": [command()]}
    assert normalize_plan_decision(raw)["next_action"] == "execute"


@pytest.mark.parametrize("value", ["RESPONSE", " response ", "Response"])
def test_next_action_case_and_space_insensitive_response(value: str) -> None:
    raw = {"next_action": value, "execution_commands": [command()]}
    assert normalize_plan_decision(raw) == {"next_action": "response", "execution_commands": []}


@pytest.mark.parametrize("value", [None, "run", 1, ["execute"], {"a": 1}, ""])
def test_invalid_next_action_with_commands_becomes_execute(value: Any) -> None:
    raw = {"next_action": value, "execution_commands": [command()]}
    assert normalize_plan_decision(raw)["next_action"] == "execute"


def test_missing_next_action_with_commands_becomes_execute() -> None:
    assert normalize_plan_decision({"execution_commands": [command()]})["next_action"] == "execute"


@pytest.mark.parametrize("value", [None, "run", 7])
def test_invalid_next_action_without_commands_is_a_plan_error(value: Any) -> None:
    decision = normalize_plan_decision({"next_action": value})
    assert decision["next_action"] == "response"
    assert decision["execution_commands"] == []
    assert decision["parse_error"].startswith('next_action must be "execute" or "response"')


@pytest.mark.parametrize(
    "raw", [{}, {"answer": "Paris is sunny"}, {"name": "get_weather", "description": "x"}]
)
def test_an_object_without_a_decision_is_a_plan_error(raw: dict[str, Any]) -> None:
    decision = normalize_plan_decision(raw)
    assert decision["parse_error"] == (
        'the JSON object has neither "next_action" nor "execution_commands"'
    )


def test_an_empty_command_list_without_next_action_is_a_clean_response() -> None:
    assert normalize_plan_decision({"execution_commands": []}) == {
        "next_action": "response",
        "execution_commands": [],
    }


def test_invalid_next_action_with_only_invalid_commands_is_a_plan_error() -> None:
    raw = {"next_action": "run", "execution_commands": [{"purpose": "no tool"}, "text"]}
    decision = normalize_plan_decision(raw)
    assert (decision["next_action"], decision["execution_commands"]) == ("response", [])
    assert decision["parse_error"] == 'next_action must be "execute" or "response", got "run"'


def test_response_clears_commands() -> None:
    raw = {"next_action": "response", "execution_commands": [command(), command()]}
    assert normalize_plan_decision(raw)["execution_commands"] == []


def test_execute_without_commands_is_a_plan_error() -> None:
    assert normalize_plan_decision({"next_action": "execute", "execution_commands": []}) == {
        "next_action": "response",
        "execution_commands": [],
        "parse_error": 'next_action is "execute" but execution_commands is empty',
    }


# --- commands ----------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["weather", 3, None, ["weather"], True])
def test_non_dict_command_is_dropped(bad: Any) -> None:
    raw = {"next_action": "execute", "execution_commands": [bad, command(tool_name="ok")]}
    decision = normalize_plan_decision(raw)
    assert [c["tool_name"] for c in decision["execution_commands"]] == ["ok"]


@pytest.mark.parametrize("name", ["", "   ", None, [], {"x": 1}, True])
def test_a_command_without_a_valid_tool_name_beside_named_ones_is_kept_nameless(
    name: Any,
) -> None:
    """Kept with an empty name, so its record (tool_not_found) says it was not run."""
    raw = {"execution_commands": [command(tool_name=name), command(tool_name="ok")]}
    decision = normalize_plan_decision(raw)
    assert [c["tool_name"] for c in decision["execution_commands"]] == ["", "ok"]
    assert decision["execution_commands"][0]["purpose"] == "find the weather"


def test_command_without_any_name_key_is_dropped() -> None:
    raw = {"next_action": "execute", "execution_commands": [{"purpose": "p", "tool_kwargs": {}}]}
    decision = normalize_plan_decision(raw)
    assert decision["execution_commands"] == []
    assert decision["parse_error"] == "none of the execution_commands has a tool_name"


def test_tool_name_is_stripped() -> None:
    decision = normalize_plan_decision({"execution_commands": [command(tool_name="  search\t")]})
    assert only_command(decision)["tool_name"] == "search"


@pytest.mark.parametrize("key", ["tool", "name"])
def test_tool_name_fallback_keys(key: str) -> None:
    item = {"purpose": "p", key: "lookup"}
    assert only_command(normalize_plan_decision({"execution_commands": [item]}))["tool_name"] == (
        "lookup"
    )


def test_tool_name_fallback_order() -> None:
    item = {"tool_name": " ", "tool": "second", "name": "third"}
    decision = normalize_plan_decision({"execution_commands": [item]})
    assert only_command(decision)["tool_name"] == "second"


def test_unknown_tools_are_kept() -> None:
    decision = normalize_plan_decision({"execution_commands": [command(tool_name="no_such")]})
    assert only_command(decision)["tool_name"] == "no_such"


def test_numeric_tool_name_is_coerced() -> None:
    decision = normalize_plan_decision({"execution_commands": [command(tool_name=42)]})
    assert only_command(decision)["tool_name"] == "42"


@pytest.mark.parametrize("purpose", ["", "   ", None, ["x"]])
def test_empty_purpose_gets_default(purpose: Any) -> None:
    decision = normalize_plan_decision({"execution_commands": [command(purpose=purpose)]})
    assert only_command(decision)["purpose"] == "Use weather"


def test_missing_purpose_gets_default() -> None:
    decision = normalize_plan_decision({"execution_commands": [{"tool_name": "calc"}]})
    assert only_command(decision)["purpose"] == "Use calc"


def test_numeric_purpose_is_coerced() -> None:
    decision = normalize_plan_decision({"execution_commands": [command(purpose=12.5)]})
    assert only_command(decision)["purpose"] == "12.5"


@pytest.mark.parametrize("kwargs", ["not json", "[1, 2]", 3, None, ["a"], True])
def test_non_dict_kwargs_become_empty(kwargs: Any) -> None:
    decision = normalize_plan_decision({"execution_commands": [command(tool_kwargs=kwargs)]})
    assert only_command(decision)["tool_kwargs"] == {}


def test_missing_kwargs_become_empty() -> None:
    decision = normalize_plan_decision({"execution_commands": [{"tool_name": "now"}]})
    assert only_command(decision)["tool_kwargs"] == {}


def test_json_string_kwargs_are_decoded() -> None:
    item = command(tool_kwargs=json.dumps({"city": "Oslo", "days": 3}))
    decision = normalize_plan_decision({"execution_commands": [item]})
    assert only_command(decision)["tool_kwargs"] == {"city": "Oslo", "days": 3}


@pytest.mark.parametrize("key", ["kwargs", "arguments", "args"])
def test_kwargs_fallback_keys(key: str) -> None:
    item = {"tool_name": "weather", key: {"city": "Rome"}}
    decision = normalize_plan_decision({"execution_commands": [item]})
    assert only_command(decision)["tool_kwargs"] == {"city": "Rome"}


def test_kwargs_fallback_skips_unusable_values() -> None:
    item = {"tool_name": "weather", "tool_kwargs": "nope", "arguments": '{"city": "Lima"}'}
    decision = normalize_plan_decision({"execution_commands": [item]})
    assert only_command(decision)["tool_kwargs"] == {"city": "Lima"}


def test_kwargs_are_copied() -> None:
    kwargs = {"city": "Paris"}
    raw = {"execution_commands": [command(tool_kwargs=kwargs)]}
    decision = normalize_plan_decision(raw)
    decision["execution_commands"][0]["tool_kwargs"]["city"] = "changed"
    assert kwargs == {"city": "Paris"}


def test_todo_suggestion_sets_both_fields() -> None:
    decision = normalize_plan_decision({"execution_commands": [command(todo_suggestion="t")]})
    item = only_command(decision)
    assert (item["todo_suggestion"], item["next"]) == ("t", "t")


def test_todo_falls_back_to_command_next() -> None:
    item = command(todo_suggestion="", next="then compare")
    decision = normalize_plan_decision({"execution_commands": [item]})
    cmd = only_command(decision)
    assert (cmd["todo_suggestion"], cmd["next"]) == ("then compare", "then compare")


def test_todo_falls_back_to_decision_next() -> None:
    item = {"tool_name": "weather"}
    raw: dict[str, Any] = {"next": "decision next", "todo_suggestion": "decision todo"}
    raw["execution_commands"] = [item]
    cmd = only_command(normalize_plan_decision(raw))
    assert (cmd["todo_suggestion"], cmd["next"]) == ("decision next", "decision next")


def test_todo_falls_back_to_decision_todo_suggestion() -> None:
    raw = {"todo_suggestion": "decision todo", "execution_commands": [{"tool_name": "weather"}]}
    cmd = only_command(normalize_plan_decision(raw))
    assert (cmd["todo_suggestion"], cmd["next"]) == ("decision todo", "decision todo")


def test_command_todo_wins_over_decision_level() -> None:
    raw = {"next": "decision", "execution_commands": [command(todo_suggestion="own")]}
    assert only_command(normalize_plan_decision(raw))["todo_suggestion"] == "own"


def test_todo_defaults_to_empty() -> None:
    cmd = only_command(normalize_plan_decision({"execution_commands": [{"tool_name": "w"}]}))
    assert (cmd["todo_suggestion"], cmd["next"]) == ("", "")


def test_numeric_todo_is_coerced() -> None:
    raw = {"execution_commands": [command(todo_suggestion=7)]}
    cmd = only_command(normalize_plan_decision(raw))
    assert (cmd["todo_suggestion"], cmd["next"]) == ("7", "7")


def test_huge_integer_does_not_raise() -> None:
    huge = 10**5000
    decision = normalize_plan_decision({"execution_commands": [command(purpose=huge)]})
    assert only_command(decision)["purpose"] == "Use weather"


def test_raw_is_not_mutated() -> None:
    raw = {
        "next_action": " EXECUTE ",
        "execution_commands": [command(tool_kwargs='{"a": 1}', purpose=""), "junk"],
        "next": "n",
    }
    before = copy.deepcopy(raw)
    normalize_plan_decision(raw)
    assert raw == before


# --- unparseable_decision ----------------------------------------------------------------


def test_unparseable_decision() -> None:
    assert unparseable_decision("bad json", "{oops") == {
        "next_action": "response",
        "execution_commands": [],
        "parse_error": "bad json",
        "raw": "{oops",
    }


def test_unparseable_decision_defaults_and_cuts_raw() -> None:
    assert unparseable_decision("empty")["raw"] == ""
    long_raw = "x" * 5_000
    decision = unparseable_decision("too long", long_raw)
    assert decision["raw"] == "x" * 2_000
    assert decision["next_action"] == "response"
    assert decision["execution_commands"] == []


# --- properties --------------------------------------------------------------------------

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
    | st.sampled_from(["execute", "response", " Execute ", "RESPONSE", "w", "{}", '{"a": 1}'])
)
keys = st.sampled_from(
    [
        "next_action",
        "execution_commands",
        "tool_commands",
        "tool_command",
        "purpose",
        "tool_name",
        "tool",
        "name",
        "tool_kwargs",
        "kwargs",
        "arguments",
        "args",
        "todo_suggestion",
        "next",
    ]
) | st.text(max_size=8)
json_like = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(keys, children, max_size=6),
    max_leaves=40,
)
decision_like = st.dictionaries(keys, json_like, max_size=8)


def assert_valid(decision: PlanDecision) -> None:
    assert decision["next_action"] in ("execute", "response")
    commands = decision["execution_commands"]
    assert isinstance(commands, list)
    if decision["next_action"] == "response":
        assert commands == []
    else:
        assert commands
    for item in commands:
        assert isinstance(item, dict)
        assert set(item) == COMMAND_KEYS
        for key in ("purpose", "tool_name", "todo_suggestion", "next"):
            assert isinstance(item[key], str)  # type: ignore[literal-required]
        assert item["tool_name"].strip() == item["tool_name"]
        assert item["purpose"] != ""
        assert item["todo_suggestion"] == item["next"]
        assert isinstance(item["tool_kwargs"], dict)
        assert all(isinstance(k, str) for k in item["tool_kwargs"])
    if commands:  # a nameless command only beside named ones
        assert any(item["tool_name"] for item in commands)
    if "parse_error" in decision:
        assert isinstance(decision["parse_error"], str)


@settings(max_examples=400)
@given(json_like | decision_like)
def test_never_raises_and_is_valid(raw: Any) -> None:
    assert_valid(normalize_plan_decision(raw))


@settings(max_examples=300)
@given(decision_like)
def test_never_mutates_and_is_deterministic(raw: dict[str, Any]) -> None:
    before = copy.deepcopy(raw)
    first = normalize_plan_decision(raw)
    assert raw == before
    assert normalize_plan_decision(raw) == first


@given(
    st.lists(
        st.fixed_dictionaries(
            {"tool_name": st.text(min_size=1, max_size=10).filter(lambda s: s.strip())},
            optional={"purpose": json_like, "tool_kwargs": json_like, "next": json_like},
        ),
        min_size=1,
        max_size=5,
    )
)
def test_named_commands_are_all_kept(items: list[dict[str, Any]]) -> None:
    decision = normalize_plan_decision({"execution_commands": items})
    assert decision["next_action"] == "execute"
    assert [c["tool_name"] for c in decision["execution_commands"]] == [
        i["tool_name"].strip() for i in items
    ]
