"""The benchmarks, each a module with `NAME`, `run(settings)` and `profile_workload(settings)`."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from types import ModuleType
from typing import Any

from bench.harness import Figure, Settings
from bench.suites import (
    calls,
    growth,
    memory,
    overhead,
    parallel,
    service,
    short_circuit,
    stall,
    throughput,
)

__all__ = ["SUITES", "Suite", "Workload"]

Suite = Callable[[Settings], Coroutine[Any, Any, list[Figure]]]
"""Runs one benchmark and returns its figures."""
Workload = Callable[[Settings], Coroutine[Any, Any, None]]
"""Runs our side of one benchmark (what `--profile` records)."""

_MODULES: tuple[ModuleType, ...] = (
    overhead,
    calls,
    parallel,
    short_circuit,
    growth,
    throughput,
    stall,
    memory,
    service,
)

SUITES: dict[str, tuple[Suite, Workload]] = {
    module.NAME: (module.run, module.profile_workload) for module in _MODULES
}
"""Every benchmark by name, in the order they run."""
