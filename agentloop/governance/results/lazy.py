"""Reading the iterators a tool returns: lazily, and only up to the result's bounds.

A tool may return an iterator, a generator or an async generator, endless or not. It is
read one item at a time, each item converted to JSON data at once, and reading stops at
the first bound reached: `max_items` items, `max_chars` characters of JSON, or the
call's deadline (its time limit). Whatever was read is the result, marked truncated when
a bound cut it short; the iterator is closed afterwards, so its `finally` blocks run.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from agentloop.base.jsonable import to_jsonable
from agentloop.base.sync import has_running_loop

__all__ = [
    "ReadItems",
    "ReadLimits",
    "is_async_lazy",
    "is_lazy",
    "read_items",
]

_CLOSE_TIMEOUT_S = 1.0

Bound = Literal["", "items", "characters", "time"]


@dataclass(frozen=True)
class ReadLimits:
    """How much of an iterator is read."""

    max_items: int = 1_000
    """Items at most."""
    max_chars: int = 20_000
    """Characters of JSON at most (reading stops once they are exceeded)."""
    deadline: float | None = None
    """`time.monotonic()` (the event loop's clock) when reading stops; None: no limit."""


@dataclass(frozen=True)
class ReadItems:
    """What was read of an iterator."""

    items: list[Any]
    """The items read, as JSON data."""
    bound: Bound = ""
    """The bound that stopped reading ("" when the iterator ended first)."""

    @property
    def truncated(self) -> bool:
        """Whether the iterator had more to give."""
        return bool(self.bound)

    @property
    def note(self) -> str:
        """What the record says about it."""
        read = f"{len(self.items)} item{'' if len(self.items) == 1 else 's'}"
        if not self.bound:
            return f"the tool returned an iterator: {read} read"
        reason = {
            "items": "its item limit",
            "characters": "its size limit",
            "time": "its time limit",
        }[self.bound]
        return f"the tool returned an iterator: {read} read, then stopped at {reason}"


def is_lazy(value: Any) -> bool:
    """Tell whether a value is an iterator to read lazily (a generator, a `map`...)."""
    return isinstance(value, Iterator | range)


def is_async_lazy(value: Any) -> bool:
    """Tell whether a value is an async iterator (an async generator...)."""
    return isinstance(value, AsyncIterator)


def _size(item: Any) -> int:
    if isinstance(item, str):
        return len(item) + 2
    return len(json.dumps(item, ensure_ascii=False, default=str)) + 1


class _Reader:
    """Accumulates items and tells when a bound is reached."""

    def __init__(self, limits: ReadLimits) -> None:
        self.limits = limits
        self.items: list[Any] = []
        self.chars = 2

    def time_is_up(self) -> bool:
        deadline = self.limits.deadline
        return deadline is not None and time.monotonic() >= deadline

    def full(self) -> Bound:
        """The bound reached before reading another item ("" if none)."""
        if self.chars > self.limits.max_chars:
            return "characters"
        if self.time_is_up():
            return "time"
        return ""

    def add(self, item: Any) -> Bound:
        """Keep one item; return "items" when it is one past the item limit."""
        if len(self.items) >= self.limits.max_items:
            return "items"
        converted = to_jsonable(item)
        self.items.append(converted)
        self.chars += _size(converted)
        return ""


async def read_items(iterator: Any, limits: ReadLimits) -> ReadItems:
    """Read an iterator up to `limits`, then close it.

    Await it on an event loop for an async iterator, whose reading also stops at the
    deadline; run it with `run_blocking` for a sync one (off the event loop: reading may
    block). One item past `max_items` is asked for, to tell an iterator that ended from
    one that was cut.
    """
    reader = _Reader(limits)
    asynchronous = has_running_loop()
    source = iterator if asynchronous else iter(iterator)
    try:
        while not (bound := reader.full()):
            if asynchronous:
                async with asyncio.timeout_at(limits.deadline):
                    item = await anext(source, _END)
            else:
                item = next(source, _END)
            if item is _END:
                break
            if bound := reader.add(item):
                break
        return ReadItems(reader.items, bound)
    except TimeoutError:
        return ReadItems(reader.items, "time")
    finally:
        if asynchronous:
            await _aclose(source)
        else:
            _close(source)


_END: Any = object()
"""What `next`/`anext` return once the iterator is exhausted."""


def _close(iterator: Any) -> None:
    close = getattr(iterator, "close", None)
    if callable(close):
        try:
            close()
        except Exception:  # a generator that yields in `finally`: nothing more to do
            return


async def _aclose(iterator: Any) -> None:
    close = getattr(iterator, "aclose", None)
    if not callable(close):
        return
    try:
        async with asyncio.timeout(_CLOSE_TIMEOUT_S):
            await close()
    except Exception:  # a generator that yields in `finally`, or takes too long to close
        return
