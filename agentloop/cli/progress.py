"""Showing a run's progress on a terminal or in a log (stderr)."""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Mapping
from typing import Any, TextIO

from agentloop.display import compact_json, shorten

__all__ = ["Progress"]


class Progress:
    """Shows a run's events on a text stream (stderr).

    On a terminal (`live=True`), a status line (round, calls in flight and their elapsed
    time) stays under the event lines and is rewritten in place with a carriage return;
    otherwise each event is one plain line.

    Args:
        stream: Where to write.
        live: Keep a rewritten status line (only for a terminal).
        enabled: Write nothing when False.
    """

    def __init__(self, stream: TextIO, *, live: bool, enabled: bool = True) -> None:
        self.stream = stream
        self.live = live and enabled
        self.enabled = enabled
        self.commands: list[Mapping[str, Any]] = []
        self.in_flight: dict[str, tuple[str, float]] = {}
        self.round = 0
        self.phase = "starting the MCP servers"
        self.started = time.monotonic()
        self._status_shown = False

    # -- output --------------------------------------------------------------------------

    def line(self, text: str) -> None:
        """Write one event line (above the status line on a terminal)."""
        if not self.enabled:
            return
        self._clear_status()
        self.stream.write(text + "\n")
        self.draw()

    def _clear_status(self) -> None:
        if self._status_shown:
            self.stream.write("\r\x1b[K")
            self._status_shown = False

    def status_text(self) -> str:
        """Return the status line: elapsed time, round, phase and the calls in flight."""
        now = time.monotonic()
        where = f"round {self.round}: {self.phase}" if self.round else self.phase
        text = f"[{now - self.started:5.1f}s] {where}"
        if self.in_flight:
            calls = ", ".join(
                f"{name} {now - since:.1f}s" for name, since in self.in_flight.values()
            )
            text += f" | {len(self.in_flight)} in flight: {calls}"
        return text

    def draw(self) -> None:
        """Rewrite the status line (terminal only)."""
        if self.live:
            width = shutil.get_terminal_size((80, 24)).columns
            self.stream.write("\r\x1b[K" + shorten(self.status_text(), max(width - 1, 10)))
            self._status_shown = True
        self.stream.flush()

    def close(self) -> None:
        """Remove the status line."""
        if self.enabled:
            self._clear_status()
            self.stream.flush()

    async def tick(self, interval_s: float = 0.1) -> None:
        """Redraw the status line until cancelled, so elapsed times keep moving."""
        while True:
            await asyncio.sleep(interval_s)
            self.draw()

    # -- stream chunks -------------------------------------------------------------------

    def values(self, state: Mapping[str, Any]) -> None:
        """Take a `values` chunk: remember the planned commands (for their arguments)."""
        decision: Mapping[str, Any] = state.get("decision") or {}
        self.commands = list(decision.get("execution_commands") or [])

    def _arguments(self, index: int, tool_name: str) -> str:
        if 0 <= index < len(self.commands):
            command = self.commands[index]
            if command.get("tool_name") == tool_name:
                return shorten(compact_json(command.get("tool_kwargs") or {}), 80)
        return ""

    def event(self, event: Mapping[str, Any]) -> None:
        """Take a `custom` chunk: one event of the loop."""
        kind = event.get("type")
        tool = str(event.get("tool_name", ""))
        if kind == "round_started":
            self.round = int(event.get("round_index", 0)) + 1
            self.phase = "planning"
            again = " again" if event.get("replan") else ""
            self.line(f"round {self.round}: planning{again}...")
        elif kind == "plan_decided":
            self.phase = "executing" if event.get("command_count") else "planned"
            if event.get("parse_error") and event.get("chunks"):  # a reply, but unusable
                self.line(f"  planner: {shorten(str(event['parse_error']), 200)}")
        elif kind == "tool_started":
            call_id = str(event.get("call_id", ""))
            self.in_flight[call_id] = (tool, time.monotonic())
            written = event.get("kwargs")
            arguments = (
                shorten(compact_json(written), 80)
                if isinstance(written, dict)
                else self._arguments(int(event.get("index", -1)), tool)
            )
            self.line(f"  -> {tool}({arguments}) ...")
        elif kind == "tool_retry":
            error = shorten(str(event.get("error", "")), 120)
            self.line(
                f"  retry {tool}: attempt {event.get('attempt')} failed ({error}), "
                f"waiting {float(event.get('wait_s', 0.0)):.1f}s"
            )
        elif kind == "tool_error":
            self.in_flight.pop(str(event.get("call_id", "")), None)
            self.line(f"  ERR {tool}: {shorten(str(event.get('error', '')), 200)}")
        elif kind == "tool_completed":
            self.in_flight.pop(str(event.get("call_id", "")), None)
            if event.get("success"):
                self.line(f"  ok {tool} {float(event.get('duration_ms', 0.0)):.0f} ms{_how(event)}")
            else:
                self.draw()
        elif kind == "tool_rolled_back":
            self.line(f"  round {self.round} rolled back: every call was flagged")
        elif kind == "answer_started":
            self.phase = "answering"
            self.line("answering...")
        elif kind == "answer_completed":
            self.phase = "done"  # a failed answer is the command's error line


def _how(event: Mapping[str, Any]) -> str:
    notes = []
    if event.get("from_cache"):
        notes.append("from cache")
    if event.get("fallback"):
        notes.append(f"fallback: {event['fallback']}")
    attempts = int(event.get("attempts", 1) or 1)
    if attempts > 1:
        notes.append(f"{attempts} attempts")
    return f" ({', '.join(notes)})" if notes else ""
