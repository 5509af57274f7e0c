from __future__ import annotations

import cProfile
import dataclasses
import datetime
import enum
import json
import pstats
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, ToolMessage
from pydantic import BaseModel

from agentloop.governance.results import (
    CYCLE_MARKER,
    TOO_DEEP_MARKER,
    TruncatedResult,
    to_jsonable,
    truncate_result,
)

OVERSHOOT = 64
"""Allowed excess over max_chars, for markers (see `truncate_result`)."""


def size_of(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    return len(json.dumps(value, ensure_ascii=False))


def strict_dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


# --- to_jsonable ------------------------------------------------------------------------


class Colour(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


class Hit(BaseModel):
    title: str
    when: datetime.date
    score: float


@dataclasses.dataclass
class Page:
    url: str
    tags: tuple[str, ...]


def test_plain_data_is_unchanged() -> None:
    data = {"a": [1, 2.5, "x", None, True], "b": {"c": []}}
    assert to_jsonable(data) == data


def test_pydantic_models_and_dataclasses() -> None:
    hit = Hit(title="t", when=datetime.date(2024, 1, 2), score=0.5)
    assert to_jsonable(hit) == {"title": "t", "when": "2024-01-02", "score": 0.5}
    assert to_jsonable(Page("u", ("a", "b"))) == {"url": "u", "tags": ["a", "b"]}
    assert to_jsonable([hit]) == [{"title": "t", "when": "2024-01-02", "score": 0.5}]


def test_scalar_types() -> None:
    moment = datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
    uid = UUID("12345678-1234-5678-1234-567812345678")
    assert to_jsonable(moment) == "2024-01-02T03:04:05Z"  # ISO 8601, as pydantic writes it
    assert to_jsonable(datetime.date(2024, 1, 2)) == "2024-01-02"
    assert to_jsonable(uid) == "12345678-1234-5678-1234-567812345678"
    assert to_jsonable(Path("/tmp/x")) == "/tmp/x"
    assert to_jsonable(Decimal("1.10")) == "1.10"
    assert to_jsonable(Colour.RED) == "red"
    assert to_jsonable(Level.HIGH) == 3
    assert to_jsonable(float("nan")) == "NaN"
    assert to_jsonable([float("inf"), float("-inf")]) == ["Infinity", "-Infinity"]


def test_sets_and_tuples_become_lists() -> None:
    assert to_jsonable((1, 2)) == [1, 2]
    assert to_jsonable({3, 1, 2}) == [1, 2, 3]
    assert to_jsonable(frozenset({"a"})) == ["a"]


def test_bytes() -> None:
    assert to_jsonable(b"hello") == "hello"
    assert to_jsonable(b"\xff\xfe") == "<2 bytes>"
    assert to_jsonable(b"a" * 100_000) == "<100000 bytes>"
    assert to_jsonable(bytearray(b"hi")) == "hi"


def test_messages_become_their_content() -> None:
    assert to_jsonable(ToolMessage(content="done", tool_call_id="1")) == "done"
    blocks = [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]
    assert to_jsonable(ToolMessage(content=blocks, tool_call_id="1")) == "one\ntwo"
    assert to_jsonable(AIMessage(content="hi")) == "hi"


def test_text_content_blocks_are_joined() -> None:
    blocks = [{"type": "text", "text": "a", "id": "x"}, {"type": "text", "text": "b"}]
    assert to_jsonable(blocks) == "a\nb"


def test_mixed_content_blocks_stay_a_list() -> None:
    blocks = [{"type": "text", "text": "a"}, {"type": "image", "url": "http://x"}]
    assert to_jsonable(blocks) == blocks
    assert to_jsonable([]) == []


def test_keys_become_strings() -> None:
    assert to_jsonable({1: "a", None: "b", 2.5: "c", Colour.RED: "d", (1, 2): "e"}) == {
        "1": "a",
        "null": "b",
        "2.5": "c",
        "red": "d",
        "[1, 2]": "e",
    }
    assert to_jsonable({True: "t"}) == {"true": "t"}


def test_unknown_objects_become_a_bounded_repr() -> None:
    class Thing:
        def __repr__(self) -> str:
            return "T" * 5000

    class Broken:
        def __repr__(self) -> str:
            raise RuntimeError

    text = to_jsonable(Thing())
    assert isinstance(text, str)
    assert len(text) <= 1000
    assert text.startswith("TTT")
    assert to_jsonable(Broken()) == "<unrepresentable Broken>"
    assert to_jsonable(object()).startswith("<object object")


def test_cycles_are_marked() -> None:
    data: dict[str, Any] = {"a": 1}
    data["self"] = data
    items: list[Any] = [1]
    items.append(items)
    assert to_jsonable(data) == {"a": 1, "self": CYCLE_MARKER}
    assert to_jsonable(items) == [1, CYCLE_MARKER]


def test_shared_references_are_not_cycles() -> None:
    shared = {"x": 1}
    assert to_jsonable([shared, shared]) == [{"x": 1}, {"x": 1}]


def test_deep_nesting_is_cut_without_recursion_error() -> None:
    deep: list[Any] = []
    current = deep
    for _ in range(100_000):
        child: list[Any] = []
        current.append(child)
        current = child
    converted = to_jsonable(deep)
    text = strict_dumps(converted)
    assert text.count("[") == 50
    assert TOO_DEEP_MARKER in text


def test_output_is_strict_json() -> None:
    value = {"n": float("nan"), "b": b"\x00\xff", "o": object(), "s": {1}, "t": (Level.HIGH,)}
    strict_dumps(to_jsonable(value))


# --- truncate_result --------------------------------------------------------------------


def test_small_results_are_returned_as_they_are() -> None:
    text = "short"
    result = truncate_result(text, 100)
    assert result == TruncatedResult(text, truncated=False, original_chars=5)
    assert result.value is text
    data = {"a": [1, 2]}
    assert truncate_result(data, 100) == TruncatedResult(data, False, len(json.dumps(data)))


def test_long_string_is_cut_with_a_marker() -> None:
    result = truncate_result("x" * 1000, 200)
    assert result.truncated
    assert result.original_chars == 1000
    assert len(result.value) <= 200
    assert result.value.endswith("chars]")
    omitted = int(result.value.rsplit("truncated ", 1)[1].split(" ")[0])
    assert len(result.value) - len(f"...[truncated {omitted} chars]") + omitted == 1000


def test_json_string_is_truncated_as_data() -> None:
    text = json.dumps({"title": "t", "body": "b" * 5000, "items": list(range(10))})
    result = truncate_result(text, 500)
    assert result.truncated
    assert isinstance(result.value, str)
    assert len(result.value) <= 500
    parsed = json.loads(result.value)
    assert set(parsed) == {"title", "body", "items"}
    assert parsed["title"] == "t"
    assert parsed["items"] == list(range(10))
    assert "...[truncated" in parsed["body"]


def test_dict_keeps_keys_and_cuts_longest_strings_first() -> None:
    data = {"short": "s" * 100, "medium": "m" * 3000, "long": "l" * 20_000, "n": 7}
    result = truncate_result(data, 5000)
    value = result.value
    assert result.truncated
    assert size_of(value) <= 5000
    assert list(value) == ["short", "medium", "long", "n"]
    assert value["short"] == "s" * 100
    assert value["n"] == 7
    assert "...[truncated" in value["long"]
    assert len(value["long"]) < 5000


def test_huge_list_drops_items_from_the_end() -> None:
    result = truncate_result(list(range(1_000_000)), 2000)
    value = result.value
    assert result.truncated
    assert size_of(value) <= 2000
    assert value[:3] == [0, 1, 2]
    assert value[-1].endswith("more items truncated]")
    omitted = int(value[-1].split("[")[1].split(" ")[0])
    assert omitted + len(value) - 1 == 1_000_000


def test_huge_dict_drops_keys_as_a_last_resort() -> None:
    result = truncate_result({str(i): i for i in range(100_000)}, 1000)
    value = result.value
    assert size_of(value) <= 1000
    assert value["0"] == 0
    assert value["..."].endswith("more keys truncated]")


def test_nested_structure_stays_valid() -> None:
    data = {"meta": {"q": "x"}, "rows": [{"id": i, "text": "t" * 300} for i in range(5000)]}
    result = truncate_result(data, 3000)
    strict_dumps(result.value)
    assert size_of(result.value) <= 3000
    assert result.value["meta"] == {"q": "x"}
    assert result.value["rows"][0]["id"] == 0
    assert result.value["rows"][-1].endswith("more items truncated]")


def test_objects_are_converted_before_truncating() -> None:
    hits = [Hit(title="t" * 500, when=datetime.date(2024, 1, 1), score=1.0)] * 100
    result = truncate_result(hits, 1000)
    strict_dumps(result.value)
    assert size_of(result.value) <= 1000


def calls_of(work: Callable[[], Any]) -> int:
    """The function calls `work()` takes, counted by cProfile: the same on any machine."""
    profile = cProfile.Profile()
    profile.enable()
    work()
    profile.disable()
    return pstats.Stats(profile).total_calls


def json_rows(count: int) -> tuple[list[dict[str, Any]], str]:
    rows = [{"id": i, "name": f"row {i}", "body": "lorem ipsum " * 15} for i in range(count)]
    return rows, json.dumps(rows)


def test_two_megabyte_json_document() -> None:
    rows, text = json_rows(11_000)
    assert len(text) > 2_000_000
    result = truncate_result(text, 20_000)
    assert result.truncated
    assert result.original_chars == len(text)
    assert len(result.value) <= 20_000
    parsed = json.loads(result.value)
    assert parsed[0] == rows[0]
    assert parsed[-1].endswith("more items truncated]")
    # the work grows with the document, not faster: a tenth of it takes a tenth of the
    # calls (a hundredth if the work were quadratic)
    _, tenth = json_rows(1_100)
    whole_calls = calls_of(lambda: truncate_result(text, 20_000))
    tenth_calls = calls_of(lambda: truncate_result(tenth, 20_000))
    assert whole_calls / tenth_calls < 20, (tenth_calls, whole_calls)


def test_fifty_megabyte_string_is_fast() -> None:
    text = "a" * 50_000_000
    plain = truncate_result(text)
    nested = truncate_result({"log": text, "status": "ok"})
    assert len(plain.value) <= 20_000
    assert plain.value.endswith("chars]")
    assert size_of(nested.value) <= 20_000
    assert nested.value["status"] == "ok"

    def truncate_both(text: str) -> None:
        truncate_result(text)
        truncate_result({"log": text, "status": "ok"})

    # as few calls as for a hundredth of the text: nothing walks the string
    calls = calls_of(lambda: truncate_both(text))
    small_calls = calls_of(lambda: truncate_both("a" * 500_000))
    assert calls <= 2 * small_calls, (small_calls, calls)


def test_unparseable_json_like_string_is_cut_as_text() -> None:
    text = "[" + "1, " * 1000
    result = truncate_result(text, 300)
    assert len(result.value) <= 300
    assert result.value.startswith("[1, 1")
    assert result.value.endswith("chars]")


json_data = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=400)
    | st.binary(max_size=20),
    lambda children: (
        st.lists(children, max_size=30)
        | st.dictionaries(st.text(max_size=20), children, max_size=15)
        | st.tuples(children, children)
    ),
    max_leaves=200,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=json_data, max_chars=st.integers(min_value=200, max_value=3000), as_text=st.booleans())
def test_truncation_is_json_and_bounded(value: Any, max_chars: int, as_text: bool) -> None:
    if as_text:
        value = json.dumps(to_jsonable(value))
    result = truncate_result(value, max_chars)
    strict_dumps(result.value)
    assert size_of(result.value) <= max_chars + OVERSHOOT
    assert result.truncated == (result.original_chars > max_chars)
    if isinstance(value, str) and result.truncated and value.lstrip()[:1] in ("[", "{"):
        json.loads(result.value)


@settings(max_examples=200, deadline=None)
@given(value=json_data)
def test_to_jsonable_is_strict_json_and_idempotent(value: Any) -> None:
    converted = to_jsonable(value)
    strict_dumps(converted)
    assert to_jsonable(converted) == converted


@pytest.mark.parametrize("max_chars", [0, 1, 10, 50])
def test_tiny_budgets_do_not_fail(max_chars: int) -> None:
    for value in ["x" * 100, {"a": "b" * 100}, list(range(100)), 10**50]:
        result = truncate_result(value, max_chars)
        strict_dumps(result.value)
        assert result.truncated
