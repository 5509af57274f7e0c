"""The child processes a timed-out call started, and ending them (Linux, through /proc).

A call's children are those its own code started. While calls are in flight, the points
where Python starts a process (`subprocess.Popen`, and so asyncio's subprocesses;
`os.fork`, `os.forkpty`, `os.posix_spawn`, `os.posix_spawnp`) note each new process in
the call whose context starts it (`CallChildren`): a context variable set on a sync
call's thread or in an async call's task, which the tasks it creates inherit and no
other code sees.

A process started where Python does not show who starts it (`os.system`, a C
extension) is found among the children the call's thread started since the call began
(`/proc/self/task/<tid>/children`, kept per thread): on a sync call's pool thread,
which runs one call at a time, it is the call's; on an event loop's thread, which other
code shares, it may not be, and is left running.

A process is ended with its descendants: SIGTERM to all of them, then SIGKILL to those
still alive after a grace. Each is held by a pidfd, opened while it is still known to
be the child of the expected parent, so a recycled process id is never signalled.

Elsewhere (no /proc, no pidfd) nothing is ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import math
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from agentloop.base.sync import has_running_loop, pause

__all__ = [
    "DEFAULT_TERMINATE_GRACE_S",
    "CallChildren",
    "EndedProcesses",
    "end_processes",
]

DEFAULT_TERMINATE_GRACE_S = 0.5
"""How long an ended process may take to exit after SIGTERM before it gets SIGKILL."""


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
    return functools.partial(time.clock_gettime, boot)


_clock = _boot_clock()
"""Seconds since boot (chosen once: it is read on every call's path)."""


_TICK_S = 1 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01
"""The resolution of a process's start time in /proc (10 ms on Linux)."""


def _started_at(pid: int) -> float | None:
    """When a process started, in seconds since boot (None when it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rfind(")") + 2 :].split()[19]) * _TICK_S


_CALL: contextvars.ContextVar[CallChildren | None] = contextvars.ContextVar(
    "agentloop_call_children", default=None
)
"""The call whose tool runs in this context (on its thread, or in its task and theirs)."""

_seen: deque[int] = deque(maxlen=4096)
"""Processes lately started where Python shows who starts them, whoever did: a child
found in /proc that is not among them was started where it does not."""


def _noting(start: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a function that starts a process: the process is seen, and noted in its call."""

    @functools.wraps(start)
    def noting(*args: Any, **kwargs: Any) -> Any:
        started = start(*args, **kwargs)
        pid = args[0].pid if started is None else started  # Popen's sets its pid
        if isinstance(pid, tuple):  # forkpty's (pid, fd)
            pid = pid[0]
        if pid:  # 0 in the child of a fork
            _seen.append(pid)
            call = _CALL.get()
            if call is not None and call.is_open:
                call.noted.append((pid, _clock()))
        return started

    return noting


_START_POINTS: tuple[tuple[Any, str], ...] = (
    (
        (subprocess.Popen, "_execute_child"),
        *((os, name) for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp")),
    )
    if sys.platform == "linux"
    else ()  # nothing is ended elsewhere: nothing is hooked
)
"""Where Python starts a process (Popen's is where asyncio's and `os.popen` start theirs)."""


class CallChildren:
    """The child processes one call's tool starts, known by the context that starts them.

    Opened in the call's context (on its thread, or in its task's context before the
    task starts), it notes each process started in that context until it closes. The
    points where Python starts processes (`_START_POINTS`) are hooked while any call is
    open, and given back once none is (unless patched again since).

    Args:
        tid: The native id of the thread the call runs on.
        shared: Whether other code runs on that thread meanwhile (an event loop's).
    """

    _lock = threading.Lock()
    _in_flight: ClassVar[int] = 0
    _hooks: ClassVar[dict[tuple[Any, str], tuple[Any, Any]]] = {}
    """Each start point's function and its noting wrapper (made once per function)."""

    def __init__(self, tid: int, *, shared: bool) -> None:
        self.tid = tid
        self.shared = shared
        self.opened = _clock()
        """When the call started (nothing is read from /proc on a call's path)."""
        self.noted: list[tuple[int, float]] = []
        """The processes started in the call's context, each with when it was noted."""
        self.is_open = True

    @classmethod
    def open(cls, tid: int, *, shared: bool = False) -> CallChildren:
        """Start noting the processes started in the current context (the call's)."""
        call = cls(tid, shared=shared)
        with cls._lock:
            if not cls._in_flight:
                for owner, name in _START_POINTS:
                    start = getattr(owner, name, None)
                    hook = cls._hooks.get((owner, name))
                    if start is not None and (hook is None or start not in hook):
                        hook = cls._hooks[owner, name] = (start, _noting(start))
                    if hook is not None:
                        setattr(owner, name, hook[1])
            cls._in_flight += 1
        _CALL.set(call)
        return call

    def close(self) -> None:
        """Stop noting (the call ended or timed out); unhook once no call is open."""
        with self._lock:
            if not self.is_open:
                return
            self.is_open = False
            CallChildren._in_flight -= 1
            if self._in_flight:
                return
            for (owner, name), (start, noting) in self._hooks.items():
                if getattr(owner, name, None) is noting:  # else patched since: left as it is
                    setattr(owner, name, start)

    def started(self) -> tuple[set[int], set[int]]:
        """The live children the call started, and those it may have started (reads /proc).

        Its own: those noted in its context (started no later than noted: not a
        recycled id). Those it may have: the children its thread started since the call
        began where Python does not show who starts them; on a thread of its own they
        are its own too.
        """
        own = {p for p, noted in list(self.noted) if (_started_at(p) or math.inf) <= noted}
        seen = set(_seen.copy())  # another thread may add to it meanwhile
        unnoted = {
            pid
            for pid in _read_children(f"/proc/self/task/{self.tid}/children")
            if pid not in seen and (_started_at(pid) or 0) >= self.opened - _TICK_S
        }
        if not self.shared:
            return own | unnoted, set()
        return own, unnoted - own
