"""Keeping a tool's result within a size budget, as valid JSON data.

`truncate_result` bounds the serialized size of a result: a string is cut (or, when it
holds JSON, cut as data); data is cut by `agentloop.governance.results.shrink`: long strings
first, and only when that is not enough list items and, as a last resort, dict keys.
Every cut leaves a visible marker.

A string holding JSON longer than `LARGE_TEXT_CHARS` is not parsed whole: only its
first characters (a window a few times the budget) are read, as partial JSON, and the
result says so (`UNREAD_TEXT_MARKER`). Its cost is bounded by the budget, not by the
string, so a 50 MB result never holds the interpreter for long.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from pydantic_core import from_json

from agentloop.base.jsonable import CutText, serialize, to_jsonable
from agentloop.governance.results.shrink import (
    DROPPED_KEYS_KEY,
    cut,
    cut_marker,
    json_size,
    shrink,
    trim_long_lists,
)

__all__ = [
    "LARGE_TEXT_CHARS",
    "UNREAD_TEXT_MARKER",
    "TruncatedResult",
    "WholeResult",
    "truncate_result",
]

UNREAD_TEXT_MARKER = "...[truncated: only the first {read} of {total} characters were read]"
"""The last item (or the value under the key `...`) of a large JSON text read in part."""
LARGE_TEXT_CHARS = 4_000_000
"""JSON text longer than this is read in part (a window of its first characters)."""
_WINDOW_PER_BUDGET = 8
_MIN_WINDOW = 64 * 1024
_JSON_START = re.compile(r"\s*[\[{]")


@dataclasses.dataclass(frozen=True)
class WholeResult:
    """A result as it was before a size bound cut it."""

    value: Any
    """The complete value, as it was given (a string, data, or the tool's own objects:
    a reference hands it on with its type)."""


@dataclasses.dataclass(frozen=True)
class TruncatedResult:
    """A result cut to fit a size budget."""

    value: Any
    """The result within the budget: JSON data, or a string for string results."""
    truncated: bool
    """Whether anything was cut."""
    original_chars: int
    """The size before cutting: `len` of a string, else the length of its JSON (a lower
    bound when a list had more items than any budget could hold: those are not sized)."""
    whole: WholeResult | None = dataclasses.field(default=None, repr=False, compare=False)
    """What was cut, complete, when it was at hand; None when nothing was cut or the
    input itself was already cut (`CutText`)."""


def truncate_result(value: Any, max_chars: int = 20_000) -> TruncatedResult:
    """Bound the size of a tool result, keeping it valid JSON data.

    Size is `len` for a string and the length of `json.dumps(...,
    ensure_ascii=False)` for anything else, which is first converted with
    `to_jsonable`. A result is `truncated` when anything was cut, here or before (a
    `CutText`: an object's `repr` cut, bytes shown by their size...). A string is cut
    and `TRUNCATION_MARKER` appended, unless it holds a JSON object or array: then it is
    truncated as data and returned as a JSON string again. In data, the longest strings
    are cut first; if that is not enough, the tails of lists are dropped (leaving an `ITEMS_MARKER`
    item) and, as a last resort, the last keys of a dict too (leaving a `"..."`
    key). For `max_chars` of 200 or more the result fits the budget except
    for the markers themselves: expect an overshoot of at most a few dozen
    characters in rare, deeply nested cases.

    Args:
        value: The tool's output.
        max_chars: The size budget, in characters.
    """
    limit = max(max_chars, 0)
    if isinstance(value, str):
        return _truncate_text(value, limit)
    max_items = max(limit // 2, 1)  # a member takes 2 characters at least
    converted = serialize(value, max_items)
    data = converted.value
    if isinstance(data, str):
        return _truncate_text(data, limit)
    if isinstance(data, dict | list):
        data = trim_long_lists(data, max_items)
    size = json_size(data)
    if size <= limit:
        whole = WholeResult(value) if converted.cut else None
        return TruncatedResult(data, truncated=converted.cut, original_chars=size, whole=whole)
    cut_data = shrink(data, limit, size)
    whole = WholeResult(value)
    return TruncatedResult(cut_data, truncated=True, original_chars=size, whole=whole)


def _length(text: str) -> int:
    return text.original_chars if isinstance(text, CutText) else len(text)


def _truncate_text(text: str, limit: int) -> TruncatedResult:
    total = _length(text)
    if total <= limit:
        cut_before = isinstance(text, CutText)
        return TruncatedResult(str.__str__(text), truncated=cut_before, original_chars=total)
    whole = None if isinstance(text, CutText) else WholeResult(str.__str__(text))
    if (total > LARGE_TEXT_CHARS or isinstance(text, CutText)) and _JSON_START.match(text):
        partial = _truncate_large_json(text, limit)
        if partial is not None:
            return TruncatedResult(partial, truncated=True, original_chars=total, whole=whole)
    parsed = _parse_json_container(text)
    if parsed is not None:
        shrunk = json.dumps(shrink(parsed, limit, json_size(parsed)), ensure_ascii=False)
        return TruncatedResult(shrunk, truncated=True, original_chars=total, whole=whole)
    keep = max(0, limit - len(cut_marker(total)))
    kept = cut(str(text), keep)
    if total > len(text):  # count what was cut before it reached here too
        kept = kept[:keep] + cut_marker(total - min(keep, len(text)))
    return TruncatedResult(kept, truncated=True, original_chars=total, whole=whole)


def _parse_json_container(text: str) -> Any:
    """Return the JSON data of a string holding an object or array, else None."""
    if not _JSON_START.match(text):
        return None
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return to_jsonable(parsed) if isinstance(parsed, dict | list) else None


def _truncate_large_json(text: str, limit: int) -> str | None:
    """Cut a large JSON text from a window of its first characters (None if not JSON)."""
    window = text[: max(_WINDOW_PER_BUDGET * limit, _MIN_WINDOW)]
    try:
        parsed = from_json(window, allow_partial="trailing-strings")
    except ValueError:
        return None
    if not isinstance(parsed, dict | list):
        return None
    marker = UNREAD_TEXT_MARKER.format(read=len(window), total=_length(text))
    data = to_jsonable(parsed)
    budget = max(limit - json_size(marker) - len(DROPPED_KEYS_KEY) - 8, 0)
    shrunk = shrink(data, budget, json_size(data))
    if isinstance(shrunk, list):
        shrunk.append(marker)
    else:
        key = DROPPED_KEYS_KEY
        while key in shrunk:
            key += "."
        shrunk[key] = marker
    return json.dumps(shrunk, ensure_ascii=False)
