"""Code written once for sync and async callers: steps that yield requests, and two drivers.

A behaviour that needs I/O (a ledger read, a pause, running a call) is written once, as
a generator: it yields a request and receives its result, or has its error thrown in.
`run_steps` performs the requests with a sync function and `arun_steps` awaits an async
one, so a sync and an async entry point differ only in how they perform requests. A
`Pause` is performed by the drivers themselves (`time.sleep` or `asyncio.sleep`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeVar, cast

__all__ = ["Pause", "Steps", "arun_steps", "run_steps"]

T = TypeVar("T")

Steps = Generator[Any, Any, T]
"""A behaviour as steps: yields requests, receives their results, returns its value."""

_Sent = tuple[Any, BaseException | None]


@dataclass(frozen=True)
class Pause:
    """A request to wait before the next step."""

    seconds: float


@dataclass(frozen=True)
class _Finished:
    value: Any


def _advance(steps: Steps[Any], sent: _Sent) -> Any:
    """Send the last result (or throw its error) in; the next request, or `_Finished`."""
    value, error = sent
    try:
        return steps.send(value) if error is None else steps.throw(error)
    except StopIteration as done:
        return _Finished(done.value)


def run_steps(steps: Steps[T], perform: Callable[[Any], Any]) -> T:
    """Run steps to their end, performing each request with `perform` (sync)."""
    sent: _Sent = (None, None)
    while not isinstance(request := _advance(steps, sent), _Finished):
        try:
            sent = (_sleep(request) if isinstance(request, Pause) else perform(request), None)
        except BaseException as error:
            sent = (None, error)
    return cast(T, request.value)


async def arun_steps(steps: Steps[T], perform: Callable[[Any], Awaitable[Any]]) -> T:
    """Run steps to their end, awaiting `perform` for each request."""
    sent: _Sent = (None, None)
    while not isinstance(request := _advance(steps, sent), _Finished):
        try:
            paused = isinstance(request, Pause)
            sent = (await (asyncio.sleep(request.seconds) if paused else perform(request)), None)
        except BaseException as error:
            sent = (None, error)
    return cast(T, request.value)


def _sleep(pause: Pause) -> Any:
    time.sleep(pause.seconds)
    return None
