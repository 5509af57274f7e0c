"""Turning whatever a tool returned into plain JSON data.

`to_jsonable` walks containers itself (so it can mark cycles and nesting deeper than
`MAX_DEPTH`, join a list of text content blocks - what MCP tools return - into its
text, and sort sets) and hands every other object to pydantic-core's
`to_jsonable_python` (pydantic models, dataclasses, dates, UUIDs, paths, decimals...).
LangChain messages become their content; bytes their UTF-8 text (up to 4 kB) or a size;
NaN and infinities `"NaN"`, `"Infinity"`, `"-Infinity"`; anything pydantic-core cannot
convert becomes its `repr`, cut to 1,000 characters. An iterator nested in a result
(a generator, a `range`...) is read up to `MAX_NESTED_ITEMS` items, then marked with
`UNREAD_MARKER`; an async iterator becomes `ASYNC_ITERATOR_MARKER` (a tool's own
result, when it is an iterator, is read by `agentloop.tools.results.lazy` within the
call's bounds). Raises only what a broken container raises (a `Mapping` whose `items`
fails...).
"""

from __future__ import annotations

import datetime
import itertools
import json
import math
from collections import deque
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from decimal import Decimal
from enum import Enum
from pathlib import PurePath
from typing import Any
from uuid import UUID

from langchain_core.messages import BaseMessage
from pydantic_core import to_jsonable_python

from agentloop.tools.results.cut_text import CutText

__all__ = [
    "ASYNC_ITERATOR_MARKER",
    "CYCLE_MARKER",
    "MAX_DEPTH",
    "MAX_NESTED_ITEMS",
    "TOO_DEEP_MARKER",
    "UNREAD_MARKER",
    "to_jsonable",
]

CYCLE_MARKER = "<cycle>"
"""Stands in for a container that contains itself."""
TOO_DEEP_MARKER = "<too deep>"
"""Stands in for a container nested deeper than `MAX_DEPTH`."""
MAX_DEPTH = 50
"""How deeply `to_jsonable` follows nested containers."""
MAX_NESTED_ITEMS = 1_000
"""Items read from an iterator nested in a result."""
UNREAD_MARKER = "...[more items not read]"
"""The last item of a nested iterator that had more than `MAX_NESTED_ITEMS` items."""
ASYNC_ITERATOR_MARKER = "<async iterator: not read>"
"""Stands in for an async iterator nested in a result."""

_MAX_REPR_CHARS = 1000
_MAX_DECODED_BYTES = 4096
_MAX_PLAIN_INT_BITS = 10_000
_TEXT_TYPES = (datetime.date, datetime.time, datetime.timedelta, UUID, PurePath, Decimal)
_SEQUENCE_TYPES = (list, tuple, set, frozenset, deque)
_PLAIN_TYPES = frozenset({str, bool, type(None)})


def to_jsonable(value: Any) -> Any:
    """Convert a tool's output to plain JSON data (see the module docstring)."""
    return _convert(value, 0, set())


def _convert(value: Any, depth: int, ancestors: set[int]) -> Any:
    if value is None or isinstance(value, bool | str | int | float | Enum):
        return _convert_scalar(value, depth, ancestors)
    if isinstance(value, bytes | bytearray | memoryview):
        return _convert_bytes(value)
    if depth >= MAX_DEPTH:
        return TOO_DEEP_MARKER
    if id(value) in ancestors:
        return CYCLE_MARKER
    ancestors.add(id(value))
    try:
        return _convert_object(value, depth + 1, ancestors)
    finally:
        ancestors.discard(id(value))


def _convert_scalar(value: Any, depth: int, ancestors: set[int]) -> Any:
    if value is None or type(value) in (bool, str):
        return value
    if isinstance(value, Enum):
        return _convert(value.value, depth, ancestors)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        return value if isinstance(value, CutText) else str(value)
    if isinstance(value, int):
        return _convert_int(int(value))
    if math.isfinite(value):
        return float(value)
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


def _convert_int(value: int) -> int | str:
    """Keep an int unless it has too many digits to print."""
    if value.bit_length() <= _MAX_PLAIN_INT_BITS:
        return value
    try:
        str(value)
    except ValueError:
        return f"<int of {value.bit_length()} bits>"
    return value


def _convert_bytes(value: bytes | bytearray | memoryview) -> str:
    size = value.nbytes if isinstance(value, memoryview) else len(value)
    if size <= _MAX_DECODED_BYTES:
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            pass
    return f"<{size} bytes>"


def _convert_object(value: Any, depth: int, ancestors: set[int]) -> Any:
    if isinstance(value, BaseMessage):
        return _convert(value.content, depth, ancestors)
    if isinstance(value, Mapping):
        return _convert_mapping(value, depth, ancestors)
    if isinstance(value, _SEQUENCE_TYPES):
        return _convert_sequence(value, depth, ancestors)
    if isinstance(value, Iterator | range):
        return _convert_iterator(value, depth, ancestors)
    if isinstance(value, AsyncIterator):
        return ASYNC_ITERATOR_MARKER
    return _convert_other(value, depth, ancestors)


def _convert_iterator(value: Iterator[Any] | range, depth: int, ancestors: set[int]) -> Any:
    """Read a nested iterator up to `MAX_NESTED_ITEMS` items (never all of an endless one)."""
    items = [
        _convert_item(item, depth, ancestors)
        for item in itertools.islice(value, MAX_NESTED_ITEMS + 1)
    ]
    if len(items) > MAX_NESTED_ITEMS:
        items[MAX_NESTED_ITEMS:] = [UNREAD_MARKER]
    return items


def _convert_other(value: Any, depth: int, ancestors: set[int]) -> Any:
    """Models, dataclasses, dates and the rest: pydantic-core's conversion, else a repr."""
    try:
        data = to_jsonable_python(
            value, by_alias=False, inf_nan_mode="strings", fallback=_bounded_repr
        )
    except Exception:  # a cycle or a failing serializer: describe the object instead
        return _bounded_repr(value)
    return _convert(data, depth, ancestors)


def _convert_mapping(value: Mapping[Any, Any], depth: int, ancestors: set[int]) -> dict[str, Any]:
    return {
        key if type(key) is str else _convert_key(key): _convert_item(item, depth, ancestors)
        for key, item in value.items()
    }


def _convert_item(item: Any, depth: int, ancestors: set[int]) -> Any:
    """Convert one member of a container, with a fast path for plain values."""
    kind = type(item)
    if kind in _PLAIN_TYPES:
        return item
    if kind is int and item.bit_length() <= _MAX_PLAIN_INT_BITS:
        return item
    if kind is float and math.isfinite(item):
        return item
    return _convert(item, depth, ancestors)


def _convert_key(key: Any) -> str:
    if isinstance(key, str):
        return str(key)
    if isinstance(key, Enum):
        key = key.value
    if key is None or isinstance(key, bool | int | float):
        return json.dumps(_convert_scalar(key, 0, set()))
    text = _convert(key, MAX_DEPTH - 1, set())
    return text if isinstance(text, str) else json.dumps(text)


def _convert_sequence(value: Any, depth: int, ancestors: set[int]) -> Any:
    if isinstance(value, list | tuple):
        text = _joined_text_blocks(value)
        if text is not None:
            return text
    items = [_convert_item(item, depth, ancestors) for item in value]
    if isinstance(value, set | frozenset):
        items.sort(key=repr)
    return items


def _joined_text_blocks(blocks: Sequence[Any]) -> str | None:
    """Join a non-empty list of `{"type": "text", "text": ...}` blocks; else None."""
    texts = []
    for block in blocks:
        if not isinstance(block, Mapping) or block.get("type") != "text":
            return None
        text = block.get("text")
        if not isinstance(text, str):
            return None
        texts.append(text)
    return "\n".join(texts) if texts else None


def _bounded_repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:  # a broken __repr__
        return f"<unrepresentable {type(value).__name__}>"
    if len(text) <= _MAX_REPR_CHARS:
        return text
    return text[: _MAX_REPR_CHARS - 3] + "..."
