"""Logic written once, run by `invoke` and `ainvoke`: generator cores and their two drivers.

A core is a generator that yields `Effect`s (stream this model, sleep before a retry,
read a ledger entry, run a tool call) and receives their results, or has their errors
raised at the `yield`. It does no I/O itself, so the same code serves both entry points:
`drive` performs each effect with blocking calls (no event loop), `adrive` awaits it on
the running loop. An effect carries both forms of its one step (`Effect.blocking` makes
one whose step is the same call either way: in-memory work, a sync database driver).

Cores write `result = yield from effect`, and `yield from other_core(...)` to run a
smaller core inside a larger one (the ledger guard inside a tool call, say), so only the
outermost caller picks a driver: a graph node (`agentloop.nodes._runnable.LoopNode`) or
a public sync/async method pair.

    def fetch_twice(key):                      # a core
        first = yield from ledger_get(key)     # an Effect[Entry]
        yield from sleep(0.1)
        return first, (yield from ledger_get(key))

    drive(fetch_twice(key))                    # from sync code
    await adrive(fetch_twice(key))             # from async code

Effects every core may use: `sleep`, `is_async` (which driver runs it), and
`next_item` / `close_iterator` (read a stream the core opened: the sync one under
`drive`, the async one under `adrive`).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from functools import partial
from typing import Any, Generic, TypeAlias, TypeVar

from agentloop._sync import pause

__all__ = [
    "END",
    "Core",
    "Effect",
    "adrive",
    "close_iterator",
    "drive",
    "is_async",
    "next_item",
    "sleep",
]

R = TypeVar("R")
T = TypeVar("T")

Core: TypeAlias = Generator["Effect[Any]", Any, T]
"""A generator that yields effects and returns a `T`."""


@dataclass(frozen=True, slots=True)
class Effect(Generic[R]):
    """One step a core needs done, in its blocking form and its awaitable form."""

    run: Callable[[], R]
    """Do it with blocking calls (under `invoke`)."""
    arun: Callable[[], Awaitable[R]]
    """Do it on the running event loop (under `ainvoke`)."""

    @classmethod
    def blocking(cls, step: Callable[[], R]) -> Effect[R]:
        """An effect whose step is the same blocking call under both drivers.

        For steps that never wait long (in memory, a local database driver): under
        `ainvoke` the call then runs inline on the event loop, as it did before.
        """

        async def inline() -> R:
            return step()

        return cls(step, inline)

    def __iter__(self) -> Generator[Effect[R], Any, R]:
        """Yield this effect and return its result (`result = yield from effect`)."""
        result: R = yield self
        return result


def drive(core: Core[T]) -> T:
    """Run a core to its end, performing each effect with blocking calls."""
    result: Any = None
    error: BaseException | None = None
    while True:
        try:
            effect = core.send(result) if error is None else core.throw(error)
        except StopIteration as stop:
            value: T = stop.value  # typed without `cast`, a call each time
            return value
        try:
            result, error = effect.run(), None
        except BaseException as failed:
            result, error = None, failed


async def adrive(core: Core[T]) -> T:
    """Run a core to its end, awaiting each effect on the running event loop."""
    result: Any = None
    error: BaseException | None = None
    while True:
        try:
            effect = core.send(result) if error is None else core.throw(error)
        except StopIteration as stop:
            value: T = stop.value  # typed without `cast`, a call each time
            return value
        if effect is is_async:  # answered here: no coroutine to await
            result, error = True, None
            continue
        try:
            result, error = await effect.arun(), None
        except BaseException as failed:
            result, error = None, failed


async def _true() -> bool:
    return True


is_async: Effect[bool] = Effect(lambda: False, _true)
"""Whether `adrive` runs the core (to open an async stream rather than a sync one, or to
start background work as a task rather than a thread)."""


END: Any = object()
"""What `next_item` returns once the iterator is exhausted."""


def next_item(iterator: Any) -> Effect[Any]:
    """The next item of an iterator (`END` after the last): `next` or `anext`.

    A core that reads a stream opens the sync one or the async one after asking
    `is_async`, so each driver only ever meets the kind of iterator its form reads.
    """
    return Effect(partial(next, iterator, END), partial(anext, iterator, END))


def close_iterator(iterator: Any) -> Effect[None]:
    """Close the iterator of `next_item`: its `close` or its awaited `aclose`."""
    return Effect(lambda: iterator.close(), lambda: iterator.aclose())


def sleep(seconds: float) -> Effect[None]:
    """Wait: `time.sleep` under `invoke`, `asyncio.sleep` under `ainvoke`.

    The awaitable form blocks instead when no event loop runs in the thread (a sync tool
    call's coroutine driven without a loop).
    """
    return Effect(lambda: time.sleep(seconds), lambda: pause(seconds))
