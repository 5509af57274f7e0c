"""Keeping a tool's result within a size budget, as valid JSON data.

`truncate_result` bounds the serialized size of a result: long strings are cut first,
and only when that is not enough are list items and, as a last resort, dict keys
dropped. Every cut leaves a visible marker.

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

from agentloop.tools.results.cut_text import CutText
from agentloop.tools.results.serialize import to_jsonable

__all__ = [
    "ITEMS_MARKER",
    "KEYS_MARKER",
    "LARGE_TEXT_CHARS",
    "TRUNCATION_MARKER",
    "UNREAD_TEXT_MARKER",
    "TruncatedResult",
    "truncate_result",
]

TRUNCATION_MARKER = "...[truncated {omitted} chars]"
"""Appended to a string that was cut."""
ITEMS_MARKER = "...[{omitted} more items truncated]"
"""The last item of a list whose tail was dropped."""
KEYS_MARKER = "...[{omitted} more keys truncated]"
"""The value under the key `...` of a dict whose last keys were dropped."""
UNREAD_TEXT_MARKER = "...[truncated: only the first {read} of {total} characters were read]"
"""The last item (or the value under the key `...`) of a large JSON text read in part."""
LARGE_TEXT_CHARS = 4_000_000
"""JSON text longer than this is read in part (a window of its first characters)."""
_WINDOW_PER_BUDGET = 8
_MIN_WINDOW = 64 * 1024

_ROUNDS = 4
_MIN_VALUE_CHARS = 48
_MIN_PARTIAL_CHARS = 64
_DROPPED_KEYS_KEY = "..."
_JSON_START = re.compile(r"\s*[\[{]")
_EARLIER_CUT = re.compile(re.escape(TRUNCATION_MARKER).replace(r"\{omitted\}", r"(\d+)") + r"\Z")


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


def truncate_result(value: Any, max_chars: int = 20_000) -> TruncatedResult:
    """Bound the size of a tool result, keeping it valid JSON data.

    Size is `len` for a string and the length of `json.dumps(...,
    ensure_ascii=False)` for anything else, which is first converted with
    `to_jsonable`. A string is cut and `TRUNCATION_MARKER` appended, unless it
    holds a JSON object or array: then it is truncated as data and returned as
    a JSON string again. In data, the longest strings are cut first; if that
    is not enough, the tails of lists are dropped (leaving an `ITEMS_MARKER`
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
    data = to_jsonable(value)
    if isinstance(data, str):
        return _truncate_text(data, limit)
    if isinstance(data, dict | list):
        data = _trim_long_lists(data, max(limit // 2, 1))
    size = _json_size(data)
    if size <= limit:
        return TruncatedResult(data, truncated=False, original_chars=size)
    return TruncatedResult(_shrink(data, limit, size), truncated=True, original_chars=size)


def _length(text: str) -> int:
    return text.original_chars if isinstance(text, CutText) else len(text)


def _truncate_text(text: str, limit: int) -> TruncatedResult:
    total = _length(text)
    if total <= limit:
        return TruncatedResult(str(text), truncated=False, original_chars=total)
    if (total > LARGE_TEXT_CHARS or isinstance(text, CutText)) and _JSON_START.match(text):
        partial = _truncate_large_json(text, limit)
        if partial is not None:
            return TruncatedResult(partial, truncated=True, original_chars=total)
    parsed = _parse_json_container(text)
    if parsed is not None:
        shrunk = json.dumps(_shrink(parsed, limit, _json_size(parsed)), ensure_ascii=False)
        return TruncatedResult(shrunk, truncated=True, original_chars=total)
    keep = max(0, limit - len(_cut_marker(total)))
    kept = _cut(str(text), keep)
    if total > len(text):  # count what was cut before it reached here too
        kept = kept[:keep] + _cut_marker(total - min(keep, len(text)))
    return TruncatedResult(kept, truncated=True, original_chars=total)


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
    budget = max(limit - _json_size(marker) - len(_DROPPED_KEYS_KEY) - 8, 0)
    shrunk = _shrink(data, budget, _json_size(data))
    if isinstance(shrunk, list):
        shrunk.append(marker)
    else:
        key = _DROPPED_KEYS_KEY
        while key in shrunk:
            key += "."
        shrunk[key] = marker
    return json.dumps(shrunk, ensure_ascii=False)


def _json_size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, default=str))


def _cut_marker(omitted: int) -> str:
    return TRUNCATION_MARKER.format(omitted=omitted)


def _cut(text: str, keep: int) -> str:
    """Keep the first `keep` characters of `text` and count the rest in a marker.

    Cutting a string that was cut before counts what the earlier cut omitted too.
    """
    omitted_before = 0
    if text.endswith(" chars]"):
        earlier = _EARLIER_CUT.search(text, max(0, len(text) - 64))
        if earlier is not None:
            omitted_before = int(earlier.group(1))
            text = text[: earlier.start()]
    keep = min(keep, len(text))
    return text[:keep] + _cut_marker(len(text) - keep + omitted_before)


def _shrink(data: Any, limit: int, size: int) -> Any:
    """Cut `data` (of JSON size `size`), which this module owns and may change in place."""
    if isinstance(data, dict | list):
        size = _cap_long_strings(data, limit, size)
    return data if size <= limit else _fit(data, limit, size)


# --- before sizing: drop the items no budget could hold ------------------------------


class _TrimmedList(list):  # type: ignore[type-arg]
    """A list whose tail was dropped before sizing: `omitted` items are not here."""

    omitted = 0


def _trim_long_lists(data: Any, max_items: int) -> Any:
    """Cut every list longer than `max_items` (each item takes 2 characters at least).

    Serializing a huge list whole to measure it would hold the interpreter for as long
    as it takes; the dropped items are counted in the list's eventual `ITEMS_MARKER`.
    """
    if isinstance(data, list) and len(data) > max_items:
        data = _trimmed(data, max_items)
    stack = [data]
    while stack:
        container = stack.pop()
        keys = container.keys() if isinstance(container, dict) else range(len(container))
        for key in keys:
            item = container[key]
            if isinstance(item, list) and len(item) > max_items:
                item = container[key] = _trimmed(item, max_items)
            if isinstance(item, dict | list):
                stack.append(item)
    return data


def _trimmed(items: list[Any], max_items: int) -> _TrimmedList:
    kept = _TrimmedList(items[:max_items])
    kept.omitted = len(items) - max_items + getattr(items, "omitted", 0)
    return kept


# --- first pass: cut the longest strings ---------------------------------------------


def _cap_long_strings(data: Any, limit: int, size: int) -> int:
    """Cut the longest strings in `data` to a common length until it fits, in place.

    No string is cut below a floor of `limit // 10` (at most 200) characters;
    what still does not fit is left to `_fit`.

    Returns:
        The JSON size of `data` afterwards.
    """
    floor = min(200, limit // 10)
    for _ in range(_ROUNDS):
        excess = size - limit
        if excess <= 0:
            return size
        slots = _long_string_slots(data, floor + len(_cut_marker(0)))
        if not slots:
            return size
        longest = max(len(container[key]) for container, key in slots)
        level = _water_level(
            [len(container[key]) for container, key in slots],
            excess,
            len(_cut_marker(longest)),
        )
        level = max(level, floor)
        for container, key in slots:
            text = container[key]
            if len(text) > level + len(_cut_marker(len(text))):
                container[key] = _cut(text, level)
        size = _json_size(data)
        if level == floor:
            return size
    return size


def _long_string_slots(data: Any, min_length: int) -> list[tuple[Any, Any]]:
    """List the (container, key) of every string value longer than `min_length`."""
    slots: list[tuple[Any, Any]] = []
    stack = [data]
    while stack:
        container = stack.pop()
        keys = container.keys() if isinstance(container, dict) else range(len(container))
        for key in keys:
            item = container[key]
            if isinstance(item, str):
                if len(item) > min_length:
                    slots.append((container, key))
            elif isinstance(item, dict | list):
                stack.append(item)
    return slots


def _water_level(lengths: list[int], excess: int, marker: int) -> int:
    """Find how many characters to keep of every long string to save `excess`.

    Cutting a string of length `n` to `level` characters plus a marker saves
    `n - level - marker`; the longest strings are cut first, all to one level.
    """
    ordered = sorted(lengths, reverse=True)
    total = 0
    level = 0
    for count, length in enumerate(ordered, start=1):
        total += length
        level = (total - excess) // count - marker
        following = ordered[count] if count < len(ordered) else 0
        if level + marker >= following:
            return max(level, 0)
    return max(level, 0)


# --- second pass: drop list items and dict keys --------------------------------------


def _fit(value: Any, budget: int, size: int | None = None) -> Any:
    """Return `value` cut so that its JSON takes about `budget` characters at most."""
    if (_json_size(value) if size is None else size) <= budget:
        return value
    if isinstance(value, list):
        return _fit_list(value, budget)
    if isinstance(value, dict):
        return _fit_dict(value, budget)
    text = value if isinstance(value, str) else json.dumps(value)
    return _fit_string(text, budget)


def _fit_string(text: str, budget: int) -> str:
    """Cut `text` so that its JSON (quotes and escapes included) fits `budget`."""
    keep = max(0, budget - 2 - len(_cut_marker(len(text))))
    while True:
        cut = _cut(text, keep)
        over = _json_size(cut) - budget
        if over <= 0 or keep == 0:
            return cut
        keep = max(0, keep - over)


def _fit_list(items: list[Any], budget: int) -> list[Any]:
    dropped_before = getattr(items, "omitted", 0)
    reserve = _json_size(ITEMS_MARKER.format(omitted=len(items) + dropped_before)) + 2
    count = _fitting_prefix(items, budget - reserve)
    kept = items[:count]
    room = budget - reserve - _json_size(kept) - 2
    if count < len(items) and room >= _MIN_PARTIAL_CHARS:
        partial = items[count]
        if isinstance(partial, str | list | dict):
            kept.append(_fit(partial, room))
    omitted = len(items) - len(kept) + dropped_before
    if omitted:
        kept.append(ITEMS_MARKER.format(omitted=omitted))
    return kept


def _fitting_prefix(items: list[Any], budget: int) -> int:
    """Find the most leading items whose JSON fits `budget`, probing by doubling."""
    if _json_size([]) > budget or not items:
        return 0
    low, high = 0, 1
    while high <= len(items) and _json_size(items[:high]) <= budget:
        low, high = high, high * 2
    high = min(high, len(items) + 1)
    while high - low > 1:
        middle = (low + high) // 2
        if _json_size(items[:middle]) <= budget:
            low = middle
        else:
            high = middle
    return low


def _fit_dict(data: dict[str, Any], budget: int) -> dict[str, Any]:
    """Keep every key that fits with a minimal value; share the rest among the values."""
    reserve = _json_size(_DROPPED_KEYS_KEY) + _json_size(KEYS_MARKER.format(omitted=len(data))) + 4
    entries = _affordable_entries(data, budget - 2, reserve)
    dropped = len(data) - len(entries)
    spent = sum(cost for _, cost, _ in entries) + (reserve if dropped else 0)
    level = _fair_share([size for _, _, size in entries], budget - 2 - spent)
    fitted = {
        key: data[key] if size <= level else _fit(data[key], level, size)
        for key, _, size in entries
    }
    if dropped:
        marker_key = _DROPPED_KEYS_KEY
        while marker_key in fitted:
            marker_key += "."
        fitted[marker_key] = KEYS_MARKER.format(omitted=dropped)
    return fitted


def _affordable_entries(
    data: dict[str, Any], budget: int, reserve: int
) -> list[tuple[str, int, int]]:
    """List (key, key cost, value size) of the leading keys that fit with minimal values.

    All keys are kept when they fit `budget`; otherwise the keys that fit
    `budget - reserve`, leaving room for the marker of the dropped ones.
    """
    entries: list[tuple[str, int, int]] = []
    used = 0
    with_reserve = 0
    for key, value in data.items():
        cost = _json_size(key) + 4
        size = _json_size(value)
        used += cost + min(size, _MIN_VALUE_CHARS)
        if used > budget:
            return entries[:with_reserve]
        entries.append((key, cost, size))
        if used <= budget - reserve:
            with_reserve = len(entries)
    return entries


def _fair_share(sizes: list[int], available: int) -> int:
    """Find the largest size limit such that the values, each capped to it, fit."""
    remaining = available
    ordered = sorted(sizes)
    for index, size in enumerate(ordered):
        share = remaining // (len(ordered) - index)
        if size > share:
            return max(share, 0)
        remaining -= size
    return max(ordered, default=0)
