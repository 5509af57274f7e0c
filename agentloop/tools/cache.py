"""The result cache of one compiled loop: fresh results and last good results, bounded.

Both are opt-in per tool and only for idempotent tools:

- `ToolPolicy(cache_ttl_s=...)`: a successful result answers the same call again while
  it is fresh (the `CacheInterceptor` looks it up);
- `ToolPolicy(stale_fallback_s=...)`: the last good result is kept that long and comes
  back, marked stale with its age, when the tool later fails.

Values are stored as the records show them (JSON data within the tool's size budget).
An entry remembers the part of the tools' state it read (`StateTouch`): a call with side
effects on that state drops it from both maps (`invalidate`), so neither ever answers
with data from before a write.
Each map is bounded in entries and in bytes (least recently used out first), so a busy
loop's memory stays bounded whatever its tools return.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agentloop.tools.freshness import StateTouch

__all__ = ["CacheHit", "ResultCache", "canonical_key"]


def canonical_key(tool_name: str, arguments: Mapping[str, Any]) -> str:
    """Return a stable key for a call: the tool name and its arguments, sorted.

    Args:
        tool_name: The tool.
        arguments: The (validated) arguments.

    Returns:
        `tool_name` followed by the canonical JSON of the arguments.
    """
    body = json.dumps(arguments, sort_keys=True, default=str)
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
    expires_at: float
    size: int
    touch: StateTouch | None = None


def _size(value: Any) -> int:
    try:
        return len(json.dumps(value, ensure_ascii=False, default=str))
    except (TypeError, ValueError, RecursionError):
        return len(repr(value))


class _Table:
    """One LRU map bounded in entries and bytes."""

    def __init__(self, max_entries: int, max_bytes: int) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.entries: OrderedDict[str, _Entry] = OrderedDict()
        self.bytes = 0

    def get(self, key: str, now: float) -> _Entry | None:
        entry = self.entries.get(key)
        if entry is None:
            return None
        if entry.expires_at <= now:
            self._drop(key)
            return None
        self.entries.move_to_end(key)
        return entry

    def put(self, key: str, entry: _Entry) -> None:
        if entry.size > self.max_bytes:
            return
        self._drop(key)
        self.entries[key] = entry
        self.bytes += entry.size
        while len(self.entries) > self.max_entries or self.bytes > self.max_bytes:
            self._drop(next(iter(self.entries)))

    def _drop(self, key: str) -> None:
        entry = self.entries.pop(key, None)
        if entry is not None:
            self.bytes -= entry.size

    def clear(self) -> None:
        self.entries.clear()
        self.bytes = 0

    def invalidate(self, touch: StateTouch) -> int:
        stale = [
            key
            for key, entry in self.entries.items()
            if entry.touch is None or entry.touch.overlaps(touch)
        ]
        for key in stale:
            self._drop(key)
        return len(stale)


class ResultCache:
    """Fresh results and last good results of tool calls; thread-safe.

    Args:
        max_entries: Bound of each map, in entries.
        max_bytes: Bound of each map, in characters of the stored values' JSON.
        clock: Time source (seconds), replaceable in tests.
    """

    def __init__(
        self,
        max_entries: int = 1024,
        max_bytes: int = 32 * 1024 * 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._clock = clock
        self._fresh = _Table(max_entries, max_bytes)
        self._last_good = _Table(max_entries, max_bytes)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._fresh.entries) + len(self._last_good.entries)

    @property
    def size_bytes(self) -> int:
        """The size of what both maps hold."""
        with self._lock:
            return self._fresh.bytes + self._last_good.bytes

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
        self._store(self._fresh, key, value, ttl_s, touch)

    def last_good(self, key: str) -> CacheHit | None:
        """Return the last good result for `key` (kept by `remember`), or None."""
        return self._lookup(self._last_good, key)

    def remember(
        self, key: str, value: Any, keep_s: float, touch: StateTouch | None = None
    ) -> None:
        """Keep a successful result as the last good one for `keep_s` seconds."""
        self._store(self._last_good, key, value, keep_s, touch)

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
            self._fresh.clear()
            self._last_good.clear()

    def _lookup(self, table: _Table, key: str) -> CacheHit | None:
        now = self._clock()
        with self._lock:
            entry = table.get(key, now)
        return None if entry is None else CacheHit(entry.value, now - entry.stored_at)

    def _store(
        self, table: _Table, key: str, value: Any, keep_s: float, touch: StateTouch | None
    ) -> None:
        now = self._clock()
        entry = _Entry(value, now, now + keep_s, _size(value), touch)
        with self._lock:
            table.put(key, entry)
