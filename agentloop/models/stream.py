"""Bounded model streams: a first-token timeout, a time limit per call, an output size cap.

A model that never answers, or answers forever, must not hang a run. Every plan and
answer is read as a stream through `BoundedRead`: no first chunk within
`first_token_timeout_s` or no end within `timeout_s` raises `ModelCallTimeout` (a
`TimeoutError`, so model retries apply); more than `max_chars` of output stops reading
and marks the read as cut. Sync streams are pumped by a thread of the loop's
`WorkerPool`, so even a model blocked inside its own code is abandoned on time (its
thread is given up by the pool).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import queue
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any, Generic, TypeVar

from langchain_core.runnables import Runnable

from agentloop.base.messages import as_stream_chunk
from agentloop.base.sync import WorkerPool, has_running_loop
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
        workers: The threads that read a sync stream (the loop's pool).
    """

    def __init__(
        self,
        what: str,
        limits: ModelLimits,
        max_chars: int,
        size_of: Callable[[C], int],
        *,
        workers: WorkerPool,
    ) -> None:
        self.what = what
        self.workers = workers
        self.limits = limits
        self.max_chars = max_chars
        self.size_of = size_of
        self.chars = 0
        self.cut = ""
        """Why reading stopped early ("" when the reply ended by itself)."""

    def _start(self, now: Callable[[], float]) -> _Deadline:
        self._deadline = _Deadline(self.what, self.limits, now)
        return self._deadline

    def _take(self, chunk: C) -> None:
        """Count a chunk (in time and size); mark the read as cut at the output cap."""
        self._deadline.arrived()
        self.chars += self.size_of(chunk)
        if self.chars >= self.max_chars:
            self.cut = f"the {self.what} exceeded {self.max_chars} characters"

    async def consume(
        self, runnable: Runnable[Any, Any], request: Any, on_chunk: Callable[[C], object]
    ) -> None:
        """Stream `runnable` on `request` within the limits, handing each chunk to `on_chunk`.

        Reading stops when the reply ends, at the output cap, or once `on_chunk` returns a
        true value (the stream is then closed). It reads `astream` on an event loop,
        `stream` without one (under `run_blocking`).
        """
        if not has_running_loop():
            chunks = self.iterate(partial(runnable.stream, request))
            try:
                for chunk in chunks:
                    if on_chunk(chunk):
                        break
            finally:
                chunks.close()
            return
        achunks = self.aiterate(runnable.astream(request))
        try:
            async for chunk in achunks:
                if on_chunk(chunk):
                    break
        finally:
            await achunks.aclose()

    async def aiterate(self, stream: AsyncIterator[C]) -> AsyncGenerator[C, None]:
        """Yield the chunks of an async stream within the limits (closing it at the end).

        A whole reply (a model that does not stream) comes as its one last chunk.
        """
        deadline = self._start(asyncio.get_running_loop().time)
        try:
            try:
                async with asyncio.timeout_at(deadline.at) as timeout:
                    deadline.on_move(timeout.reschedule)
                    async for item in stream:
                        chunk = as_stream_chunk(item)
                        self._take(chunk)
                        yield chunk
                        if self.cut:
                            return
            except TimeoutError as error:
                raise deadline.expired() from error
        finally:  # the stream is closed after its timer, when it can be closed
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()

    def iterate(self, open_stream: Callable[[], Iterator[C]]) -> Generator[C, None, None]:
        """Yield the chunks of a sync stream within the limits (read by a `_Pump` thread)."""
        pump, deadline = _Pump(open_stream, self.workers), self._start(time.monotonic)
        try:
            while not self.cut and (item := pump.next(deadline)) is not _End.END:
                chunk = as_stream_chunk(item)
                self._take(chunk)
                yield chunk
        finally:
            pump.stop()


class _End(enum.Enum):
    END = "end"
    """The stream ended."""


class _Deadline:
    """When a read gives up (`ModelCallTimeout`).

    No first chunk within `first_token_timeout_s`, or no end within `timeout_s`.
    """

    def __init__(self, what: str, limits: ModelLimits, now: Callable[[], float]) -> None:
        self.what, self.limits, self.now = what, limits, now
        started = now()
        self.end = started + limits.timeout_s
        self.at = min(started + limits.first_token_timeout_s, self.end)
        """When the read times out (the first chunk's deadline until it arrives)."""
        self.first = True
        self._moved: Callable[[float], None] | None = None

    def arrived(self) -> None:
        """Note a chunk: once the first arrived, only the end's deadline holds."""
        if self.first:
            self.first, self.at = False, self.end
            if self._moved is not None:
                self._moved(self.at)

    def left(self) -> float:
        """Seconds until the deadline."""
        return max(self.at - self.now(), 0.0)

    def expired(self) -> ModelCallTimeout:
        """The error of a read that reached its deadline."""
        if self.first:
            msg = f"no {self.what} output within {self.limits.first_token_timeout_s:g}s"
        else:
            msg = f"the {self.what} took longer than {self.limits.timeout_s:g}s"
        return ModelCallTimeout(msg)

    def on_move(self, move: Callable[[float], None]) -> None:
        """Have `move(at)` called when the deadline moves (the first chunk arrived)."""
        self._moved = move


class _Pump(Generic[C]):
    """A pool thread reading a sync stream into a small queue.

    The queue holds at most one chunk ahead of the reader, so a reader that stops early
    (a plan that says `response`) stops the stream within a chunk or two. At a timeout
    the thread is given up (`WorkerPool.abandon`): a model blocked in its own code
    starves no later call.
    """

    def __init__(self, open_stream: Callable[[], Iterator[C]], workers: WorkerPool) -> None:
        self._queue: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=1)
        self._stopped = threading.Event()
        self._workers = workers
        self._job = workers.submit(partial(self._run, open_stream))

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

    def next(self, deadline: _Deadline) -> C | _End:
        """The next chunk or the end; raises the stream's error, or a timeout at the deadline."""
        try:
            kind, item = self._queue.get(timeout=deadline.left())
        except queue.Empty:
            self._workers.abandon(self._job)
            raise deadline.expired() from None
        if kind == "error":
            raise item
        return _End.END if kind == "end" else item

    def stop(self) -> None:
        self._stopped.set()
