"""The child processes a timed-out call started, and ending them (Linux, through /proc).

Linux lists the children of each thread apart (`/proc/self/task/<tid>/children`): the
processes a thread started with `fork`, `vfork`, `posix_spawn` or `subprocess`, for as
long as that thread lives. A sync tool runs on a pool thread that runs one call at a
time, so its children are those the thread started while the call ran (`ChildWindow`,
alone on its thread). An async tool runs on the event loop's thread, beside other
calls: its children are those the loop's thread started while the call ran
(`ChildWindow`): a child it started while another call ran on the same thread cannot
be told apart from that call's, and is left running.

A process is ended with its descendants: SIGTERM to all of them, then SIGKILL to those
still alive after a grace. Each is held by a pidfd, opened while it is still known to
be the child of the expected parent, so a recycled process id is never signalled.

Elsewhere (no /proc, no pidfd) nothing is found and nothing is ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import select
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import ClassVar

from agentloop._sync import has_running_loop, pause

__all__ = [
    "DEFAULT_TERMINATE_GRACE_S",
    "ChildWindow",
    "EndedProcesses",
    "end_processes",
    "thread_children",
]

DEFAULT_TERMINATE_GRACE_S = 0.5
"""How long an ended process may take to exit after SIGTERM before it gets SIGKILL."""


def thread_children(tid: int) -> set[int]:
    """The live children a thread of this process started (empty where /proc cannot tell)."""
    return _read_children(f"/proc/self/task/{tid}/children")


def _read_children(path: str) -> set[int]:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return set()
    try:
        return {int(pid) for pid in os.read(fd, 1 << 20).split()}
    except OSError:
        return set()
    finally:
        os.close(fd)


def _children(pid: int) -> set[int]:
    """The children of every thread of process `pid`."""
    found: set[int] = set()
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        found |= _read_children(f"/proc/{pid}/task/{task}/children")
    return found


def _parent_and_name(pid: int) -> tuple[int, str] | None:
    """A process's parent id and command name, or None when it is gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    name, rest = stat[stat.find("(") + 1 : stat.rfind(")")], stat[stat.rfind(")") + 2 :]
    state, parent = rest.split()[:2]
    return None if state in ("Z", "X") else (int(parent), name)


@dataclass
class _Held:
    """A process held by its pidfd."""

    pid: int
    name: str
    fd: int


def _hold(roots: Iterable[int], parent: int) -> Iterator[_Held]:
    """Open a pidfd on each root and, recursively, on its descendants.

    A pidfd is kept only if the process is still the child of the expected parent once
    it is open: the id was not recycled in between.
    """
    pending = [(pid, parent) for pid in roots]
    seen: set[int] = set()
    while pending:
        pid, expected = pending.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            fd = os.pidfd_open(pid)
        except (OSError, AttributeError):
            continue
        known = _parent_and_name(pid)
        if known is None or known[0] != expected:
            os.close(fd)
            continue
        yield _Held(pid, known[1], fd)
        pending.extend((child, pid) for child in _children(pid))


def _signal(held: _Held, signum: int) -> None:
    with contextlib.suppress(OSError):
        signal.pidfd_send_signal(held.fd, signum)


def _exited(held: _Held) -> bool:
    """Tell whether a held process has exited (a pidfd is readable once it has)."""
    readable, _, _ = select.select([held.fd], [], [], 0)
    return bool(readable)


@dataclass(frozen=True)
class EndedProcesses:
    """What `end_processes` did."""

    terminated: tuple[str, ...] = ()
    """`name (pid)` of each process ended by SIGTERM."""
    killed: tuple[str, ...] = ()
    """`name (pid)` of each process that ignored SIGTERM and got SIGKILL."""

    def __bool__(self) -> bool:
        return bool(self.terminated or self.killed)

    def describe(self) -> str:
        """Say what was ended, for a record's error ("" when nothing was)."""
        parts = []
        if self.terminated:
            parts.append(f"ended {', '.join(self.terminated)} (SIGTERM)")
        if self.killed:
            parts.append(f"killed {', '.join(self.killed)} (SIGKILL)")
        return f"the child processes it started were ended: {'; '.join(parts)}" if parts else ""


async def end_processes(
    pids: Iterable[int], *, parent: int | None = None, grace_s: float = DEFAULT_TERMINATE_GRACE_S
) -> EndedProcesses:
    """End processes and their descendants: SIGTERM, then SIGKILL after `grace_s`.

    Waits at most `grace_s` (only while a process ignores SIGTERM), on the event loop
    when one runs in this thread, else by blocking it. The processes are not reaped
    (their parent does that, or init once it has exited).

    Args:
        pids: Children of `parent`.
        parent: Their parent process (default: this one).
        grace_s: How long they may take to exit after SIGTERM.
    """
    roots, parent_pid = list(pids), os.getpid() if parent is None else parent
    if not roots:
        return EndedProcesses()
    if has_running_loop():  # /proc is read in a worker thread, never on the event loop
        held = await asyncio.to_thread(lambda: list(_hold(roots, parent_pid)))
    else:
        held = list(_hold(roots, parent_pid))
    if not held:
        return EndedProcesses()
    alive: list[_Held] = []
    try:
        for process in held:
            _signal(process, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        alive = [process for process in held if not _exited(process)]
        while alive and time.monotonic() < deadline:
            await pause(0.01)
            alive = [process for process in alive if not _exited(process)]
        for process in alive:
            _signal(process, signal.SIGKILL)
    finally:
        for process in held:
            os.close(process.fd)
    killed = {process.pid for process in alive}
    return EndedProcesses(
        terminated=tuple(f"{p.name} ({p.pid})" for p in held if p.pid not in killed),
        killed=tuple(f"{p.name} ({p.pid})" for p in alive),
    )


def _boot_clock() -> Callable[[], float]:
    """The clock of a process's start time in /proc: seconds since boot, read by one call."""
    try:
        boot = time.CLOCK_BOOTTIME
        time.clock_gettime(boot)
    except (AttributeError, OSError):  # not Linux: nothing is found in /proc anyway
        return time.monotonic
    return partial(time.clock_gettime, boot)


_clock = _boot_clock()
"""Seconds since boot (chosen once: each window reads it twice, on every call's path)."""


_TICK_S = 1 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01
"""The resolution of a process's start time in /proc (10 ms on Linux)."""


def _started_at(pid: int) -> float | None:
    """When a process started, in seconds since boot (None when it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rfind(")") + 2 :].split()[19]) * _TICK_S


_STILL_OPEN = math.inf
"""The end of a window that is still open (read as now)."""


class ChildWindow:
    """The children a thread starts while a call runs on it (beside other async calls).

    Every call running on a thread is a window: a child the thread started while only
    one window was open is that call's; one started while several were open could be
    any of theirs (ambiguous). Windows are kept by thread, across every loop of the
    process, for as long as their call runs.

    A window keeps the spans of the windows beside it, not the windows: a server whose
    event loop always has calls in flight would otherwise keep every window it ever
    opened alive, each holding the next.

    Args:
        tid: The thread (its native id).
    """

    _lock = threading.Lock()
    _open: ClassVar[dict[int, set[ChildWindow]]] = {}

    def __init__(self, tid: int) -> None:
        self.tid = tid
        self.opened = _clock()
        """When the call started: a child older than this is not its (nothing is read from
        /proc here, on every call's path: only `started`, at a timeout, reads it)."""
        self._span = [self.opened, _STILL_OPEN]
        """When it was open, `[opened, closed]`: the one cell of this window the windows
        beside it hold (its end is `_STILL_OPEN` until it closes)."""
        self._beside: list[list[float]] = []
        """The spans of the windows open at some time while this one was."""

    @classmethod
    def open(cls, tid: int) -> ChildWindow:
        """Start a call's window on a thread (the thread's children now are not its)."""
        window = cls(tid)
        with cls._lock:
            running = cls._open.setdefault(tid, set())
            for other in running:
                other._beside.append(window._span)
                window._beside.append(other._span)
            running.add(window)
        return window

    def close(self) -> None:
        """End the window (the call ended or timed out)."""
        with self._lock:
            if self._span[1] != _STILL_OPEN:
                return
            self._span[1] = _clock()
            running = self._open.get(self.tid, set())
            running.discard(self)
            if not running:
                self._open.pop(self.tid, None)

    def started(self) -> tuple[set[int], set[int]]:
        """The live children the thread started in this window: its own, and ambiguous ones.

        A child is ambiguous when it started while another window on the thread was open
        (within the start time's resolution).
        """
        now = _clock()
        own: set[int] = set()
        ambiguous: set[int] = set()
        for pid in thread_children(self.tid):
            at = _started_at(pid)
            if at is None or at < self.opened - _TICK_S:  # gone, or older than the call
                continue
            with self._lock:
                spans = [(start, min(end, now)) for start, end in self._beside]
            if any(start - _TICK_S <= at <= end + _TICK_S for start, end in spans):
                ambiguous.add(pid)
            else:
                own.add(pid)
        return own, ambiguous
