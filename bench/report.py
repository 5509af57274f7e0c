"""The report: a text table of the figures, the machine they ran on, and a JSON file."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from bench.harness import Figure, Settings

__all__ = ["RESULTS_DIR", "format_table", "machine", "write_json"]

RESULTS_DIR = Path(__file__).resolve().parent / "results"
"""Where `latest.json` is written (git-ignored)."""
PACKAGES = ("agentloop", "langgraph", "langchain", "langchain-core", "langgraph-checkpoint")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _commit() -> str:
    try:
        result = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
            cwd=Path(__file__).resolve().parent,
        )
    except OSError:
        return ""
    return result.stdout.strip()


def machine() -> dict[str, Any]:
    """Describe where the figures were measured."""
    versions: dict[str, str | None] = {}
    for package in PACKAGES:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return {
        "nproc": os.cpu_count(),
        "cpu": _cpu_model(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": versions,
        "commit": _commit(),
    }


def _number(value: float) -> str:
    if value != value:  # nan
        return "-"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}" if abs(value) < 0.1 else f"{value:.2f}"


def _met(figure: Figure) -> str:
    if figure.met is None:
        return "info"
    return "yes" if figure.met else "NO"


def format_table(figures: Sequence[Figure]) -> str:
    """Return the figures as an aligned text table."""
    header = ("benchmark", "ours", "contender", "ratio", "target", "met")
    rows = [
        (
            figure.benchmark,
            f"{_number(figure.ours)} {figure.unit}",
            f"{_number(figure.contender)} {figure.unit} ({figure.contender_name})",
            figure.missing or _number(figure.ratio),
            str(figure.target) if figure.target else "-",
            _met(figure),
        )
        for figure in figures
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def write_json(
    figures: Sequence[Figure], settings: Settings, seconds: float, path: Path | None = None
) -> Path:
    """Write the results with the settings and the machine; return the file's path."""
    target = path or RESULTS_DIR / "latest.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "quick": settings.quick,
        "repeats": settings.repeats,
        "time_scale": settings.time_scale,
        "seconds": round(seconds, 1),
        "machine": machine(),
        "figures": [figure.as_dict() for figure in figures],
    }
    target.write_text(json.dumps(document, indent=2) + "\n")
    return target
