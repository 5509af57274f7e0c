"""The run's work in flight: what a node starts for a later node of the same run.

This is the one seam through which work passes between nodes outside the graph state:
a tool call streaming dispatch starts while the plan streams, and an answer started
speculatively alongside a plan call. Its contract:

- **Owner and lifetime.** One `InFlight` per compiled loop (`LoopParts.inflight`),
  holding work by run id, in this process's memory, for the time between the node
  that starts the work and the node that adopts it (one step of the graph).
- **Who writes, who clears.** The plan node adds an early call (`add_call`: its
  command, the call exactly as `agentloop.nodes.preparation` prepared it, and its
  running handle) and settles them all when the plan is rejected (`withdraw_calls`).
  `execute` adopts the prepared call of each command that is the same command
  (`started_calls`) and cancels the rest (`cancel_calls`); each `call_tool` task takes
  its own (`take_call`, checked by `call_key`). The plan node sets a speculative answer
  and the `answer` node takes it, or the next plan call replaces it. Work nobody
  adopted (a run that died between two nodes) is dropped after `STALE_AFTER_S`.
- **Replay, fork, another worker.** A checkpoint never holds this work: a run resumed
  from a checkpoint, replayed, forked, or picked up by another process finds nothing
  here, so each call takes its ordinary route through `call_tool` and the side-effect
  ledger decides whether it runs, is replayed, or is `unknown_outcome` (an early call
  went through the same ledger guard, so its outcome is recorded like any other).
  Only read-only, idempotent calls start early, so losing one costs time, not effects.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from agentloop._effects import Effect
from agentloop.state import PreparedCall, ToolCommand

__all__ = ["EarlyCall", "InFlight", "Startable"]

STALE_AFTER_S = 900.0
"""Work nobody adopted or cancelled (a run that died between two nodes) is dropped after
this long."""


class Startable(Protocol):
    """Work that can be cancelled (an early call's handle, a speculative answer)."""

    def cancel(self) -> Any:
        """Stop the work; its result will not be used."""


@dataclass
class EarlyCall:
    """A tool call started while its plan was streaming.

    Attributes:
        command: The command as the plan wrote it (execute adopts the call only for the
            same command at the same position).
        call: The call as it was prepared (`agentloop.nodes.preparation`): execute
            adopts it as is; its `call_key` is checked when `call_tool` takes it.
        handle: The running call: an `asyncio.Task` (under `ainvoke`) or a
            `concurrent.futures.Future` (under `invoke`) of its record.
    """

    command: ToolCommand
    call: PreparedCall
    handle: asyncio.Task[Any] | concurrent.futures.Future[Any]

    def cancel(self) -> None:
        """Cancel the call (its result will not be used)."""
        self.handle.cancel()

    def finished(self) -> Any | None:
        """The call's record if it already finished without error, else None."""
        handle = self.handle
        if not handle.done() or handle.cancelled() or handle.exception() is not None:
            return None
        return handle.result()

    def record(self) -> Effect[Any]:
        """Wait for the call's record: its future under `invoke`, its task under `ainvoke`."""
        handle = self.handle
        if isinstance(handle, asyncio.Task):
            return Effect(_awaited_only, lambda: handle)
        return Effect(handle.result, lambda: asyncio.wrap_future(handle))


def _awaited_only() -> Any:
    msg = "a call started under ainvoke cannot be awaited synchronously"
    raise RuntimeError(msg)


@dataclass
class _RunWork:
    calls: dict[str, EarlyCall] = field(default_factory=dict)
    answer: Startable | None = None
    touched: float = field(default_factory=time.monotonic)


class InFlight:
    """The work started ahead of its node, by run (thread-safe)."""

    def __init__(self, stale_after_s: float = STALE_AFTER_S) -> None:
        self._runs: dict[str, _RunWork] = {}
        self._lock = threading.Lock()
        self._stale_after_s = stale_after_s

    def _work(self, run_id: str) -> _RunWork:
        work = self._runs.get(run_id)
        if work is None:
            work = self._runs[run_id] = _RunWork()
        work.touched = time.monotonic()
        return work

    def _drop_stale(self) -> list[Startable]:
        cutoff = time.monotonic() - self._stale_after_s
        stale = [run_id for run_id, work in self._runs.items() if work.touched < cutoff]
        dropped: list[Startable] = []
        for run_id in stale:
            work = self._runs.pop(run_id)
            dropped.extend(work.calls.values())
            if work.answer is not None:
                dropped.append(work.answer)
        return dropped

    def add_call(self, early: EarlyCall) -> None:
        """Hold an early call until `call_tool` adopts it or it is cancelled."""
        call = early.call
        with self._lock:
            dropped = self._drop_stale()
            self._work(call["run_id"]).calls[call["call_id"]] = early
        _cancel_all(dropped)

    def started_calls(self, run_id: str) -> dict[str, EarlyCall]:
        """The run's early calls, by call id (they stay held: `call_tool` takes them)."""
        with self._lock:
            work = self._runs.get(run_id)
            return dict(work.calls) if work is not None else {}

    def take_call(self, run_id: str, call_id: str, call_key: str) -> EarlyCall | None:
        """Adopt the early call of `call_id`, when it is the same call (same identity)."""
        with self._lock:
            work = self._runs.get(run_id)
            early = work.calls.pop(call_id, None) if work is not None else None
            self._forget_if_empty(run_id)
        if early is None:
            return None
        if early.call["call_key"] != call_key:
            early.cancel()
            return None
        return early

    def cancel_calls(self, run_id: str, keep: Callable[[str], bool] = lambda _: False) -> int:
        """Cancel the run's early calls that will not be adopted; return how many."""
        with self._lock:
            work = self._runs.get(run_id)
            if work is None:
                return 0
            dropped = [call_id for call_id in work.calls if not keep(call_id)]
            cancelled = [work.calls.pop(call_id) for call_id in dropped]
            self._forget_if_empty(run_id)
        _cancel_all(cancelled)
        return len(cancelled)

    def withdraw_calls(self, run_id: str) -> dict[str, EarlyCall]:
        """Take every early call of the run back, by call id (the caller settles them)."""
        with self._lock:
            work = self._runs.get(run_id)
            if work is None:
                return {}
            calls, work.calls = work.calls, {}
            self._forget_if_empty(run_id)
        return calls

    def set_answer(self, run_id: str, answer: Startable) -> None:
        """Hold a speculative answer until the `answer` node adopts it or it is cancelled."""
        with self._lock:
            dropped = self._drop_stale()
            work = self._work(run_id)
            if work.answer is not None:
                dropped.append(work.answer)
            work.answer = answer
        _cancel_all(dropped)

    def take_answer(self, run_id: str) -> Startable | None:
        """Take the run's speculative answer (the caller adopts or cancels it)."""
        with self._lock:
            work = self._runs.get(run_id)
            answer = None
            if work is not None:
                answer, work.answer = work.answer, None
            self._forget_if_empty(run_id)
        return answer

    def _forget_if_empty(self, run_id: str) -> None:
        work = self._runs.get(run_id)
        if work is not None and not work.calls and work.answer is None:
            del self._runs[run_id]

    def __len__(self) -> int:
        """Runs with work in flight."""
        with self._lock:
            return len(self._runs)


def _cancel_all(work: list[Any]) -> None:
    for item in work:
        item.cancel()
