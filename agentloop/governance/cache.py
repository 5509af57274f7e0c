"""The result cache of one compiled loop: fresh results and last good results, bounded.

Both are opt-in per tool and only for idempotent tools:

- `ToolPolicy(cache_ttl_s=...)`: a successful result answers the same call again while
  it is fresh (the `CacheLayer` looks it up);
- `ToolPolicy(stale_fallback_s=...)`: the last good result is kept that long and comes
  back, marked stale with its age, when the tool later fails.

Values are stored as the records show them (JSON data within the tool's size budget).
An entry remembers the part of the tools' state it read (`StateTouch`): a call with side
effects on that state drops it from both maps (`invalidate`), so neither ever answers
with data from before a write.
Each map is a `cachetools.TLRUCache` (every entry with its own lifetime) bounded in bytes,
and in entries on top (least recently used out first), so a busy loop's memory stays
bounded whatever its tools return.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from cachetools import Cache, TLRUCache

from agentloop.governance.freshness import StateTouch

__all__ = ["CacheHit", "ResultCache", "canonical_key"]

_KEY_JSON = json.JSONEncoder(sort_keys=True, default=str)
"""`json.dumps` with the options of `canonical_key`, its encoder built once."""


_LONGEST_BODY = 512
"""Arguments whose canonical JSON is longer are keyed by its digest."""


def canonical_key(tool_name: str, arguments: Mapping[str, Any]) -> str:
    """Return a stable key for a call: the tool name and its arguments, sorted.

    Args:
        tool_name: The tool.
        arguments: The (validated) arguments.

    Returns:
        `tool_name` followed by the canonical JSON of the arguments, or by its SHA-256
        digest when that is longer than 512 characters (a key is kept in every record,
        the result cache and the run's reads: a whole value handed over by reference must
        not be kept there again).
    """
    body = _KEY_JSON.encode(arguments)
    if len(body) > _LONGEST_BODY:
        digest = hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()
        return f"{tool_name}:sha256:{digest}"
    return f"{tool_name}:{body}"


@dataclass(frozen=True)
class CacheHit:
    """A cached result and its age."""

    value: Any
    age_s: float


@dataclass(frozen=True, slots=True)
class _Entry:
    value: Any
    stored_at: float
    keep_s: float
    size: int
    touch: StateTouch | None = None


def _size(value: Any) -> int:
    try:
        return len(json.dumps(value, ensure_ascii=False, default=str))
    except (TypeError, ValueError, RecursionError):
        return len(repr(value))


def _expires_at(_key: str, entry: _Entry, _now: float) -> float:
    """The time to use of an entry (`TLRUCache`'s `ttu`): each keeps its own lifetime."""
    return entry.stored_at + entry.keep_s


def _entry_size(entry: _Entry) -> int:
    return entry.size


class _Table:
    """One map: a `TLRUCache` bounded in bytes, with an entry-count bound on top.

    `TLRUCache` measures one size (here the bytes of the stored values); the entry bound
    evicts its least recently used entries, as its own eviction does, past `max_entries`.
    """

    def __init__(self, max_entries: int, max_bytes: int, clock: Callable[[], float]) -> None:
        self.max_entries = max_entries
        self.entries: TLRUCache[str, _Entry] = TLRUCache(
            max_bytes, _expires_at, timer=clock, getsizeof=_entry_size
        )

    def get(self, key: str) -> _Entry | None:
        return self.entries.get(key)

    def put(self, key: str, value: Any, keep_s: float, touch: StateTouch | None) -> None:
        with self.entries.timer as now:
            entry = _Entry(value, now, keep_s, _size(value), touch)
            if entry.size > self.entries.maxsize:
                return  # larger than the whole bound: never kept
            self.entries[key] = entry
            while len(self.entries) > self.max_entries:
                self.entries.popitem()

    def invalidate(self, touch: StateTouch) -> int:
        with self.entries.timer:  # one instant for the whole pass
            stale = [
                key for key in list(self.entries) if _reads_overlap(_peek(self.entries, key), touch)
            ]
            for key in stale:
                self.entries.pop(key, None)
        return len(stale)


def _peek(entries: TLRUCache[str, _Entry], key: str) -> _Entry:
    """An entry's value without marking it recently used (as `TLRUCache.popitem` reads it)."""
    entry: _Entry = Cache.__getitem__(entries, key)
    return entry


def _reads_overlap(entry: _Entry, touch: StateTouch) -> bool:
    return entry.touch is None or entry.touch.overlaps(touch)


class ResultCache:
    """Fresh results and last good results of tool calls; thread-safe.

    Args:
        max_entries: Bound of each map, in entries.
        max_bytes: Bound of each map, in characters of the stored values' JSON; a value
            larger than the whole bound is not kept.
        clock: Time source (seconds), replaceable in tests.

    Raises:
        ValueError: A negative bound.
    """

    def __init__(
        self,
        max_entries: int = 1024,
        max_bytes: int = 32 * 1024 * 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_entries < 0 or max_bytes < 0:
            msg = f"ResultCache bounds must be >= 0, got {max_entries=} and {max_bytes=}"
            raise ValueError(msg)
        self._clock = clock
        self._fresh = _Table(max_entries, max_bytes, clock)
        self._last_good = _Table(max_entries, max_bytes, clock)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._fresh.entries) + len(self._last_good.entries)

    @property
    def size_bytes(self) -> int:
        """The size of what both maps hold."""
        with self._lock:
            return int(self._fresh.entries.currsize + self._last_good.entries.currsize)

    def get(self, key: str) -> CacheHit | None:
        """Return a fresh result for `key`, or None."""
        return self._lookup(self._fresh, key)

    def put(self, key: str, value: Any, ttl_s: float, touch: StateTouch | None = None) -> None:
        """Remember a successful result as fresh for `ttl_s` seconds.

        Args:
            key: The call's cache key.
            value: The result.
            ttl_s: How long it stays fresh.
            touch: What it read (None: it is dropped by any write).
        """
        with self._lock:
            self._fresh.put(key, value, ttl_s, touch)

    def last_good(self, key: str) -> CacheHit | None:
        """Return the last good result for `key` (kept by `remember`), or None."""
        return self._lookup(self._last_good, key)

    def remember(
        self, key: str, value: Any, keep_s: float, touch: StateTouch | None = None
    ) -> None:
        """Keep a successful result as the last good one for `keep_s` seconds."""
        with self._lock:
            self._last_good.put(key, value, keep_s, touch)

    def invalidate(self, touch: StateTouch) -> int:
        """Drop every entry (fresh or last good) a write to `touch` may have changed.

        Returns:
            How many entries were dropped.
        """
        with self._lock:
            return self._fresh.invalidate(touch) + self._last_good.invalidate(touch)

    def clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._fresh.entries.clear()
            self._last_good.entries.clear()

    def _lookup(self, table: _Table, key: str) -> CacheHit | None:
        with self._lock, table.entries.timer as now:
            entry = table.get(key)
        return None if entry is None else CacheHit(entry.value, now - entry.stored_at)
