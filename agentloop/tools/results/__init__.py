"""Tool results as plain JSON data (`serialize`), within a size budget (`truncate`)."""

from __future__ import annotations

from agentloop.tools.results.serialize import CYCLE_MARKER, MAX_DEPTH, TOO_DEEP_MARKER, to_jsonable
from agentloop.tools.results.truncate import (
    ITEMS_MARKER,
    KEYS_MARKER,
    TRUNCATION_MARKER,
    TruncatedResult,
    truncate_result,
)

__all__ = [
    "CYCLE_MARKER",
    "ITEMS_MARKER",
    "KEYS_MARKER",
    "MAX_DEPTH",
    "TOO_DEEP_MARKER",
    "TRUNCATION_MARKER",
    "TruncatedResult",
    "to_jsonable",
    "truncate_result",
]
