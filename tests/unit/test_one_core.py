"""One coroutine, two entry points: awaited under `ainvoke`, run blocking under `invoke`.

What `agentloop.base.sync.run_blocking` and `by_mode` promise the coroutines the loop writes
once for both (the nodes, the ledger, the model-call stack, the retries).
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_fixed,
)

from agentloop.base.retry import retry_lazily
from agentloop.base.sync import by_mode, has_running_loop, pause, run_blocking
from agentloop.governance.results import ReadLimits, read_items


async def run(coroutine: Coroutine[Any, Any, Any], mode: str) -> Any:
    """Await it, or run it blocking in a thread with no event loop (as `invoke` runs nodes)."""
    if mode == "sync":
        return await asyncio.to_thread(run_blocking, coroutine)
    return await coroutine


async def failing(error: Exception) -> None:
    async def awaited() -> None:
        raise error

    def blocking() -> None:
        raise error

    await by_mode(blocking, awaited)


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_steps_error_is_raised_in_the_coroutine_which_may_go_on(mode: str) -> None:
    async def work() -> list[str]:
        seen = []
        try:
            await failing(ValueError("boom"))
        except ValueError as error:
            seen.append(str(error))
        seen.append("async" if has_running_loop() else "sync")
        await pause(0)
        return seen

    assert await run(work(), mode) == ["boom", mode]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_an_error_the_coroutine_does_not_catch_reaches_the_caller(mode: str) -> None:
    cleaned: list[bool] = []

    async def work() -> None:
        try:
            await failing(KeyError("lost"))
        finally:
            cleaned.append(True)

    with pytest.raises(KeyError, match="lost"):
        await run(work(), mode)
    assert cleaned == [True]


def test_run_blocking_takes_each_step_in_the_callers_thread_without_an_event_loop() -> None:
    where: list[tuple[int, bool]] = []

    def probe() -> None:
        where.append((threading.get_ident(), has_running_loop()))

    async def unused() -> None:
        raise AssertionError

    run_blocking(by_mode(probe, unused))
    assert where == [(threading.get_ident(), False)]


MARKER: contextvars.ContextVar[str] = contextvars.ContextVar("MARKER", default="unset")


async def test_run_blocking_in_a_thread_that_runs_an_event_loop_blocks_in_a_helper_thread() -> None:
    """As in a notebook, whose cells run on an event loop: the steps still block."""
    where: list[bool] = []
    MARKER.set("carried")

    async def unused() -> str:
        raise AssertionError

    def probe() -> str:
        helper = threading.current_thread()
        # a daemon: an interrupted cell leaves nothing that holds up the interpreter's exit
        where.extend([has_running_loop(), helper is threading.main_thread(), helper.daemon])
        return MARKER.get()

    assert run_blocking(by_mode(probe, unused)) == "carried"  # context variables carried
    assert where == [False, False, True]


def test_a_coroutine_that_waits_for_an_event_loop_is_refused_clearly() -> None:
    loop = asyncio.new_event_loop()

    async def needs_a_loop() -> None:
        await loop.create_future()  # only a running event loop would resume it

    try:
        with pytest.raises(RuntimeError, match="waited for an event loop while run without one"):
            run_blocking(needs_a_loop())
    finally:
        loop.close()


async def test_cancelling_the_awaited_coroutine_cancels_its_step_and_unwinds_it() -> None:
    steps: list[str] = []

    async def work() -> None:
        try:
            steps.append("waiting")
            await pause(30)
            steps.append("woke")
        finally:
            steps.append("cleaned up")

    task = asyncio.get_running_loop().create_task(work())
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


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_read_items_reads_the_iterator_of_its_mode_and_closes_it(mode: str) -> None:
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

    limits = ReadLimits(max_items=2, max_chars=1000, deadline=None)
    source = numbers() if mode == "sync" else anumbers()
    read = await run(read_items(source, limits), mode)
    assert read.items == [1, 2]
    assert read.bound == "items"
    assert closed == [mode]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_blocking_step_runs_the_same_call_in_both_modes(mode: str) -> None:
    """A sync saver's ledger statement blocks in the caller's thread either way."""
    from agentloop.durability import LedgerKey, LedgerOp, SqliteLedger

    threads: list[int] = []

    class Counting(SqliteLedger):
        def execute(self, name: str, params: tuple[Any, ...]) -> tuple[int, Any]:
            threads.append(threading.get_ident())
            return 0, None

    ledger = Counting(saver=None)
    key = LedgerKey("thread", "ns", "call")

    async def located() -> tuple[int, Any]:
        return threading.get_ident(), await ledger.operation(LedgerOp("get", key))

    here, entry = await run(located(), mode)
    assert entry is None
    assert threads == [here]  # inline: no thread hop in either mode


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_retry_lazily_replays_the_first_failure_to_tenacity(mode: str) -> None:
    calls: list[int] = []
    sleeps: list[tuple[int, float]] = []

    async def attempt() -> str:
        calls.append(len(calls) + 1)
        await pause(0)
        if len(calls) < 3:
            raise Flaky
        return f"ok after {len(calls)}"

    work = retry_lazily(attempt, retrier(sleeps), lambda error: isinstance(error, Flaky))
    assert await run(work, mode) == "ok after 3"
    assert calls == [1, 2, 3]  # the first attempt is not made twice
    assert sleeps == [(1, 0.01), (2, 0.01)]  # tenacity's schedule and attempt numbers


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_retry_lazily_builds_no_retrier_on_success_and_reraises_the_last_error(
    mode: str,
) -> None:
    built: list[bool] = []

    def make() -> Retrying:
        built.append(True)
        return retrier([])()

    async def works() -> int:
        await pause(0)
        return 1

    async def never() -> int:
        await pause(0)
        raise Flaky("still down")

    assert await run(retry_lazily(works, make, lambda _: True), mode) == 1
    assert built == []
    with pytest.raises(Flaky, match="still down"):
        await run(retry_lazily(never, make, lambda error: isinstance(error, Flaky)), mode)
    assert built == [True]


async def test_retry_lazily_retries_a_coroutine_attempt() -> None:
    calls: list[int] = []

    async def attempt() -> int:
        calls.append(1)
        if len(calls) == 1:
            raise Flaky
        return len(calls)

    assert await retry_lazily(attempt, retrier([]), lambda error: isinstance(error, Flaky)) == 2
