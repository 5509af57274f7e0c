"""What a stdio server writes outside the protocol: its stderr, and stray stdout lines.

Each server's stderr goes through a pipe of ours, line by line into its logger
(`agentloop.mcp.server.<name>`, INFO) and into a short tail (the last lines, each
bounded, redacted) that failure reasons quote: "could not be started: ... its stderr
ended with: ...". A line on stdout that is not a JSON-RPC message is quoted the same way.
"""

from __future__ import annotations

import codecs
import contextlib
import logging
import os
import select
import threading
import time
from collections import deque
from typing import Any, TextIO

from agentloop.observability.redaction import Redact, Redactor

__all__ = ["TAIL_CHARS", "TAIL_LINES", "ServerLog", "ServerOutput", "quote_output"]

TAIL_LINES = 10
"""How many of a server's last stderr lines a failure reason quotes."""
TAIL_CHARS = 300
"""Longer lines are cut to this many characters."""
PUMP_DRAIN_S = 1.0
"""How long closing a server's stderr waits for its last lines to be read."""
SETTLE_S = 0.5
"""How long a failure reason waits for the lines a dying server wrote to be read."""


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
        self.log: ServerLog | None = None
        """The pipe of the server's current process (a stdio server), once it started."""

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

    def settle(self) -> None:
        """Wait (briefly, blocking) for the lines the server wrote to be read."""
        log = self.log
        if log is not None:
            log.settle()

    def explain(self, reason: str) -> str:
        """`reason`, followed by the server's last stderr lines when it wrote any."""
        lines = self.lines
        if not lines:
            return reason
        return f"{reason}; its stderr ended with:\n" + "\n".join(f"  | {line}" for line in lines)


class ServerLog:
    """A pipe a stdio server's stderr goes into, read line by line into `ServerOutput`.

    The pump reads what is in the pipe and adds its lines under a lock, so `settle` can
    tell when every byte the server wrote so far is a kept line: a failure reason built
    as the server dies quotes the line it died with.
    """

    def __init__(self, output: ServerOutput) -> None:
        read_fd, write_fd = os.pipe()
        self.file: TextIO = os.fdopen(write_fd, "w")
        self._fd = read_fd
        self._output = output
        self._lock = threading.Lock()
        self._done = False
        output.log = self
        self._thread = threading.Thread(target=self._pump, name="agentloop-mcp-stderr", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        partial = ""
        poller = _poller(self._fd)
        try:
            while True:
                if poller is not None:  # wait outside the lock, read inside it
                    poller.poll()
                    self._lock.acquire()
                    chunk = os.read(self._fd, 65536)
                else:  # no `poll` (Windows): `settle` cannot look, it only waits
                    chunk = os.read(self._fd, 65536)
                    self._lock.acquire()
                try:
                    text = decoder.decode(chunk, final=not chunk)
                    *lines, partial = (partial + text).split("\n")
                    if not chunk and partial:
                        lines, partial = [*lines, partial], ""
                    for line in lines:
                        self._output.add(line)
                    if not chunk:
                        self._done = True
                        return
                finally:
                    self._lock.release()
        finally:
            self._done = True  # also when reading failed: `settle` has nothing to wait for
            os.close(self._fd)

    def settle(self, timeout_s: float = SETTLE_S) -> None:
        """Wait (briefly) until every byte the server has written is read into lines."""
        with self._lock:
            poller = None if self._done else _poller(self._fd)
        if poller is None:
            if not self._done:  # nothing to look with: a short wait
                time.sleep(min(timeout_s, 0.05))
            return
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if self._done or not poller.poll(0):
                    return
            time.sleep(0.005)

    def close(self) -> None:
        """Close this side of the pipe (the reader stops when the server's side closes too)."""
        with contextlib.suppress(OSError):
            self.file.close()

    def drain(self) -> None:
        """Wait (briefly) until every line the exited server wrote was read."""
        self._thread.join(PUMP_DRAIN_S)


def _poller(fd: int) -> select.poll | None:
    """A poll object watching `fd` for data (None where `select.poll` is missing)."""
    if not hasattr(select, "poll"):
        return None
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return poller
