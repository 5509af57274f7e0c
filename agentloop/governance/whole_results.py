"""The whole results of a plan's commands, kept for the references of later commands.

A record holds a result cut to its size budget (what the planner and the answer see); a
`"$N"` or `"${N}"` reference must hand the next tool the whole value instead. The tool
runner keeps, for each call whose result was cut, the complete value it had at hand,
under the run's invocation (`RunBook.invocation`: two runs never share one, even with
the same request on one thread) and the call id, until the run ends.

Each value is counted by its size in memory (`memory_size`), and the values of all runs
together stay within the loop's bound: a value that would exceed it is not kept, and
never pushes out a value another run still needs. What is not kept (after a resume in
another process, past the bound, or a result that was cut before the loop saw it whole)
is unavailable: a write is then not called (`reference_unavailable`), a read gets the
cut value and its record says so.
"""

from __future__ import annotations

import sys
import threading
import time
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentloop.governance.results import WholeResult

__all__ = [
    "MAX_WHOLE_RESULT_BYTES",
    "WHOLE_RESULT_TTL_S",
    "WholeResults",
    "memory_size",
]

MAX_WHOLE_RESULT_BYTES = 256 * 1024 * 1024
"""The memory, in bytes, the whole results of one loop's runs may take together."""
WHOLE_RESULT_TTL_S = 3600.0
"""How long a run's whole results are kept when the run never ends (an interrupt that
is never resumed): a run that ends releases its own at once."""

_SAMPLE = 256
"""Members of a container measured one by one; beyond, an even sample of this many."""
_NOT_OWNED = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType)
"""What a value refers to without holding it (classes, modules, functions): not counted."""
_SCALARS = frozenset({str, bytes, int, float, bool, type(None), complex})
_OBJECT_SIZEOF = object.__sizeof__


def memory_size(value: Any) -> int:
    """Measure the memory a value takes, in bytes, with its members.

    `sys.getsizeof` of the value and of everything it holds: the members of lists,
    tuples, sets and dicts (keys and values), and the attributes of objects (their
    `__dict__` and slots). An object whose type measures itself (`__sizeof__`, as
    NumPy arrays and pandas frames do) counts as it says. A container shared within the
    value counts once; classes, modules and functions it refers to count nothing.

    A container of more than 256 members is measured by an even sample of 256 of them,
    which stands for the rest (a list of a million floats is measured in a few hundred
    steps, as the event loop needs).

    Args:
        value: What to measure.

    Returns:
        Its size in bytes.
    """
    getsizeof = sys.getsizeof
    seen: set[int] = set()
    total = 0.0
    stack: list[tuple[Any, float]] = [(value, 1.0)]
    while stack:
        item, weight = stack.pop()
        kind = type(item)
        if kind in _SCALARS:
            total += getsizeof(item) * weight
            continue
        if isinstance(item, _NOT_OWNED) or id(item) in seen:
            continue
        seen.add(id(item))
        total += getsizeof(item) * weight
        members = _members(item, kind)
        count = len(members)
        if count <= _SAMPLE:
            stack.extend((member, weight) for member in members)
            continue
        step = count / _SAMPLE
        share = weight * step
        stack.extend((members[int(index * step)], share) for index in range(_SAMPLE))
    return int(total)


def _members(item: Any, kind: type) -> list[Any] | tuple[Any, ...]:
    """What a value holds: its members, or an object's attributes (none when it sizes itself)."""
    if kind is list or kind is tuple:
        return item  # type: ignore[no-any-return]
    if isinstance(item, dict):
        return [*item.keys(), *item.values()]
    if isinstance(item, list | tuple | set | frozenset):
        return list(item)
    if getattr(kind, "__sizeof__", None) is not _OBJECT_SIZEOF:
        return ()  # it counts what it holds itself (NumPy arrays, pandas frames)
    held: list[Any] = []
    attributes = getattr(item, "__dict__", None)
    if isinstance(attributes, dict):
        held.append(attributes)
    for cls in kind.__mro__:
        for slot in getattr(cls, "__slots__", ()):
            if isinstance(slot, str) and slot not in ("__dict__", "__weakref__"):
                try:
                    held.append(getattr(item, slot))
                except AttributeError:
                    continue
    return held


@dataclass(frozen=True, slots=True)
class _Kept:
    whole: WholeResult
    size: int
    until: float


class WholeResults:
    """The whole results of the calls whose records hold a cut result, per run.

    Kept under the run's invocation and the call id; `release` drops a run's at its end.
    Values never push each other out: one that would exceed the bound is not kept.

    Args:
        max_bytes: The bound of all kept results together, in bytes.
        ttl_s: How long a run's results are kept when the run never ends.
        clock: The clock of `ttl_s` (seconds).
    """

    def __init__(
        self,
        max_bytes: int = MAX_WHOLE_RESULT_BYTES,
        ttl_s: float = WHOLE_RESULT_TTL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_bytes = max_bytes
        self._ttl_s = ttl_s
        self._clock = clock
        self._kept: dict[tuple[str, str], _Kept] = {}  # oldest first
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def bytes(self) -> int:
        """The memory the kept results take together, as measured when kept."""
        return self._bytes

    def keep(self, invocation: str, call_id: str, whole: WholeResult) -> bool:
        """Keep the whole result of a call; False when it would exceed the bound."""
        size = memory_size(whole.value)
        key = (invocation, call_id)
        with self._lock:
            self._drop_expired()
            self._drop(key)
            if self._bytes + size > self.max_bytes:
                return False
            self._kept[key] = _Kept(whole, size, self._clock() + self._ttl_s)
            self._bytes += size
            return True

    def get(self, invocation: str, call_id: str) -> WholeResult | None:
        """The whole result of a call of a run, or None when it is not kept."""
        kept = self._kept.get((invocation, call_id))
        return None if kept is None else kept.whole

    def release(self, invocation: str) -> None:
        """Drop the whole results of a run (it ended)."""
        with self._lock:
            for key in [key for key in self._kept if key[0] == invocation]:
                self._drop(key)

    def _drop(self, key: tuple[str, str]) -> None:
        kept = self._kept.pop(key, None)
        if kept is not None:
            self._bytes -= kept.size

    def _drop_expired(self) -> None:
        now = self._clock()
        for key, kept in list(self._kept.items()):
            if kept.until > now:
                break  # kept in order, each for the same time: the rest are newer
            self._drop(key)

    def __len__(self) -> int:
        return len(self._kept)
