from __future__ import annotations

import contextlib
import cProfile
import json
import pstats
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentloop.planning import PlanParseError, PlanStreamParser, extract_json_object
from agentloop.planning import stream as stream_module

DECISION: dict[str, Any] = {
    "thought": 'the user said "hi" and {braces} \\ here',
    "next_action": "execute",
    "execution_commands": [
        {
            "purpose": "look up",
            "tool_name": "search",
            "tool_kwargs": {"q": "next_action", "nested": {"next_action": "response"}},
            "todo_suggestion": "answer",
        }
    ],
}


def feed_chunks(chunks: list[str]) -> PlanStreamParser:
    parser = PlanStreamParser()
    for chunk in chunks:
        parser.feed(chunk)
    return parser


def split(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def random_split(text: str, rng: random.Random) -> list[str]:
    chunks = []
    index = 0
    while index < len(text):
        size = rng.randint(1, 12)
        chunks.append(text[index : index + size])
        index += size
    return chunks


def chunkings(text: str) -> list[list[str]]:
    rng = random.Random(1234)
    return [[text], split(text, 1), split(text, 3), *(random_split(text, rng) for _ in range(20))]


# --- next_action detection ---------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        json.dumps(DECISION),
        json.dumps(DECISION, indent=2),
        "Here is my plan:\n```json\n" + json.dumps(DECISION, indent=2) + "\n```\nDone.",
    ],
)
def test_same_result_for_every_chunking(text: str) -> None:
    for chunks in chunkings(text):
        parser = feed_chunks(chunks)
        assert parser.next_action == "execute"
        assert not parser.wants_response
        assert parser.text == text
        assert parser.parse() == DECISION


def test_response_is_detected_before_the_end() -> None:
    text = '{"next_action": "response", "execution_commands": [{"tool_name": "x"'
    parser = PlanStreamParser()
    seen_at = None
    for index, char in enumerate(text):
        parser.feed(char)
        if parser.wants_response and seen_at is None:
            seen_at = index
    assert seen_at == text.index('"response"') + len('"response"') - 1


@pytest.mark.parametrize(
    "prefix",
    [
        "",
        "{",
        '{"next_action"',
        '{"next_action":',
        '{"next_action": "',
        '{"next_action": "resp',
        '{"next_action": "response',
        '{"next_action": "response\\',
    ],
)
def test_partial_value_yields_none(prefix: str) -> None:
    for chunks in chunkings(prefix):
        parser = feed_chunks(chunks)
        assert parser.next_action is None
        assert not parser.wants_response


def test_value_is_lowered_and_stripped() -> None:
    assert feed_chunks(['{"next_action": "  RESPONSE\\n"}']).next_action == "response"
    assert feed_chunks(['{"next_action": " Execute "']).next_action == "execute"


def test_nested_next_action_is_ignored() -> None:
    text = '{"plan": {"next_action": "response"}, "list": [{"next_action": "response"}], '
    parser = feed_chunks([text])
    assert parser.next_action is None
    parser.feed('"next_action": "execute"}')
    assert parser.next_action == "execute"


def test_next_action_inside_a_string_value_is_ignored() -> None:
    text = '{"thought": "I will set \\"next_action\\": \\"response\\" later", "x": "next_action"'
    for chunks in chunkings(text):
        assert feed_chunks(chunks).next_action is None


def test_next_action_as_a_value_is_not_a_key() -> None:
    text = '{"key": "next_action", "other": "response"}'
    for chunks in chunkings(text):
        assert feed_chunks(chunks).next_action is None


def test_prose_before_object_is_ignored() -> None:
    text = 'I could say "next_action": "response" here.\n```json\n{"next_action": "execute"}\n```'
    for chunks in chunkings(text):
        assert feed_chunks(chunks).next_action == "execute"


def test_escaped_quotes_and_backslashes() -> None:
    text = r'{"a": "x\\", "b": "\"}", "c": "\\\"", "next_action": "response"}'
    assert json.loads(text)["next_action"] == "response"
    for chunks in chunkings(text):
        assert feed_chunks(chunks).next_action == "response"


def test_escaped_key_is_decoded() -> None:
    text = '{"next\\u005faction": "res\\u0070onse"}'
    for chunks in chunkings(text):
        assert feed_chunks(chunks).next_action == "response"


@pytest.mark.parametrize("value", ["null", "1", "true", '["response"]', '{"a": "response"}'])
def test_non_string_value_leaves_none(value: str) -> None:
    text = '{"next_action": ' + value + ', "other": "response"}'
    for chunks in chunkings(text):
        assert feed_chunks(chunks).next_action is None


def test_scanner_stops_at_end_of_outer_object() -> None:
    parser = feed_chunks(['{"a": 1}', ' then {"next_action": "response"}'])
    assert parser.next_action is None
    parser = feed_chunks(['{"next_action": "execute"} trailing "next_action": "response"'])
    assert parser.next_action == "execute"


def test_last_duplicate_key_wins_like_json() -> None:
    text = '{"next_action": "execute", "next_action": "response"}'
    assert feed_chunks([text]).next_action == json.loads(text)["next_action"]


MANY_COMMANDS = {
    "next_action": "execute",
    "execution_commands": [
        {"tool_name": "a", "tool_kwargs": {"q": "}"}},
        "not an object",
        [{"tool_name": "nested"}],
        {"tool_name": "b", "tool_kwargs": {}},
    ],
}


@pytest.mark.parametrize(
    "text",
    [
        json.dumps(MANY_COMMANDS),
        "Plan:\n```json\n" + json.dumps(MANY_COMMANDS, indent=2) + "\n```",
        json.dumps(DECISION) + ' and {"next_action": "response"}',
        '{"next_action": "response"}',
        '{"next_action": "execute", "execution_commands": {"tool_name": "a"}}',
        '{"next_action": "exec',
        '{"a": "}", "next_action": "response"',
    ],
)
def test_a_reply_in_one_chunk_reads_as_a_streamed_one(text: str) -> None:
    whole = feed_chunks([text])
    streamed = feed_chunks(split(text, 1))
    assert whole.finished == streamed.finished
    assert whole.next_action == streamed.next_action
    assert whole.commands_completed == streamed.commands_completed
    for start in (0, 1, 5):
        assert whole.completed_commands(start) == streamed.completed_commands(start)
    assert whole.text == streamed.text == text
    for _, command in whole.completed_commands():
        command.clear()  # each call hands out objects of its own
    assert whole.completed_commands() == streamed.completed_commands()


def test_empty_feeds_are_harmless() -> None:
    parser = feed_chunks(["", '{"next_action"', "", ': "response"', ""])
    assert parser.next_action == "response"
    assert parser.text == '{"next_action": "response"'


def test_text_before_any_feed() -> None:
    parser = PlanStreamParser()
    assert parser.text == ""
    assert parser.next_action is None
    with pytest.raises(PlanParseError, match="no text"):
        parser.parse()


# --- extract_json_object -----------------------------------------------------------------


def test_plain_json() -> None:
    assert extract_json_object('  {"a": 1}\n') == {"a": 1}


def test_top_level_non_object_is_returned() -> None:
    assert extract_json_object("[1, 2]") == [1, 2]
    assert extract_json_object('"text"') == "text"


@pytest.mark.parametrize("lang", ["json", "JSON", ""])
def test_fenced_block(lang: str) -> None:
    text = f'Sure, here it is:\n```{lang}\n{{"next_action": "response"}}\n```\nAnything else?'
    assert extract_json_object(text) == {"next_action": "response"}


def test_fenced_non_object_value() -> None:
    assert extract_json_object("result:\n```json\n[1, 2]\n```") == [1, 2]


def test_prose_around_object() -> None:
    text = 'My plan is {"next_action": "execute", "x": "a } in a string"} and that is all.'
    assert extract_json_object(text) == {"next_action": "execute", "x": "a } in a string"}


def test_matching_brace_not_last_brace() -> None:
    text = '{"a": {"b": 1}} and a stray } brace, plus {another}'
    assert extract_json_object(text) == {"a": {"b": 1}}


def test_first_fenced_block_used_when_later_ones_differ() -> None:
    text = '```json\n{"a": 1}\n```\ntext\n```json\n{"a": 2}\n```'
    assert extract_json_object(text) == {"a": 1}


def test_literal_newline_in_string_is_tolerated() -> None:
    assert extract_json_object('{"a": "line one\nline two"}') == {"a": "line one\nline two"}


def test_truncated_stream() -> None:
    text = '```json\n{"next_action": "execute", "execution_commands": [{"tool_name": "se'
    assert extract_json_object(text) == {
        "next_action": "execute",
        "execution_commands": [{"tool_name": "se"}],
    }


def test_truncated_stream_through_parser() -> None:
    full = json.dumps(DECISION)
    cut = full[: full.index('"tool_kwargs"') + 5]
    parser = feed_chunks(split(cut, 4))
    assert parser.next_action == "execute"
    parsed = parser.parse()
    assert parsed["next_action"] == "execute"
    assert parsed["execution_commands"][0]["tool_name"] == "search"


@pytest.mark.parametrize("text", ["", "   \n\t"])
def test_empty_text(text: str) -> None:
    with pytest.raises(PlanParseError, match="planner returned no text"):
        extract_json_object(text)


def test_no_object() -> None:
    with pytest.raises(PlanParseError):
        extract_json_object("I cannot help with that.")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('Plan: {"a": 1, "b": ["x",],} ok', {"a": 1, "b": ["x"]}),
        ('{"a": [1}', {"a": [1]}),
        ("{'next_action': 'response', // done\n}", {"next_action": "response"}),
        (
            '{next_action: "execute", execution_commands: []}',
            {"next_action": "execute", "execution_commands": []},
        ),
        ('```json\n{"a": 1,}\n```', {"a": 1}),
        ('{"description": "City name, e.g. "Paris""}', {"description": 'City name, e.g. "Paris"'}),
    ],
)
def test_damaged_objects_are_repaired(text: str, expected: dict[str, Any]) -> None:
    assert extract_json_object(text) == expected


def test_partial_parser_failing_falls_back_to_repair(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream_module, "parse_partial_json", lambda _text: None)
    assert extract_json_object('{"a": 1, "b') == {"a": 1}

    def boom(_text: str) -> Any:
        raise json.JSONDecodeError("bad", _text, 0)

    monkeypatch.setattr(stream_module, "parse_partial_json", boom)
    assert extract_json_object('{"a": 1, "b') == {"a": 1}


def test_a_lone_brace_decodes_to_an_empty_object() -> None:
    assert extract_json_object("Sure! { and that is all") == {}


def test_parse_error_is_a_value_error() -> None:
    assert issubclass(PlanParseError, ValueError)


def test_truncated_inside_a_key_is_trimmed() -> None:
    assert extract_json_object('{"a": 1, "long_key_na') == {"a": 1}
    assert extract_json_object('{"a": [1, 2], "b":') == {"a": [1, 2]}
    assert extract_json_object('{"a": "x\\') == {"a": "x"}


def test_deep_nesting_is_a_parse_error() -> None:
    with pytest.raises(PlanParseError):
        extract_json_object("[" * 100_000)
    with pytest.raises(PlanParseError):
        extract_json_object("{" + '"a":[' * 50_000)
    with pytest.raises(PlanParseError):
        extract_json_object("{" + '"a":[' * 50_000 + "]" * 50_000 + "}")


def test_large_malformed_truncated_text_is_repaired_in_linear_time() -> None:
    text = '{"a": nope, "b": [' + '"x", ' * 40_000
    assert len(extract_json_object(text)["b"]) == 40_000


# --- properties --------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(max_size=12) | st.just("next_action"), children, max_size=4)
    ),
    max_leaves=25,
)
objects = st.dictionaries(
    st.text(max_size=12) | st.just("next_action"),
    json_values | st.sampled_from(["response", "Execute", " RESPONSE ", "resp"]),
    max_size=6,
)


def expected_next_action(obj: dict[str, Any]) -> str | None:
    value = obj.get("next_action")
    return value.strip().lower() if isinstance(value, str) else None


@settings(max_examples=300)
@given(objects, st.booleans(), st.integers(0, 2**32 - 1), st.sampled_from(["", "Plan:\n```json\n"]))
def test_scanner_matches_json_semantics(
    obj: dict[str, Any], ascii_only: bool, seed: int, prefix: str
) -> None:
    text = prefix + json.dumps(obj, ensure_ascii=ascii_only)
    suffix = "\n```" if prefix else ""
    whole = feed_chunks([text + suffix])
    chunked = feed_chunks(random_split(text + suffix, random.Random(seed)))
    assert whole.next_action == chunked.next_action == expected_next_action(obj)
    assert chunked.parse() == obj


@settings(max_examples=300)
@given(st.text(), st.integers(0, 2**32 - 1))
def test_parser_on_arbitrary_text(text: str, seed: int) -> None:
    whole = feed_chunks([text])
    chunked = feed_chunks(random_split(text, random.Random(seed)))
    assert whole.next_action == chunked.next_action
    assert chunked.text == text
    with contextlib.suppress(PlanParseError):
        chunked.parse()


json_ish_text = st.lists(
    st.sampled_from(['"', "\\", "{", "}", "[", "]", ":", ",", " ", "next_action", "response", "x"])
).map("".join)


@settings(max_examples=500)
@given(json_ish_text, st.integers(0, 2**32 - 1))
def test_parser_on_json_ish_text(text: str, seed: int) -> None:
    whole = feed_chunks([text])
    chunked = feed_chunks(random_split(text, random.Random(seed)))
    single = feed_chunks(split(text, 1))
    assert whole.next_action == chunked.next_action == single.next_action
    try:
        reference = json.loads(text)
    except ValueError:
        reference = None
    if isinstance(reference, dict):
        assert whole.next_action == expected_next_action(reference)
    with contextlib.suppress(PlanParseError):
        extract_json_object(text)


# --- performance -------------------------------------------------------------------------


def big_reply(size: int) -> str:
    item = {
        "purpose": 'fetch "page" \\ with {braces} and [brackets]',
        "tool_name": "fetch",
        "tool_kwargs": {"url": "https://example.com/a,b:c", "n": [1, 2, {"k": None}]},
        "todo_suggestion": "read it",
    }
    one = json.dumps(item)
    count = max(1, size // (len(one) + 2) + 1)
    body = ", ".join([one] * count)
    head = 'Plan below.\n```json\n{"execution_commands": ['
    return head + body + '], "next_action": "execute"}\n```'


def calls_feeding(text: str) -> int:
    """The function calls that feeding `text` in 10-character chunks takes.

    Counted by cProfile: the same on a quiet machine and a loaded one, unlike seconds.
    """
    chunks = split(text, 10)
    profile = cProfile.Profile()
    profile.enable()
    parser = feed_chunks(chunks)
    profile.disable()
    assert parser.next_action == "execute"
    return pstats.Stats(profile).total_calls


def test_feeding_is_linear() -> None:
    small = big_reply(100_000)
    large = big_reply(1_000_000)
    assert len(large) >= 1_000_000
    small_calls = calls_feeding(small)
    large_calls = calls_feeding(large)
    # ten times the text: ten times the calls when linear, a hundred when quadratic
    assert 5 < large_calls / small_calls < 20, (small_calls, large_calls)
    parsed = extract_json_object(large)
    assert parsed["next_action"] == "execute"
    assert len(parsed["execution_commands"]) > 1000
