"""The whole results of a plan's commands, kept for the references of later commands.

A record holds a result cut to its size budget (what the planner and the answer see); a
`"$N"` or `"${N}"` reference must hand the next tool the whole value instead. The tool
runner keeps, for each call whose result was cut, the complete value it had at hand,
for as long as a plan may still refer to it and within a memory bound. What is not kept
(after a resume in another process, past the bound, or a result that was cut before the
loop saw it whole) is unavailable: a write is then not called (`reference_unavailable`),
a read gets the cut value and its record says so.
"""

from __future__ import annotations

import threading
from typing import Any

from cachetools import TTLCache

from agentloop.tools.results import WholeResult

__all__ = ["MAX_WHOLE_RESULT_CHARS", "WHOLE_RESULT_TTL_S", "WholeResults"]

MAX_WHOLE_RESULT_CHARS = 50_000_000
"""The size, in characters of text or JSON, of the whole results one loop keeps at once;
the oldest go first."""
WHOLE_RESULT_TTL_S = 3600.0
"""How long a whole result is kept for a plan that may still refer to it."""


class WholeResults:
    """The whole results of the calls whose records hold a cut result, by call id.

    Args:
        max_chars: The bound of all kept results together (a larger one is not kept).
        ttl_s: How long each is kept.
    """

    def __init__(
        self, max_chars: int = MAX_WHOLE_RESULT_CHARS, ttl_s: float = WHOLE_RESULT_TTL_S
    ) -> None:
        self._kept: TTLCache[str, WholeResult] = TTLCache(
            maxsize=max_chars, ttl=ttl_s, getsizeof=lambda whole: max(whole.chars, 1)
        )
        self._lock = threading.Lock()

    def keep(self, call_id: str, whole: WholeResult) -> None:
        """Keep the whole result of a call (one larger than the bound is not kept)."""
        with self._lock:
            try:
                self._kept[call_id] = whole
            except ValueError:  # larger than the whole bound
                self._kept.pop(call_id, None)

    def get(self, call_id: str) -> WholeResult | None:
        """The whole result of a call, or None when it is not kept."""
        with self._lock:
            return self._kept.get(call_id)

    def __len__(self) -> int:
        with self._lock:
            return len(self._kept)

    def __contains__(self, call_id: Any) -> bool:
        with self._lock:
            return call_id in self._kept
