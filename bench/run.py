"""Run the benchmark suite and report: `python -m bench [--quick] [--only NAME ...]`.

Also runnable as `python bench/run.py` from the repository root. `--profile NAME`
records our side of one benchmark with pyinstrument instead of measuring.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # `python bench/run.py`: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import Figure, Settings
from bench.report import RESULTS_DIR, format_table, machine, write_json
from bench.suites import SUITES

__all__ = ["main", "parse_args", "profile", "run_suites"]


def _positive(text: str) -> float:
    value = float(text)
    if not value > 0:
        msg = f"must be a positive number, got {text}"
        raise argparse.ArgumentTypeError(msg)
    return value


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Read the command line."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "--quick", action="store_true", help="fewer repetitions and rounds (a smoke test)"
    )
    parser.add_argument(
        "--only", nargs="+", choices=list(SUITES), metavar="NAME", help="benchmarks to run"
    )
    parser.add_argument("--repeats", type=int, help="measurements per figure (default 5, 3)")
    parser.add_argument(
        "--time-scale",
        type=_positive,
        metavar="FACTOR",
        help="multiply the service suite's simulated waits (default 1, 0.25 with --quick)",
    )
    parser.add_argument(
        "--output", type=Path, help=f"JSON file (default {RESULTS_DIR / 'latest.json'})"
    )
    parser.add_argument(
        "--profile",
        choices=list(SUITES),
        metavar="NAME",
        help="profile our side of one benchmark with pyinstrument instead of measuring",
    )
    return parser.parse_args(argv)


async def run_suites(names: list[str], settings: Settings) -> list[Figure]:
    """Run the named benchmarks in order; print each one's time as it finishes."""
    figures: list[Figure] = []
    for name in names:
        suite, _ = SUITES[name]
        started = time.perf_counter()
        figures.extend(await suite(settings))
        print(f"  {name}: {time.perf_counter() - started:.1f}s", file=sys.stderr, flush=True)
    return figures


def profile(name: str, settings: Settings) -> str:
    """Profile our side of a benchmark; return pyinstrument's text report."""
    from pyinstrument import Profiler

    _, workload = SUITES[name]
    asyncio.run(workload(settings))  # warm-up, outside the profile
    profiler = Profiler(interval=0.0005, async_mode="disabled")
    profiler.start()
    asyncio.run(workload(settings))
    profiler.stop()
    return profiler.output_text(color=False, show_all=False)


def main(argv: list[str] | None = None) -> int:
    """Run the suite (or a profile) and print the report."""
    args = parse_args(argv)
    settings = Settings.create(quick=args.quick, repeats=args.repeats, time_scale=args.time_scale)
    if args.profile:
        print(profile(args.profile, settings))
        return 0
    names = args.only or list(SUITES)
    info = machine()
    print(
        f"agentloop benchmarks ({'quick' if settings.quick else 'full'}, "
        f"median of {settings.repeats}) on {info['nproc']} x {info['cpu']}, "
        f"Python {info['python']}",
        file=sys.stderr,
        flush=True,
    )
    started = time.perf_counter()
    figures = asyncio.run(run_suites(names, settings))
    seconds = time.perf_counter() - started
    print(format_table(figures))
    path = write_json(figures, settings, seconds, args.output)
    missed = [figure for figure in figures if figure.met is False]
    print(f"\n{len(figures)} figures in {seconds:.0f}s, {len(missed)} target(s) not met.")
    print(f"Results written to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
