"""The child processes a timed-out call started, and ending them (Linux, through /proc).

Linux lists the children of each thread apart (`/proc/self/task/<tid>/children`): the
processes a thread started with `fork`, `vfork`, `posix_spawn` or `subprocess`, for as
long as that thread lives. A sync tool runs in a thread of its own, so its children are
exactly that thread's. An async tool runs on the event loop's thread, beside other
calls: its children are those the loop's thread started while the call ran
(`ChildWindow`), which is only unambiguous when no other call ran on that thread
meanwhile (the caller decides).

A process is ended with its descendants: SIGTERM to all of them, then SIGKILL to those
still alive after a grace. Each is held by a pidfd, opened while it is still known to
be the child of the expected parent, so a recycled process id is never signalled.

Elsewhere (no /proc, no pidfd) nothing is found and nothing is ended.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from agentloop._sync import pause

__all__ = [
    "DEFAULT_TERMINATE_GRACE_S",
    "ChildWindow",
    "EndedProcesses",
    "end_processes",
    "thread_children",
]

DEFAULT_TERMINATE_GRACE_S = 0.5
"""How long an ended process may take to exit after SIGTERM before it gets SIGKILL."""

_SELF = Path("/proc/self/task")


def thread_children(tid: int) -> set[int]:
    """The live children a thread of this process started (empty where /proc cannot tell)."""
    try:
        text = (_SELF / str(tid) / "children").read_text()
    except OSError:
        return set()
    return {int(pid) for pid in text.split()}


def _children(pid: int) -> set[int]:
    """The children of every thread of process `pid`."""
    found: set[int] = set()
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return found
    for task in tasks:
        with contextlib.suppress(OSError):
            found.update(int(child) for child in (task / "children").read_text().split())
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
    held = list(_hold(pids, os.getpid() if parent is None else parent))
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


@dataclass
class ChildWindow:
    """The children a thread started between `open` and now.

    Args:
        tid: The thread (its native id).
    """

    tid: int
    before: set[int] = field(default_factory=set)

    @classmethod
    def open(cls, tid: int) -> ChildWindow:
        """Remember the thread's children now."""
        return cls(tid, thread_children(tid))

    def started(self) -> set[int]:
        """The children the thread started since `open` that are still alive."""
        return thread_children(self.tid) - self.before
