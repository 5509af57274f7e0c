"""What a stdio server writes outside the protocol: its stderr, and stray stdout lines.

Each server's stderr goes through a pipe of ours, line by line into its logger
(`agentloop.mcp.server.<name>`, INFO) and into a short tail (the last lines, each
bounded, redacted) that failure reasons quote: "could not be started: ... its stderr
ended with: ...". A line on stdout that is not a JSON-RPC message is quoted the same way.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections import deque
from typing import IO, Any, TextIO

from agentloop.redaction import Redact, Redactor

__all__ = ["TAIL_CHARS", "TAIL_LINES", "ServerLog", "ServerOutput", "quote_output"]

TAIL_LINES = 10
"""How many of a server's last stderr lines a failure reason quotes."""
TAIL_CHARS = 300
"""Longer lines are cut to this many characters."""
PUMP_DRAIN_S = 1.0
"""How long closing a server's stderr waits for its last lines to be read."""


def _cut(text: str) -> str:
    text = text.rstrip()
    return text if len(text) <= TAIL_CHARS else text[: TAIL_CHARS - 3] + "..."


def quote_output(error: BaseException) -> str:
    """The stdout line a parse error is about, cut and quoted (else the error's text)."""
    errors = getattr(error, "errors", None)
    text: Any = None
    if callable(errors):
        with contextlib.suppress(Exception):
            text = next((e.get("input") for e in errors() if isinstance(e, dict)), None)
    if not isinstance(text, str):
        text = str(error)
    return repr(_cut(text))


class ServerOutput:
    """The last lines a server wrote to stderr (bounded, redacted), for failure reasons.

    Args:
        logger: The server's logger; each line is logged to it (INFO) as it arrives,
            at DEBUG if the server's previous process ended with the same line.
        redact: Applied to each kept line.
    """

    def __init__(self, logger: logging.Logger, redact: Redact | None = None) -> None:
        self.logger = logger
        self._redact = redact or Redactor()
        self._lines: deque[str] = deque(maxlen=TAIL_LINES)
        self._lock = threading.Lock()
        self._previous: set[str] = set()

    def add(self, line: str) -> None:
        """Keep one line of stderr (and log it)."""
        if not line.strip():
            return
        kept = self._redact(_cut(line))
        with self._lock:
            self._lines.append(kept)
            repeated = kept in self._previous
        # what the previous process said already (a start tried again): not logged twice
        self.logger.log(logging.DEBUG if repeated else logging.INFO, "%s", line.rstrip())

    def clear(self) -> None:
        """Start over for a new process (its lines the last one wrote are logged at DEBUG)."""
        with self._lock:
            self._previous = set(self._lines)
            self._lines.clear()

    @property
    def lines(self) -> list[str]:
        """The kept lines, oldest first."""
        with self._lock:
            return list(self._lines)

    def explain(self, reason: str) -> str:
        """`reason`, followed by the server's last stderr lines when it wrote any."""
        lines = self.lines
        if not lines:
            return reason
        return f"{reason}; its stderr ended with:\n" + "\n".join(f"  | {line}" for line in lines)


class ServerLog:
    """A pipe a stdio server's stderr goes into, read line by line into `ServerOutput`."""

    def __init__(self, output: ServerOutput) -> None:
        read_fd, write_fd = os.pipe()
        self.file: TextIO = os.fdopen(write_fd, "w")
        reader = os.fdopen(read_fd, encoding="utf-8", errors="replace")
        self._thread = threading.Thread(
            target=self._pump, args=(reader, output), name="agentloop-mcp-stderr", daemon=True
        )
        self._thread.start()

    @staticmethod
    def _pump(reader: IO[str], output: ServerOutput) -> None:
        with reader:
            for line in reader:
                output.add(line)

    def close(self) -> None:
        """Close this side of the pipe (the reader stops when the server's side closes too)."""
        with contextlib.suppress(OSError):
            self.file.close()

    def drain(self) -> None:
        """Wait (briefly) until every line the exited server wrote was read."""
        self._thread.join(PUMP_DRAIN_S)
