"""Cutting JSON data to a size budget, leaving a visible marker at every cut.

Long strings are cut first (all of them to one common length, the "water level"), and
only when that is not enough are the tails of lists dropped and, as a last resort, the
last keys of dicts. The data given is owned by the caller's copy and changed in place.
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

from agentloop.base.jsonable import TrimmedDict, TrimmedList

__all__ = [
    "DROPPED_KEYS_KEY",
    "ITEMS_MARKER",
    "KEYS_MARKER",
    "TRUNCATION_MARKER",
    "TrimmedDict",
    "TrimmedList",
    "cut",
    "cut_marker",
    "json_size",
    "shrink",
    "trim_long_lists",
]

TRUNCATION_MARKER = "...[truncated {omitted} chars]"
"""Appended to a string that was cut."""
ITEMS_MARKER = "...[{omitted} more items truncated]"
"""The last item of a list whose tail was dropped."""
KEYS_MARKER = "...[{omitted} more keys truncated]"
"""The value under the key `...` of a dict whose last keys were dropped."""
DROPPED_KEYS_KEY = "..."
"""The key of `KEYS_MARKER` in a dict whose last keys were dropped."""

_ROUNDS = 4
_MIN_VALUE_CHARS = 48
_MIN_PARTIAL_CHARS = 64
_EARLIER_CUT = re.compile(re.escape(TRUNCATION_MARKER).replace(r"\{omitted\}", r"(\d+)") + r"\Z")


def json_size(value: Any) -> int:
    """The length of `value` as JSON (non-ASCII characters kept)."""
    return len(json.dumps(value, ensure_ascii=False, default=str))


def cut_marker(omitted: int) -> str:
    """The marker of a string cut by `omitted` characters."""
    return TRUNCATION_MARKER.format(omitted=omitted)


def cut(text: str, keep: int) -> str:
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
    return text[:keep] + cut_marker(len(text) - keep + omitted_before)


def shrink(data: Any, limit: int, size: int) -> Any:
    """Cut `data` (of JSON size `size`), which this module owns and may change in place."""
    if isinstance(data, dict | list):
        size = _cap_long_strings(data, limit, size)
    return data if size <= limit else _fit(data, limit, size)


# --- before sizing: drop the items no budget could hold ------------------------------


def trim_long_lists(data: Any, max_items: int) -> Any:
    """Cut every list and dict longer than `max_items` (each member takes 2 characters).

    Serializing a huge list or dict whole to measure it would hold the interpreter for as
    long as it takes (`json.dumps` never lets another thread run); the dropped items and
    keys are counted in the eventual `ITEMS_MARKER` or `KEYS_MARKER`.
    """
    if isinstance(data, list | dict) and len(data) > max_items:
        data = _trimmed(data, max_items)
    stack = [data]
    while stack:
        container = stack.pop()
        keys = container.keys() if isinstance(container, dict) else range(len(container))
        for key in keys:
            item = container[key]
            if isinstance(item, list | dict) and len(item) > max_items:
                item = container[key] = _trimmed(item, max_items)
            if isinstance(item, dict | list):
                stack.append(item)
    return data


def _trimmed(items: list[Any] | dict[str, Any], max_items: int) -> Any:
    kept: TrimmedList | TrimmedDict
    if isinstance(items, dict):
        kept = TrimmedDict(itertools.islice(items.items(), max_items))
    else:
        kept = TrimmedList(items[:max_items])
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
        slots = _long_string_slots(data, floor + len(cut_marker(0)))
        if not slots:
            return size
        longest = max(len(container[key]) for container, key in slots)
        level = _water_level(
            [len(container[key]) for container, key in slots],
            excess,
            len(cut_marker(longest)),
        )
        level = max(level, floor)
        for container, key in slots:
            text = container[key]
            if len(text) > level + len(cut_marker(len(text))):
                container[key] = cut(text, level)
        size = json_size(data)
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
    if (json_size(value) if size is None else size) <= budget:
        return value
    if isinstance(value, list):
        return _fit_list(value, budget)
    if isinstance(value, dict):
        return _fit_dict(value, budget)
    text = value if isinstance(value, str) else json.dumps(value)
    return _fit_string(text, budget)


def _fit_string(text: str, budget: int) -> str:
    """Cut `text` so that its JSON (quotes and escapes included) fits `budget`."""
    keep = max(0, budget - 2 - len(cut_marker(len(text))))
    while True:
        kept = cut(text, keep)
        over = json_size(kept) - budget
        if over <= 0 or keep == 0:
            return kept
        keep = max(0, keep - over)


def _fit_list(items: list[Any], budget: int) -> list[Any]:
    dropped_before = getattr(items, "omitted", 0)
    reserve = json_size(ITEMS_MARKER.format(omitted=len(items) + dropped_before)) + 2
    count = _fitting_prefix(items, budget - reserve)
    kept = items[:count]
    room = budget - reserve - json_size(kept) - 2
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
    if json_size([]) > budget or not items:
        return 0
    low, high = 0, 1
    while high <= len(items) and json_size(items[:high]) <= budget:
        low, high = high, high * 2
    high = min(high, len(items) + 1)
    while high - low > 1:
        middle = (low + high) // 2
        if json_size(items[:middle]) <= budget:
            low = middle
        else:
            high = middle
    return low


def _fit_dict(data: dict[str, Any], budget: int) -> dict[str, Any]:
    """Keep every key that fits with a minimal value; share the rest among the values."""
    dropped_before = getattr(data, "omitted", 0)
    total = len(data) + dropped_before
    reserve = json_size(DROPPED_KEYS_KEY) + json_size(KEYS_MARKER.format(omitted=total)) + 4
    entries = _affordable_entries(data, budget - 2, reserve)
    dropped = total - len(entries)
    spent = sum(cost for _, cost, _ in entries) + (reserve if dropped else 0)
    level = _fair_share([size for _, _, size in entries], budget - 2 - spent)
    fitted = {
        key: data[key] if size <= level else _fit(data[key], level, size)
        for key, _, size in entries
    }
    if dropped:
        marker_key = DROPPED_KEYS_KEY
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
        cost = json_size(key) + 4
        size = json_size(value)
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
