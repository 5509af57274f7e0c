"""What the `service` suite reads from one run: time, tokens a prompt cache would reuse, floor.

A run's model requests (`bench.simulated.ModelRequest`) and tool calls
(`bench.service_tasks.ToolCallLog`) give every figure: the time spent waiting on each,
the input tokens that repeat a prefix of an earlier request of the same run (what a
provider's prompt cache reuses), and the critical-path floor, the time the run would take
with no framework cost at all.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bench.service_tasks import ToolCallLog
from bench.simulated import CHARS_PER_TOKEN, ModelRequest

__all__ = ["RunMeasure", "common_prefix", "critical_path_s", "uncached_tokens"]


def common_prefix(first: str, second: str) -> int:
    """Return the length of the longest common prefix of two texts, in characters."""
    low, high = 0, min(len(first), len(second))
    while low < high:  # bisection of slice comparisons
        middle = (low + high + 1) // 2
        if first[:middle] == second[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def uncached_tokens(requests: Sequence[ModelRequest]) -> list[int]:
    """Return, per request, the input tokens a provider's prefix cache would not reuse.

    A request's input tokens minus its longest common prefix with any earlier request
    of the same run, in whole tokens (`CHARS_PER_TOKEN` characters each).
    """
    ordered = sorted(requests, key=lambda request: request.started)
    uncached = []
    for index, request in enumerate(ordered):
        reused = max(
            (common_prefix(earlier.prompt, request.prompt) for earlier in ordered[:index]),
            default=0,
        )
        uncached.append(request.input_tokens - reused // CHARS_PER_TOKEN)
    return uncached


@dataclass(frozen=True)
class _Step:
    """A model request or a tool call on the service's own clock."""

    start: float
    end: float
    """When the service alone would have finished it (a request: its last chunk taken)."""
    due: Sequence[float] = ()
    """A request's chunks, when each was due (what a step started meanwhile had read)."""

    def progress(self, at: float) -> float | None:
        """Seconds of this step a step starting at `at` waited for (None: none)."""
        if self.end <= at:
            return self.end - self.start
        read = bisect.bisect_right(self.due, at)
        return self.due[read - 1] - self.start if read else None


def _steps(requests: Sequence[ModelRequest], tools: ToolCallLog) -> list[_Step]:
    steps = [
        _Step(request.started, request.due[-1] if request.due else request.started, request.due)
        for request in requests
    ]
    steps += [_Step(run.started, run.ended) for run in tools.runs]
    return sorted(steps, key=lambda step: step.start)


def critical_path_s(requests: Sequence[ModelRequest], tools: ToolCallLog) -> float:
    """Return the time the run would take if only the model and the tools took time.

    Every step (a model request: time to first token, prefill and the output the caller
    took; a tool call: its run) waits for what it waited for in the run: a step that
    ended before it started, or the part of a streamed reply it had read when it
    started (a tool started from a plan still streaming). The floor is the longest
    chain of such waits; the framework's own time between steps counts for nothing.
    """
    steps = _steps(requests, tools)
    starts: list[float] = []
    for position, step in enumerate(steps):
        start = 0.0
        for earlier, earlier_start in zip(steps[:position], starts, strict=True):
            waited = earlier.progress(step.start)
            if waited is not None:
                start = max(start, earlier_start + waited)
        starts.append(start)
    return max(
        (start + step.end - step.start for step, start in zip(steps, starts, strict=True)),
        default=0.0,
    )


@dataclass(frozen=True)
class RunMeasure:
    """One run of one side: its wall time, the model requests and the tool calls."""

    wall_s: float
    """From the call to `ainvoke` to its return."""
    requests: Sequence[ModelRequest]
    """Every model request, in order."""
    tools: ToolCallLog
    """Every tool call."""
    records: Sequence[dict[str, Any]] = ()
    """Our loop's execution records (`tool_logs`); empty for `create_agent`."""

    @property
    def model_s(self) -> float:
        """Seconds waiting on the model (sum of the requests' durations)."""
        return sum(request.duration_s for request in self.requests)

    @property
    def split_s(self) -> tuple[float, float, float]:
        """The model wait as (time to first token, prefill, output) seconds."""
        return (
            sum(request.fixed_s for request in self.requests),
            sum(request.prefill_s for request in self.requests),
            sum(request.output_s for request in self.requests),
        )

    @property
    def tools_s(self) -> float:
        """Seconds during which a tool was running."""
        return self.tools.busy_s()

    @property
    def input_tokens(self) -> int:
        """Input tokens of all requests."""
        return sum(request.input_tokens for request in self.requests)

    @property
    def uncached_tokens(self) -> int:
        """Input tokens a provider's prefix cache would not reuse (see `uncached_tokens`)."""
        return sum(uncached_tokens(self.requests))

    @property
    def output_tokens(self) -> int:
        """Output tokens sent (a stream closed early counts what was sent)."""
        return sum(request.output_tokens for request in self.requests)

    @property
    def floor_s(self) -> float:
        """The critical-path floor (see `critical_path_s`)."""
        return critical_path_s(self.requests, self.tools)

    def breakdown(self) -> str:
        """Describe where the wall time went."""
        fixed, prefill, output = self.split_s
        return (
            f"{len(self.requests)} requests ({', '.join(r.kind for r in self.requests)}), "
            f"model {self.model_s:.2f} s (TTFT {fixed:.2f}, prefill {prefill:.2f}, "
            f"output {output:.2f}), tools {self.tools_s:.2f} s, floor {self.floor_s:.2f} s"
        )
