"""Tenacity retries that cost nothing on the happy path.

The first attempt runs directly; only when it fails with a retryable error is a tenacity
retrier built, and the failure is replayed to it as its first attempt, so its wait
schedule, attempt numbers and callbacks are exactly those of an ordinary retrier.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from tenacity import AsyncRetrying, Retrying

__all__ = ["aretry_lazily", "retry_lazily"]

T = TypeVar("T")


def retry_lazily(
    attempt: Callable[[], T],
    retrying: Callable[[], Retrying],
    retryable: Callable[[BaseException], bool],
) -> T:
    """Run `attempt`, retrying with `retrying()` once a retryable error happened."""
    try:
        return attempt()
    except Exception as error:
        if not retryable(error):
            raise
        first: BaseException = error
    replayed = False

    def again() -> T:
        nonlocal replayed
        if not replayed:
            replayed = True
            raise first
        return attempt()

    return retrying()(again)


async def aretry_lazily(
    attempt: Callable[[], Awaitable[T]],
    retrying: Callable[[], AsyncRetrying],
    retryable: Callable[[BaseException], bool],
) -> T:
    """Async `retry_lazily`."""
    try:
        return await attempt()
    except Exception as error:
        if not retryable(error):
            raise
        first: BaseException = error
    replayed = False

    async def again() -> T:
        nonlocal replayed
        if not replayed:
            replayed = True
            raise first
        return await attempt()

    result: T = await retrying()(again)
    return result
