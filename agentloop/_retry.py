"""Tenacity retries that cost nothing on the happy path, written once for both drivers.

The first attempt runs directly; only when it fails with a retryable error is a tenacity
retrier built, and the failure is replayed to it as its first attempt, so its wait
schedule, attempt numbers and callbacks are exactly those of an ordinary retrier. The
retrier is stepped as tenacity's own `Retrying.__call__` steps it (`iter`: attempt,
sleep or stop), with each wait yielded as a `sleep` effect, so `drive` sleeps with
`time.sleep` and `adrive` with `asyncio.sleep`.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import NoReturn, TypeVar

from tenacity import DoAttempt, DoSleep, RetryCallState, Retrying

from agentloop._effects import Core, Effect, adrive, sleep

__all__ = ["retry_awaitable_after", "retry_awaitable_lazily", "retry_lazily"]

T = TypeVar("T")


def retry_lazily(
    attempt: Callable[[], Core[T]],
    retrying: Callable[[], Retrying],
    retryable: Callable[[BaseException], bool],
) -> Core[T]:
    """Run the core `attempt()`, retrying with `retrying()` once a retryable error happened."""
    try:
        return (yield from attempt())
    except Exception as error:
        if not retryable(error):
            raise
        failed: BaseException = error
    return (yield from _retry_after(failed, attempt, retrying))


def _retry_after(
    failed: BaseException, attempt: Callable[[], Core[T]], retrying: Callable[[], Retrying]
) -> Core[T]:
    """Go on from a first attempt that failed with `failed`, as `retrying()` says."""
    retrier = retrying()
    retrier.begin()
    state = RetryCallState(retrier, fn=None, args=(), kwargs={})
    first: BaseException | None = failed
    while True:
        action = retrier.iter(state)
        if isinstance(action, DoSleep):
            state.prepare_for_next_attempt()
            yield from sleep(float(action))
        elif not isinstance(action, DoAttempt):
            return action  # type: ignore[no-any-return]
        elif first is not None:  # the first attempt, already made
            state.set_exception((type(first), first, first.__traceback__))
            first = None
        else:
            try:
                result = yield from attempt()
            except BaseException:  # as tenacity does; its `retry` decides
                state.set_exception(sys.exc_info())  # type: ignore[arg-type]
            else:
                state.set_result(result)


def _awaited_only() -> NoReturn:
    msg = "this attempt exists only as a coroutine: drive it with adrive"
    raise RuntimeError(msg)


async def retry_awaitable_lazily(
    attempt: Callable[[], Awaitable[T]],
    retrying: Callable[[], Retrying],
    retryable: Callable[[BaseException], bool],
) -> T:
    """`retry_lazily` of an attempt that exists only as a coroutine.

    The first attempt is awaited directly: no core is driven unless it fails.
    """
    try:
        return await attempt()
    except Exception as error:
        if not retryable(error):
            raise
        failed: BaseException = error
    return await retry_awaitable_after(failed, attempt, retrying)


async def retry_awaitable_after(
    failed: BaseException,
    attempt: Callable[[], Awaitable[T]],
    retrying: Callable[[], Retrying],
) -> T:
    """Retry a coroutine attempt whose first try failed with the retryable `failed`.

    For a caller that made the first attempt itself (no frame of ours around it on the
    path that succeeds); `retrying()` then sees `failed` as its first attempt.
    """
    awaited = Effect(_awaited_only, attempt)
    return await adrive(_retry_after(failed, awaited.__iter__, retrying))
