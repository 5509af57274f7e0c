"""Tool results as plain JSON data (`serialize`), within a size budget (`truncate`, `shrink`).

Iterators a tool returns are read lazily, within the call's bounds (`lazy`). The
conversion to JSON data lives in `agentloop.base.jsonable`, below redaction, and is
re-exported here.
"""

from __future__ import annotations

from agentloop.base.jsonable import (
    ASYNC_ITERATOR_MARKER,
    CYCLE_MARKER,
    MAX_DEPTH,
    MAX_NESTED_ITEMS,
    MAX_REPR_CHARS,
    TOO_DEEP_MARKER,
    UNREAD_MARKER,
    CutText,
    Serialized,
    serialize,
    to_jsonable,
)
from agentloop.governance.results.lazy import (
    ReadItems,
    ReadLimits,
    is_async_lazy,
    is_lazy,
    read_items,
)
from agentloop.governance.results.shrink import ITEMS_MARKER, KEYS_MARKER, TRUNCATION_MARKER
from agentloop.governance.results.truncate import (
    LARGE_TEXT_CHARS,
    UNREAD_TEXT_MARKER,
    TruncatedResult,
    WholeResult,
    truncate_result,
)

__all__ = [
    "ASYNC_ITERATOR_MARKER",
    "CutText",
    "CYCLE_MARKER",
    "ITEMS_MARKER",
    "KEYS_MARKER",
    "LARGE_TEXT_CHARS",
    "MAX_DEPTH",
    "MAX_NESTED_ITEMS",
    "MAX_REPR_CHARS",
    "ReadItems",
    "ReadLimits",
    "Serialized",
    "TOO_DEEP_MARKER",
    "TRUNCATION_MARKER",
    "TruncatedResult",
    "UNREAD_MARKER",
    "UNREAD_TEXT_MARKER",
    "WholeResult",
    "is_async_lazy",
    "is_lazy",
    "read_items",
    "serialize",
    "to_jsonable",
    "truncate_result",
]
