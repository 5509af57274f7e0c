"""What test tools did, in the order they did it, and whether they ran beside each other.

Order and overlap are read from recorded order, never from elapsed seconds: a loaded
machine makes every step slower, but it cannot change which step came first. A tool
that must run beside others *meets* them: it records its start, then waits until each
of them has started too. Run at once, they meet at once, however slow the machine; run
one after the other, the first one waits in vain, and the test fails saying who missed
whom (`MEETING_S` is only a guard against that wait lasting forever).

    timeline = Timeline()

    @tool
    async def read_a(key: str) -> str:
        await timeline.meet(key, "r1", "r2")  # "start r1", then wait for r2 to start
        timeline.end(key)                     # "end r1"
        return key

    ...
    timeline.assert_met()
    assert timeline.before("end r1", "start w1")
"""

from __future__ import annotations

import asyncio
import threading
import time

__all__ = ["MEETING_S", "Timeline"]

MEETING_S = 20.0
"""How long a tool waits to meet the others before the test fails: only tools run one
after the other (or a hang) ever reach it. Below the tools' default 30 s time limit, so
the tool reports the miss itself instead of being timed out."""


class Timeline:
    """The steps test tools took ("start x", "end x", ...), in order, across threads."""

    def __init__(self) -> None:
        self.steps: list[str] = []
        """Every step noted, in the order it was noted."""
        self.missed: list[str] = []
        """Who waited `MEETING_S` for whom in vain."""
        self._started: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    def note(self, step: str) -> None:
        """Record a step."""
        with self._lock:
            self.steps.append(step)

    def start(self, name: str) -> None:
        """Record "start `name`" and let those waiting to meet `name` go on."""
        self.note(f"start {name}")
        self._event(name).set()

    def end(self, name: str) -> None:
        """Record "end `name`"."""
        self.note(f"end {name}")

    async def meet(self, name: str, *others: str) -> None:
        """Start `name`, then wait (on the running event loop) until each of `others` started."""
        self.start(name)
        deadline = time.monotonic() + MEETING_S
        waiting = [self._event(other) for other in others]
        while not all(event.is_set() for event in waiting):
            if time.monotonic() > deadline:
                self._miss(name, others)
                return
            await asyncio.sleep(0.001)

    def meet_blocking(self, name: str, *others: str) -> None:
        """`meet` for a sync tool: block this thread until each of `others` started."""
        self.start(name)
        deadline = time.monotonic() + MEETING_S
        for other in others:
            if not self._event(other).wait(max(0.0, deadline - time.monotonic())):
                self._miss(name, others)
                return

    def started(self, name: str) -> bool:
        """Whether `name` started."""
        return self._event(name).is_set()

    def at(self, step: str) -> int:
        """Where `step` is in the timeline (its first occurrence)."""
        assert step in self.steps, f"{step!r} never happened: {self.steps}"
        return self.steps.index(step)

    def before(self, first: str, second: str) -> bool:
        """Whether step `first` came before step `second`."""
        return self.at(first) < self.at(second)

    def overlapped(self, first: str, second: str) -> bool:
        """Whether `first` and `second` ran at once: each started before the other ended."""
        return self.before(f"start {first}", f"end {second}") and self.before(
            f"start {second}", f"end {first}"
        )

    def assert_met(self) -> None:
        """Fail, saying who missed whom, unless every meeting took place."""
        assert not self.missed, f"{'; '.join(self.missed)} (timeline: {self.steps})"

    def _event(self, name: str) -> threading.Event:
        with self._lock:
            return self._started.setdefault(name, threading.Event())

    def _miss(self, name: str, others: tuple[str, ...]) -> None:
        absent = [other for other in others if not self.started(other)]
        with self._lock:
            self.missed.append(
                f"{name} waited {MEETING_S:.0f}s for {', '.join(absent)} to start beside it"
            )
