"""A stdio server's stderr: every line it wrote is quoted, the last one too."""

from __future__ import annotations

import logging
import os

from agentloop.mcp.output import TAIL_LINES, ServerLog, ServerOutput


def output() -> ServerOutput:
    return ServerOutput(logging.getLogger("agentloop.mcp.server.test"))


def test_settle_returns_once_every_line_written_is_kept() -> None:
    kept = output()
    log = ServerLog(kept)
    try:
        for round_ in range(50):  # each time: written, then explained at once, as a death is
            log.file.write(f"line {round_}\nout of coffee {round_}\n")
            log.file.flush()
            kept.settle()
            assert kept.lines[-1] == f"out of coffee {round_}"
        assert len(kept.lines) == TAIL_LINES
        assert kept.explain("it died").endswith("  | out of coffee 49")
    finally:
        log.close()
        log.drain()


def test_the_last_line_without_a_newline_and_broken_bytes_are_kept_at_the_end() -> None:
    kept = output()
    log = ServerLog(kept)
    write_end = log.file.fileno()
    os.write(write_end, b"caf\xc3\xa9 \xff broken\r\nno newline at the end")
    log.close()
    log.drain()
    assert kept.lines == ["caf\u00e9 \ufffd broken", "no newline at the end"]
    kept.settle()  # the pipe is closed: nothing to wait for


def test_an_output_without_a_pipe_settles_at_once() -> None:
    kept = output()
    kept.add("started")
    kept.settle()
    assert kept.explain("stopped") == "stopped; its stderr ended with:\n  | started"
