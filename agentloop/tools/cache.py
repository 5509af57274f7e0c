"""A bounded TTL cache of tool results, shared by every run of one compiled loop."""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

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


@dataclass
class _Entry:
    value: Any
    stored_at: float
    expires_at: float


class ResultCache:
    """Fresh results (per-entry TTL) and, separately, the last good result of each call.

    Both maps are LRU-bounded. Thread-safe, since sync tools run in worker threads.

    Args:
        max_entries: Bound of each map.
        stale_ttl_s: How long a last good result stays usable as a stale fallback.
        clock: Time source (seconds), replaceable in tests.
    """

    def __init__(
        self,
        max_entries: int = 1024,
        stale_ttl_s: float = 24 * 3600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._max_entries = max_entries
        self._stale_ttl_s = stale_ttl_s
        self._clock = clock
        self._fresh: OrderedDict[str, _Entry] = OrderedDict()
        self._stale: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._fresh)

    def get(self, key: str) -> CacheHit | None:
        """Return a fresh result for `key`, or None."""
        return self._lookup(self._fresh, key)

    def get_stale(self, key: str) -> CacheHit | None:
        """Return the last good result for `key`, however old (within the stale TTL)."""
        return self._lookup(self._stale, key)

    def put(self, key: str, value: Any, ttl_s: float | None) -> None:
        """Remember a successful result: as fresh for `ttl_s` (if given) and as last good."""
        now = self._clock()
        with self._lock:
            if ttl_s:
                self._store(self._fresh, key, _Entry(value, now, now + ttl_s))
            self._store(self._stale, key, _Entry(value, now, now + self._stale_ttl_s))

    def clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._fresh.clear()
            self._stale.clear()

    def _lookup(self, table: OrderedDict[str, _Entry], key: str) -> CacheHit | None:
        now = self._clock()
        with self._lock:
            entry = table.get(key)
            if entry is None:
                return None
            if entry.expires_at <= now:
                del table[key]
                return None
            table.move_to_end(key)
            return CacheHit(entry.value, now - entry.stored_at)

    def _store(self, table: OrderedDict[str, _Entry], key: str, entry: _Entry) -> None:
        table[key] = entry
        table.move_to_end(key)
        while len(table) > self._max_entries:
            table.popitem(last=False)
