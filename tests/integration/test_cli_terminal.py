"""`agentloop demo` on a real pseudo-terminal: a live view, colours, the answer streamed."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

GREEN = re.compile(r"\x1b\[(?:[0-9;]*;)?32m")
ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def text_of(screen: str) -> str:
    """The screen's text without its control sequences."""
    return ESCAPE.sub("", screen)


def on_a_terminal(tmp_path: Path, **env: str) -> tuple[int, str]:
    """Run `agentloop demo` with stdout and stderr on one pseudo-terminal; return its screen."""
    environment = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    environment.update(TERM="xterm-256color", COLUMNS="110", LINES="40", **env)
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "agentloop.cli", "demo"],
        stdin=follower, stdout=follower, stderr=follower, cwd=tmp_path, env=environment,
        close_fds=True,
    )  # fmt: skip
    os.close(follower)
    output = bytearray()
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closed: the command ended
                break
            if not chunk:
                break
            output += chunk
        elif process.poll() is not None:
            break
    os.close(leader)
    return process.wait(timeout=60), output.decode("utf-8", errors="replace")


def test_the_demo_on_a_terminal_is_live_coloured_and_streams_markdown(tmp_path: Path) -> None:
    code, screen = on_a_terminal(tmp_path)
    assert code == 0, screen
    assert "\x1b[" in screen  # a live view and colours
    assert GREEN.search(screen), "the ok lines are green"
    assert "round 1: planning..." in screen
    # the answer, streamed: each token redraws the answer so far, then the whole once
    assert screen.count("Here is what the tools found:") >= 3
    assert "• Compute km per line: 42 / 4 = 10.5" in text_of(screen)  # Markdown: a list
    # the run report is a table (only the columns that say something, on a terminal)
    assert re.search(r"round +# +tool +arguments +ok +ms +result / error", text_of(screen))
    assert "\r\x1b[K" not in screen


def test_no_color_is_honoured_on_a_terminal(tmp_path: Path) -> None:
    code, screen = on_a_terminal(tmp_path, NO_COLOR="1")
    assert code == 0, screen
    assert not GREEN.search(screen)
    assert not re.search(r"\x1b\[[0-9;]*3[0-7]m", screen), "no colour at all"
    assert "• Compute km per line: 42 / 4 = 10.5" in text_of(screen)
