"""One core, two drivers: what `drive` and `adrive` promise the cores they run."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_fixed,
)

from agentloop._effects import (
    END,
    Core,
    Effect,
    adrive,
    close_iterator,
    drive,
    is_async,
    next_item,
    sleep,
)
from agentloop._retry import retry_awaitable_lazily, retry_lazily


async def run(core: Core[Any], driver: str) -> Any:
    return drive(core) if driver == "sync" else await adrive(core)


def failing(error: Exception) -> Effect[None]:
    async def arun() -> None:
        raise error

    def run() -> None:
        raise error

    return Effect(run, arun)


@pytest.mark.parametrize("driver", ["sync", "async"])
async def test_an_effects_error_is_raised_in_the_core_which_may_go_on(driver: str) -> None:
    def core() -> Core[list[str]]:
        seen = []
        try:
            yield from failing(ValueError("boom"))
        except ValueError as error:
            seen.append(str(error))
        seen.append("async" if (yield from is_async) else "sync")
        yield from sleep(0)
        return seen

    assert await run(core(), driver) == ["boom", driver]


@pytest.mark.parametrize("driver", ["sync", "async"])
async def test_an_error_the_core_does_not_catch_reaches_the_caller(driver: str) -> None:
    cleaned: list[bool] = []

    def core() -> Core[None]:
        try:
            yield from failing(KeyError("lost"))
        finally:
            cleaned.append(True)

    with pytest.raises(KeyError, match="lost"):
        await run(core(), driver)
    assert cleaned == [True]


def test_the_sync_driver_runs_effects_in_the_callers_thread_without_an_event_loop() -> None:
    where: list[tuple[int, bool]] = []

    def probe() -> None:
        try:
            asyncio.get_running_loop()
            where.append((threading.get_ident(), True))
        except RuntimeError:
            where.append((threading.get_ident(), False))

    async def unused() -> None:
        raise AssertionError

    def core() -> Core[None]:
        yield from Effect(probe, unused)

    drive(core())
    assert where == [(threading.get_ident(), False)]


async def test_cancelling_the_async_driver_cancels_the_effect_and_unwinds_the_core() -> None:
    steps: list[str] = []

    def core() -> Core[None]:
        try:
            steps.append("waiting")
            yield from sleep(30)
            steps.append("woke")
        finally:
            steps.append("cleaned up")

    task = asyncio.get_running_loop().create_task(adrive(core()))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert steps == ["waiting", "cleaned up"]


class Flaky(Exception):
    """A retryable failure."""


def retrier(sleeps: list[tuple[int, float]]) -> Callable[[], Retrying]:
    def before_sleep(state: RetryCallState) -> None:
        sleeps.append((state.attempt_number, state.upcoming_sleep))

    return lambda: Retrying(
        stop=stop_after_attempt(4),
        wait=wait_fixed(0.01),
        retry=retry_if_exception_type(Flaky),
        before_sleep=before_sleep,
        reraise=True,
    )


@pytest.mark.parametrize("driver", ["sync", "async"])
async def test_a_core_reads_the_iterator_its_driver_reads_and_closes_it(driver: str) -> None:
    closed: list[str] = []

    def numbers() -> Any:
        try:
            yield from (1, 2, 3)
        finally:
            closed.append("sync")

    async def anumbers() -> Any:
        try:
            for number in (1, 2, 3):
                yield number
        finally:
            closed.append("async")

    def first_two() -> Core[list[int]]:
        items = anumbers() if (yield from is_async) else numbers()
        seen: list[int] = []
        try:
            while (item := (yield from next_item(items))) is not END and len(seen) < 2:
                seen.append(item)
        finally:
            yield from close_iterator(items)
        return seen

    assert await run(first_two(), driver) == [1, 2]
    assert closed == [driver]


@pytest.mark.parametrize("driver", ["sync", "async"])
async def test_a_blocking_effect_runs_the_same_call_under_both_drivers(driver: str) -> None:
    threads: list[int] = []

    def step() -> int:
        threads.append(threading.get_ident())
        return 7

    def core() -> Core[int]:
        return (yield from Effect.blocking(step))

    assert await run(core(), driver) == 7
    assert threads == [threading.get_ident()]  # inline: no thread hop under either driver


@pytest.mark.parametrize("driver", ["sync", "async"])
async def test_retry_lazily_replays_the_first_failure_to_tenacity(driver: str) -> None:
    calls: list[int] = []
    sleeps: list[tuple[int, float]] = []

    def attempt() -> Core[str]:
        calls.append(len(calls) + 1)
        yield from sleep(0)
        if len(calls) < 3:
            raise Flaky
        return f"ok after {len(calls)}"

    core = retry_lazily(attempt, retrier(sleeps), lambda error: isinstance(error, Flaky))
    assert await run(core, driver) == "ok after 3"
    assert calls == [1, 2, 3]  # the first attempt is not made twice
    assert sleeps == [(1, 0.01), (2, 0.01)]  # tenacity's schedule and attempt numbers


@pytest.mark.parametrize("driver", ["sync", "async"])
async def test_retry_lazily_builds_no_retrier_on_success_and_reraises_the_last_error(
    driver: str,
) -> None:
    built: list[bool] = []

    def make() -> Retrying:
        built.append(True)
        return retrier([])()

    def works() -> Core[int]:
        yield from sleep(0)
        return 1

    def never() -> Core[int]:
        yield from sleep(0)
        raise Flaky("still down")

    assert await run(retry_lazily(works, make, lambda _: True), driver) == 1
    assert built == []
    with pytest.raises(Flaky, match="still down"):
        await run(retry_lazily(never, make, lambda error: isinstance(error, Flaky)), driver)
    assert built == [True]


async def test_retry_awaitable_lazily_retries_a_coroutine_attempt() -> None:
    calls: list[int] = []

    async def attempt() -> int:
        calls.append(1)
        if len(calls) == 1:
            raise Flaky
        return len(calls)

    assert (
        await retry_awaitable_lazily(attempt, retrier([]), lambda error: isinstance(error, Flaky))
        == 2
    )
