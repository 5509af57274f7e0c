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
result, when it is an iterator, is read by `agentloop.governance.results.lazy` within the
call's bounds). Raises only what a broken container raises (a `Mapping` whose `items`
fails...).

Whatever stands for something left out (a cut `repr`, bytes shown by their size, nesting
deeper than `MAX_DEPTH`, an iterator not read to its end) is a `CutText`, and `serialize`
says whether the result holds one, so a record can say `truncated: true`.

The tool layer (`agentloop.governance.results`, which re-exports these names) and redaction
(`agentloop.observability.redaction`, which walks values with the same markers and depth limit) both
build on this module, which imports neither.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
from collections import deque
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from langchain_core.messages import BaseMessage
from pydantic_core import to_jsonable_python

__all__ = [
    "ASYNC_ITERATOR_MARKER",
    "CYCLE_MARKER",
    "MAX_DEPTH",
    "MAX_NESTED_ITEMS",
    "MAX_REPR_CHARS",
    "TOO_DEEP_MARKER",
    "UNREAD_MARKER",
    "CutText",
    "Serialized",
    "TrimmedDict",
    "TrimmedList",
    "copy_data",
    "serialize",
    "to_jsonable",
]

_FLAT = frozenset({str, int, float, bool, type(None)})
"""Values a copy can share: immutable, and holding nothing."""


def copy_data(value: Any) -> Any:
    """A deep copy of a value, as `copy.deepcopy` makes it, fast for plain data.

    A list, tuple or dict whose members are all text, numbers, booleans or None is
    copied whole in one step (its members are immutable); other containers are copied
    member by member, and anything else by `copy.deepcopy`. A list of a million floats
    copies in milliseconds, not seconds.
    """
    kind = type(value)
    if kind in _FLAT:
        return value
    if kind is list or kind is tuple:
        if set(map(type, value)) <= _FLAT:
            return list(value) if kind is list else value
        copied = [copy_data(item) for item in value]
        return copied if kind is list else tuple(copied)
    if kind is dict:
        if set(map(type, value.values())) <= _FLAT and set(map(type, value)) <= _FLAT:
            return dict(value)
        return {copy_data(key): copy_data(item) for key, item in value.items()}
    return copy.deepcopy(value)


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

MAX_REPR_CHARS = 1000
"""Characters of the `repr` kept for an object nothing else can convert."""
_MAX_DECODED_BYTES = 4096
_MAX_PLAIN_INT_BITS = 10_000
_SEQUENCE_TYPES = (list, tuple, set, frozenset, deque)
_PLAIN_TYPES = frozenset({str, bool, type(None)})


class CutText(str):
    """The first characters of a longer text, which remembers how long the whole was.

    A tool's huge text output is cut to this before it is redacted inside the tool's run
    (a bounded cost); truncation then reports the whole text's length.
    """

    original_chars: int

    def __new__(cls, text: str, original_chars: int) -> CutText:
        """Keep `text`, the start of a text of `original_chars` characters."""
        cut = super().__new__(cls, text)
        cut.original_chars = original_chars
        return cut


class TrimmedList(list):  # type: ignore[type-arg]
    """A list whose tail was dropped before sizing: `omitted` items are not here."""

    omitted = 0


class TrimmedDict(dict):  # type: ignore[type-arg]
    """A dict whose last keys were dropped before sizing: `omitted` keys are not here."""

    omitted = 0


@dataclass(frozen=True)
class Serialized:
    """A value as plain JSON data, and what its conversion had to leave out."""

    value: Any
    """The JSON data."""
    cut: bool
    """Whether something was left out (it holds a `CutText`)."""
    opaque: bool
    """Whether an object was known only by its `repr` (no field of it was read)."""


class _Walk:
    """What one conversion has seen: the containers it is inside, and what it left out."""

    __slots__ = ("ancestors", "cut", "cut_reprs", "max_items", "opaque")

    def __init__(self, max_items: int = 0) -> None:
        self.ancestors: set[int] = set()
        self.cut = False
        self.opaque = False
        self.max_items = max_items
        self.cut_reprs: dict[str, int] = {}
        """The `repr`s cut inside pydantic-core's conversion (which makes them plain text)."""

    def left_out(self, marker: str, original_chars: int = 0) -> CutText:
        """A marker standing for something left out (`original_chars`: its size)."""
        self.cut = True
        return CutText(marker, max(original_chars, len(marker)))

    def bounded_repr(self, value: Any) -> str:
        """The `repr` of an object nothing else converts, cut to `MAX_REPR_CHARS`."""
        self.opaque = True
        try:
            text = repr(value)
        except Exception:  # a broken __repr__
            return f"<unrepresentable {type(value).__name__}>"
        if len(text) <= MAX_REPR_CHARS:
            return text
        kept = text[: MAX_REPR_CHARS - 3] + "..."
        self.cut_reprs[kept] = len(text)
        return self.left_out(kept, len(text))


def to_jsonable(value: Any) -> Any:
    """Convert a tool's output to plain JSON data (see the module docstring)."""
    return _convert(value, 0, _Walk())


def serialize(value: Any, max_items: int = 0) -> Serialized:
    """Convert a value to plain JSON data, saying whether anything was left out.

    Args:
        value: Any value.
        max_items: When above 0, only the first `max_items` members of a longer list,
            tuple, set or mapping are converted; the others are counted (`omitted`) for
            the marker `truncate_result` leaves. A wide result then costs its budget to
            convert, not its size.
    """
    walk = _Walk(max_items)
    data = _convert(value, 0, walk)
    return Serialized(data, walk.cut, walk.opaque)


def _convert(value: Any, depth: int, walk: _Walk) -> Any:
    if value is None or isinstance(value, bool | str | int | float | Enum):
        return _convert_scalar(value, depth, walk)
    if isinstance(value, bytes | bytearray | memoryview):
        return _convert_bytes(value, walk)
    if depth >= MAX_DEPTH:
        return walk.left_out(TOO_DEEP_MARKER)
    ancestors = walk.ancestors
    if id(value) in ancestors:
        return CYCLE_MARKER
    ancestors.add(id(value))
    try:
        return _convert_object(value, depth + 1, walk)
    finally:
        ancestors.discard(id(value))


def _convert_scalar(value: Any, depth: int, walk: _Walk) -> Any:
    if value is None or type(value) in (bool, str):
        return value
    if isinstance(value, Enum):
        return _convert(value.value, depth, walk)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, CutText):
        walk.cut = True
        return value
    if isinstance(value, str):
        return str.__str__(value)
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


def _convert_bytes(value: bytes | bytearray | memoryview, walk: _Walk) -> str:
    size = value.nbytes if isinstance(value, memoryview) else len(value)
    if size <= _MAX_DECODED_BYTES:
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return f"<{size} bytes>"  # binary data, described rather than cut
    return walk.left_out(f"<{size} bytes>", size)


def _convert_object(value: Any, depth: int, walk: _Walk) -> Any:
    if isinstance(value, BaseMessage):
        return _convert(value.content, depth, walk)
    if isinstance(value, Mapping):
        return _convert_mapping(value, depth, walk)
    if isinstance(value, _SEQUENCE_TYPES):
        return _convert_sequence(value, depth, walk)
    if isinstance(value, Iterator | range):
        return _convert_iterator(value, depth, walk)
    if isinstance(value, AsyncIterator):
        return walk.left_out(ASYNC_ITERATOR_MARKER)
    return _convert_other(value, depth, walk)


def _convert_iterator(value: Iterator[Any] | range, depth: int, walk: _Walk) -> Any:
    """Read a nested iterator up to `MAX_NESTED_ITEMS` items (never all of an endless one)."""
    items = [
        _convert_item(item, depth, walk) for item in itertools.islice(value, MAX_NESTED_ITEMS + 1)
    ]
    if len(items) > MAX_NESTED_ITEMS:
        items[MAX_NESTED_ITEMS:] = [walk.left_out(UNREAD_MARKER)]
    return items


def _convert_other(value: Any, depth: int, walk: _Walk) -> Any:
    """Models, dataclasses, dates and the rest: pydantic-core's conversion, else a repr."""
    try:
        data = to_jsonable_python(
            value, by_alias=False, inf_nan_mode="strings", fallback=walk.bounded_repr
        )
    except Exception:  # a cycle or a failing serializer: describe the object instead
        return walk.bounded_repr(value)
    if walk.cut_reprs:
        data = _marked(data, walk.cut_reprs)
    return _convert(data, depth, walk)


def _marked(data: Any, cut_reprs: dict[str, int]) -> Any:
    """Make the cut `repr`s in pydantic-core's output `CutText` again (it made them text)."""
    if type(data) is str:
        chars = cut_reprs.get(data)
        return data if chars is None else CutText(data, chars)
    if type(data) is dict:
        return {key: _marked(item, cut_reprs) for key, item in data.items()}
    if type(data) is list:
        return [_marked(item, cut_reprs) for item in data]
    return data


def _convert_mapping(value: Mapping[Any, Any], depth: int, walk: _Walk) -> dict[str, Any]:
    if walk.max_items and len(value) > walk.max_items:
        kept = TrimmedDict(
            (key if type(key) is str else _convert_key(key), _convert_item(item, depth, walk))
            for key, item in itertools.islice(value.items(), walk.max_items)
        )
        kept.omitted = len(value) - walk.max_items
        walk.cut = True
        return kept
    return {
        key if type(key) is str else _convert_key(key): _convert_item(item, depth, walk)
        for key, item in value.items()
    }


def _convert_item(item: Any, depth: int, walk: _Walk) -> Any:
    """Convert one member of a container, with a fast path for plain values."""
    kind = type(item)
    if kind in _PLAIN_TYPES:
        return item
    if kind is int and item.bit_length() <= _MAX_PLAIN_INT_BITS:
        return item
    if kind is float and math.isfinite(item):
        return item
    return _convert(item, depth, walk)


def _convert_key(key: Any) -> str:
    if isinstance(key, str):
        return str(key)
    if isinstance(key, Enum):
        key = key.value
    if key is None or isinstance(key, bool | int | float):
        return json.dumps(_convert_scalar(key, 0, _Walk()))
    text = _convert(key, MAX_DEPTH - 1, _Walk())
    return text if isinstance(text, str) else json.dumps(text)


def _convert_sequence(value: Any, depth: int, walk: _Walk) -> Any:
    if isinstance(value, list | tuple):
        text = _joined_text_blocks(value)
        if text is not None:
            return text
    if walk.max_items and len(value) > walk.max_items:
        kept = TrimmedList(
            _convert_item(item, depth, walk) for item in itertools.islice(value, walk.max_items)
        )
        kept.omitted = len(value) - walk.max_items
        walk.cut = True
        return kept
    items = [_convert_item(item, depth, walk) for item in value]
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
