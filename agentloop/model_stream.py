"""Bounded model streams: a first-token timeout, a time limit per call, an output size cap.

A model that never answers, or answers forever, must not hang a run. Every plan and
answer is read as a stream through `BoundedRead`: no first chunk within
`first_token_timeout_s` or no end within `timeout_s` raises `ModelCallTimeout` (a
`TimeoutError`, so model retries apply); more than `max_chars` of output stops reading
and marks the read as cut. Sync streams are pumped by a daemon thread, so even a model
blocked inside its own code is abandoned on time.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import queue
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any, Generic, TypeVar

from langchain_core.runnables import Runnable

from agentloop._effects import Effect
from agentloop.errors import ConfigurationError, ModelCallTimeout

__all__ = ["BoundedRead", "ModelLimits"]

C = TypeVar("C")


@dataclass(frozen=True)
class ModelLimits:
    """Bounds of every model call of a loop.

    Attributes:
        first_token_timeout_s: Longest wait for the first streamed chunk.
        timeout_s: Longest a whole call (one attempt) may take.
        max_plan_chars: Most characters of one plan reply; a longer plan is cut and
            treated as a plan error.
        max_answer_chars: Most characters of one answer; a longer answer is cut, and the
            run's status says so.
    """

    first_token_timeout_s: float = 120.0
    timeout_s: float = 600.0
    max_plan_chars: int = 32_000
    max_answer_chars: int = 100_000

    def __post_init__(self) -> None:
        """Reject limits that cannot work."""
        for name in ("first_token_timeout_s", "timeout_s", "max_plan_chars", "max_answer_chars"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or value <= 0:
                msg = f"ModelLimits.{name} must be a positive number, got {value!r}"
                raise ConfigurationError(msg)


class BoundedRead(Generic[C]):
    """Reads one streamed model reply within its limits.

    Args:
        what: What is read ("plan", "answer"), for messages.
        limits: The loop's model limits.
        max_chars: The output size cap of this read.
        size_of: Characters a chunk adds to the output.
    """

    def __init__(
        self, what: str, limits: ModelLimits, max_chars: int, size_of: Callable[[C], int]
    ) -> None:
        self.what = what
        self.limits = limits
        self.max_chars = max_chars
        self.size_of = size_of
        self.chars = 0
        self.cut = ""
        """Why reading stopped early ("" when the reply ended by itself)."""

    def _take(self, chunk: C) -> bool:
        """Count a chunk; return True when the output cap is reached."""
        self.chars += self.size_of(chunk)
        if self.chars >= self.max_chars:
            self.cut = f"the {self.what} exceeded {self.max_chars} characters"
            return True
        return False

    def _timeout(self, first: bool) -> ModelCallTimeout:
        if first:
            msg = f"no {self.what} output within {self.limits.first_token_timeout_s:g}s"
        else:
            msg = f"the {self.what} took longer than {self.limits.timeout_s:g}s"
        return ModelCallTimeout(msg)

    def consume(
        self, runnable: Runnable[Any, Any], request: Any, on_chunk: Callable[[C], object]
    ) -> Effect[None]:
        """Stream `runnable` on `request` within the limits, handing each chunk to `on_chunk`.

        Reading stops when the reply ends, at the output cap, or once `on_chunk` returns a
        true value (the stream is then closed).
        """

        def run() -> None:
            chunks = self.iterate(partial(runnable.stream, request))
            try:
                for chunk in chunks:
                    if on_chunk(chunk):
                        break
            finally:
                chunks.close()

        async def arun() -> None:
            chunks = self.aiterate(runnable.astream(request))
            try:
                async for chunk in chunks:
                    if on_chunk(chunk):
                        break
            finally:
                await chunks.aclose()

        return Effect(run, arun)

    async def aiterate(self, stream: AsyncIterator[C]) -> AsyncGenerator[C, None]:
        """Yield the chunks of an async stream within the limits (closing it at the end)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.limits.timeout_s
        first = True
        try:
            async with asyncio.timeout_at(
                min(loop.time() + self.limits.first_token_timeout_s, deadline)
            ) as window:
                async for chunk in stream:
                    if first:
                        first = False
                        window.reschedule(deadline)
                    stop = self._take(chunk)
                    yield chunk
                    if stop:
                        return
        except TimeoutError as error:
            raise self._timeout(first) from error
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()

    def iterate(self, open_stream: Callable[[], Iterator[C]]) -> Generator[C, None, None]:
        """Yield the chunks of a sync stream within the limits.

        The stream is opened and read by a daemon thread, which stops at its next chunk
        once the reader has what it needs and is abandoned if the model hangs.
        """
        pump = _Pump(open_stream)
        started = time.monotonic()
        first = True
        try:
            while True:
                elapsed = time.monotonic() - started
                wait = self.limits.timeout_s - elapsed
                if first:
                    wait = min(wait, self.limits.first_token_timeout_s - elapsed)
                kind, item = pump.next(max(wait, 0.0))
                if kind == "timeout":
                    raise self._timeout(first)
                if kind == "end":
                    return
                if kind == "error":
                    raise item
                first = False
                stop = self._take(item)
                yield item
                if stop:
                    return
        finally:
            pump.stop()


class _Pump(Generic[C]):
    """A daemon thread reading a sync stream into a small queue.

    The queue holds at most one chunk ahead of the reader, so a reader that stops early
    (a plan that says `response`) stops the stream within a chunk or two.
    """

    def __init__(self, open_stream: Callable[[], Iterator[C]]) -> None:
        self._queue: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=1)
        self._stopped = threading.Event()
        context = contextvars.copy_context()
        thread = threading.Thread(
            target=context.run, args=(self._run, open_stream), name="agentloop-model", daemon=True
        )
        thread.start()

    def _run(self, open_stream: Callable[[], Iterator[C]]) -> None:
        stream: Iterator[C] | None = None
        try:
            stream = open_stream()
            for chunk in stream:
                if not self._put(("chunk", chunk)):
                    break
            self._put(("end", None))
        except BaseException as error:
            self._put(("error", error))
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                with contextlib.suppress(Exception):  # a stream that fails to close is done
                    close()

    def _put(self, item: tuple[str, Any]) -> bool:
        """Hand an item to the reader; False once the reader stopped."""
        while not self._stopped.is_set():
            try:
                self._queue.put(item, timeout=0.05)
            except queue.Full:
                continue
            return True
        return False

    def next(self, timeout_s: float) -> tuple[str, Any]:
        try:
            return self._queue.get(timeout=timeout_s)
        except queue.Empty:
            return "timeout", None

    def stop(self) -> None:
        self._stopped.set()
