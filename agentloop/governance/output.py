"""Bounding what a tool returned before it is materialized, off the event loop when large.

- An iterator, generator or async generator is read lazily inside the call's time limit,
  up to its bounds (items, characters, time), and marked truncated when cut
  (`agentloop.governance.results.lazy`). A sync iterator is read in one of the loop's tool
  threads, an async one on the event loop.
- A large result (a string over `LARGE_RESULT_CHARS`, a container with more than
  `LARGE_RESULT_NODES` members or strings that long, or one holding iterators) is
  converted to JSON data and cut to its size budget in a worker thread, so the event
  loop, and every other run on it, goes on meanwhile.
- A result that cannot be converted fails the call as `unserializable_result`.

Anything else is returned as it is: the loop's layers still see the tool's own objects.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from agentloop.base.sync import has_running_loop, run_without_loop
from agentloop.errors import ToolCallError
from agentloop.governance.results import (
    ReadItems,
    ReadLimits,
    TruncatedResult,
    is_async_lazy,
    is_lazy,
    read_items,
    truncate_result,
)
from agentloop.governance.threads import OnAbandoned, ToolThreads

__all__ = [
    "LARGE_RESULT_CHARS",
    "LARGE_RESULT_NODES",
    "BoundedOutput",
    "Weight",
    "bound_output",
    "bounded_json",
    "weigh",
]

LARGE_RESULT_CHARS = 256 * 1024
"""Characters of text above which a result is converted off the event loop."""
LARGE_RESULT_NODES = 10_000
"""Members of nested containers above which a result is converted off the event loop."""
_READ_SLACK_S = 0.5
"""How long past the call's deadline a thread reading an iterator is waited for."""

Weight = Literal["small", "large", "lazy"]
"""How heavy a result is: "large" is converted (and redacted) off the event loop, "lazy"
holds iterators to read within the call's bounds."""


@dataclass(frozen=True)
class BoundedOutput:
    """A tool's output once bounded: JSON data within its budget."""

    value: Any
    truncated: bool = False
    """Whether a bound cut it."""
    notes: tuple[str, ...] = ()
    """What the record says about how it was read."""
    whole: Any = None
    """The complete value when a size bound cut it and it was at hand (see
    `TruncatedResult.whole`); None otherwise (an iterator read in part has no whole)."""


def bounded_json(value: Any, max_chars: int, tool_name: str = "") -> TruncatedResult:
    """Convert a result to JSON data within `max_chars`.

    Raises:
        ToolCallError: It cannot be converted (`unserializable_result`).
    """
    if type(value) is str and len(value) <= max_chars:  # the usual result: kept as it is
        return TruncatedResult(value, truncated=False, original_chars=len(value))
    try:
        return truncate_result(value, max_chars)
    except Exception as error:
        source = f"{tool_name} returned" if tool_name else "the result is"
        msg = (
            f"{source} a {type(value).__name__} that cannot be converted to JSON data "
            f"({type(error).__name__}: {error})"
        )
        raise ToolCallError("unserializable_result", msg) from error


_NOT_LAZY = frozenset({str, dict, list, tuple, int, float, bool, type(None)})
"""Output types that are no iterator to read: no ABC check for the usual results."""


def weigh(value: Any) -> Weight:
    """Tell, looking at no more than `LARGE_RESULT_NODES` members, how heavy a result is.

    The estimate is cheap whatever the result: a container is "large" from its `len` alone
    when it has more members than are left to look at, and an object (a dataclass, a
    pydantic model...) is weighed by its attributes.
    """
    if isinstance(value, str):
        return "large" if len(value) > LARGE_RESULT_CHARS else "small"
    stack = [value]
    nodes = chars = 0
    while stack:
        item = stack.pop()
        nodes += 1
        if nodes > LARGE_RESULT_NODES:
            return "large"
        if isinstance(item, str):
            chars += len(item)
            if chars > LARGE_RESULT_CHARS:
                return "large"
        elif item is None or isinstance(item, int | float):
            continue
        elif isinstance(item, Iterator | AsyncIterator | range):
            return "lazy"
        elif isinstance(item, dict | list | tuple | set | frozenset):
            if len(item) > LARGE_RESULT_NODES - nodes:
                return "large"
            stack.extend(item.values() if isinstance(item, dict) else item)
        elif isinstance(item, bytes | bytearray):
            chars += len(item)
            if chars > LARGE_RESULT_CHARS:
                return "large"
        elif not isinstance(item, type):
            fields = getattr(item, "__dict__", None)
            if isinstance(fields, dict):
                stack.extend(fields.values())
    return "small"


def _convert(value: Any, max_chars: int, tool_name: str, notes: tuple[str, ...]) -> BoundedOutput:
    result = bounded_json(value, max_chars, tool_name)
    return BoundedOutput(result.value, result.truncated, notes, result.whole)


async def bound_output(
    output: Any,
    *,
    tool_name: str,
    limits: ReadLimits,
    threads: ToolThreads,
    on_abandoned: OnAbandoned | None = None,
) -> Any:
    """Bound a tool's output (see the module docstring).

    Args:
        output: What the tool returned.
        tool_name: The tool, for messages and its threads.
        limits: Items, characters and the call's deadline (the event loop's clock).
        threads: The loop's tool threads (a sync iterator is read in one).
        on_abandoned: Told when a thread reading an iterator is abandoned.

    Returns:
        The output unchanged when it is small plain data or an ordinary object, else a
        `BoundedOutput`.

    Raises:
        TimeoutError: Reading a sync iterator hung past the call's deadline.
        ToolCallError: The output cannot be converted (`unserializable_result`).
    """
    notes: tuple[str, ...] = ()
    truncated = False
    if type(output) not in _NOT_LAZY and (is_async_lazy(output) or is_lazy(output)):
        read = await _read(output, tool_name, limits, threads, on_abandoned)
        output, truncated, notes = read.items, read.truncated, (read.note,)
    weight = weigh(output)
    if weight == "small":
        return BoundedOutput(output, truncated, notes) if notes else output
    convert = partial(_convert, output, limits.max_chars, tool_name, notes)
    if weight == "lazy":  # nested iterators: read in a tool thread, within the time left
        bounded: BoundedOutput = await threads.run(
            tool_name, convert, _time_left(limits) + _READ_SLACK_S, on_abandoned
        )
    elif has_running_loop():
        bounded = await asyncio.to_thread(convert)
    else:  # a sync run: this thread is the worker
        bounded = convert()
    whole = None if truncated else bounded.whole  # an iterator read in part has no whole
    return BoundedOutput(bounded.value, truncated or bounded.truncated, bounded.notes, whole)


async def _read(
    output: Any,
    tool_name: str,
    limits: ReadLimits,
    threads: ToolThreads,
    on_abandoned: OnAbandoned | None,
) -> ReadItems:
    if is_async_lazy(output):
        reading = read_items(output, limits)
        return await reading if has_running_loop() else threads.run_coroutine(reading)
    read: ReadItems = await threads.run(
        tool_name,
        lambda: run_without_loop(read_items(output, limits)),
        _time_left(limits) + _READ_SLACK_S,
        on_abandoned,
    )
    return read


def _time_left(limits: ReadLimits) -> float:
    if limits.deadline is None:
        return 3600.0
    return max(limits.deadline - time.monotonic(), 0.0)
