"""What every benchmark shares: settings, figures and their targets, timing helpers."""

from __future__ import annotations

import itertools
import statistics
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "Figure",
    "MemoryProbe",
    "Settings",
    "Target",
    "Timing",
    "median",
    "per_round",
    "timed",
]


@dataclass(frozen=True)
class Settings:
    """How much work one run of the suite does."""

    quick: bool = False
    """Fewer repetitions and rounds: a smoke test of the suite, not figures to quote."""
    repeats: int = 5
    """Measurements per figure; the figure is their median."""
    time_scale: float | None = None
    """Factor applied to every simulated wait of the `service` suite (None: its default,
    full scale, or a quarter of it with `quick`)."""

    @classmethod
    def create(
        cls, *, quick: bool, repeats: int | None = None, time_scale: float | None = None
    ) -> Settings:
        """Return the settings of a full or quick run (`repeats` overrides the default)."""
        default = 3 if quick else 5
        if time_scale is not None and time_scale <= 0:
            msg = f"the time scale must be positive, got {time_scale:g}"
            raise ValueError(msg)
        return cls(quick=quick, repeats=max(1, repeats or default), time_scale=time_scale)


@dataclass(frozen=True)
class Target:
    """A bound that a figure should meet."""

    bound: float
    """The limit."""
    at_most: bool = True
    """True: the value must be <= `bound`; False: >= `bound`."""
    on: Literal["ratio", "ours"] = "ratio"
    """Which value is judged: ours / contender, or our own figure."""

    def met(self, ours: float, ratio: float) -> bool:
        """Tell whether the figure meets the target."""
        value = ratio if self.on == "ratio" else ours
        return value <= self.bound if self.at_most else value >= self.bound

    def __str__(self) -> str:
        return f"{self.on} {'<=' if self.at_most else '>='} {self.bound:g}"


@dataclass(frozen=True)
class Figure:
    """One line of the report: our figure, the contender's, and their ratio."""

    benchmark: str
    """What was measured."""
    ours: float
    """Median of our measurements."""
    contender: float
    """Median of the contender's measurements (or the ideal value)."""
    unit: str
    """Unit of `ours` and `contender`."""
    contender_name: str
    """Who or what `contender` is."""
    target: Target | None = None
    """The bound to meet; None for a figure reported for information."""
    samples: dict[str, list[float]] = field(default_factory=dict)
    """Every measurement, by side (`ours`, `contender`)."""
    notes: str = ""
    """What to know to read the figure."""
    missing: str = ""
    """Why there is no ratio to judge (e.g. a feature the scenario needs is missing); shown
    in place of the ratio, and the target counts as not met."""

    @property
    def ratio(self) -> float:
        """ours / contender."""
        return self.ours / self.contender if self.contender else float("inf")

    @property
    def met(self) -> bool | None:
        """Whether the target is met (None when there is no target)."""
        if self.target is None:
            return None
        return False if self.missing else self.target.met(self.ours, self.ratio)

    def as_dict(self) -> dict[str, Any]:
        """Return the figure as plain JSON data."""
        return {
            "benchmark": self.benchmark,
            "ours": self.ours,
            "contender": self.contender,
            "contender_name": self.contender_name,
            "unit": self.unit,
            "ratio": None if self.missing else self.ratio,
            "target": str(self.target) if self.target else None,
            "met": self.met,
            "samples": self.samples,
            "notes": self.notes,
            "missing": self.missing,
        }


def median(values: list[float]) -> float:
    """Return the median of measurements (nan when there are none)."""
    return statistics.median(values) if values else float("nan")


@dataclass(frozen=True)
class Timing:
    """How long an action took, and what it returned."""

    wall_s: float
    """Elapsed (wall-clock) seconds."""
    cpu_s: float
    """CPU seconds of the whole process (every thread) meanwhile; less sensitive than
    `wall_s` to other programs competing for the cores."""
    result: Any = None
    """What the action returned."""


async def timed(action: Callable[[], Awaitable[Any]]) -> Timing:
    """Await `action()` and measure it."""
    started, cpu = time.perf_counter(), time.process_time()
    result = await action()
    return Timing(time.perf_counter() - started, time.process_time() - cpu, result)


def per_round(stamps: list[float], window: int) -> tuple[float, float]:
    """Return the typical duration of a round over the first and the last `window` rounds.

    The median duration of the window, so that a pause caused by another program on a
    busy machine does not decide the figure.

    Args:
        stamps: When each round ended, in seconds, in order.
        window: How many rounds each figure covers.

    Returns:
        (first, last), in seconds.
    """
    durations = [later - earlier for earlier, later in itertools.pairwise(stamps)]
    if len(durations) < window:
        msg = f"need {window + 1} round stamps, got {len(stamps)}"
        raise ValueError(msg)
    return statistics.median(durations[:window]), statistics.median(durations[-window:])


class MemoryProbe:
    """Peak Python memory allocated while a block runs (tracemalloc; slows the block)."""

    def __init__(self) -> None:
        self.peak_bytes = 0

    @property
    def peak_mb(self) -> float:
        """The peak, in MiB."""
        return self.peak_bytes / 2**20

    @asynccontextmanager
    async def measure(self) -> AsyncIterator[MemoryProbe]:
        """Trace allocations inside the block and keep the peak above the start level."""
        tracemalloc.start()
        try:
            baseline, _ = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            yield self
            _, peak = tracemalloc.get_traced_memory()
            self.peak_bytes = max(0, peak - baseline)
        finally:
            tracemalloc.stop()
