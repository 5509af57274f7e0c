"""Tenacity retries that cost nothing on the happy path, for sync and async callers alike.

The first attempt runs directly; only when it fails with a retryable error is a tenacity
retrier built, and the failure is replayed to it as its first attempt, so its wait
schedule, attempt numbers and callbacks are exactly those of an ordinary retrier. The
retrier is stepped as tenacity's own `Retrying.__call__` steps it (`iter`: attempt,
sleep or stop); each wait is a `pause`, so it sleeps with `asyncio.sleep` on an event
loop and with `time.sleep` under `run_blocking`.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import TypeVar

from tenacity import DoAttempt, DoSleep, RetryCallState, Retrying

from agentloop.base.sync import pause

__all__ = ["retry_after", "retry_lazily"]

T = TypeVar("T")


async def retry_lazily(
    attempt: Callable[[], Awaitable[T]],
    retrying: Callable[[], Retrying],
    retryable: Callable[[BaseException], bool],
) -> T:
    """Await `attempt()`, retrying with `retrying()` once a retryable error happened."""
    try:
        return await attempt()
    except Exception as error:
        if not retryable(error):
            raise
        failed: BaseException = error
    return await retry_after(failed, attempt, retrying)


async def retry_after(
    failed: BaseException,
    attempt: Callable[[], Awaitable[T]],
    retrying: Callable[[], Retrying],
) -> T:
    """Go on from a first attempt that failed with the retryable `failed`, as `retrying()` says.

    For a caller that made the first attempt itself (no frame of ours around it on the
    path that succeeds); `retrying()` then sees `failed` as its first attempt.
    """
    retrier = retrying()
    retrier.begin()
    state = RetryCallState(retrier, fn=None, args=(), kwargs={})
    first: BaseException | None = failed
    while True:
        action = retrier.iter(state)
        if isinstance(action, DoSleep):
            state.prepare_for_next_attempt()
            await pause(float(action))
        elif not isinstance(action, DoAttempt):
            return action  # type: ignore[no-any-return]
        elif first is not None:  # the first attempt, already made
            state.set_exception((type(first), first, first.__traceback__))
            first = None
        else:
            try:
                result = await attempt()
            except BaseException:  # as tenacity does; its `retry` decides
                state.set_exception(sys.exc_info())  # type: ignore[arg-type]
            else:
                state.set_result(result)
