"""The server processes of the tests: finding the ones this process started (reads /proc),
starting one on a loopback port."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


def child_pids(marker: str) -> list[int]:
    """Live (not zombie) children of this process with `marker` in their command line."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if int(ppid) == os.getpid() and state != "Z" and marker.encode() in cmdline:
            pids.append(int(entry.name))
    return pids


def server_pids(module: str) -> list[int]:
    """Children of this process running `python -m agentloop.cli.servers.<module>`."""
    return child_pids(f"agentloop.cli.servers.{module}\0")


async def wait_until_gone(pid: int) -> None:
    for _ in range(200):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return
        if state == "Z":
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"process {pid} did not exit")


def free_port() -> int:
    """A TCP port on loopback that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def serving(command: list[str], port: int, what: str) -> Iterator[subprocess.Popen[bytes]]:
    """Start a server process (`command`, listening on `port`) and wait until it accepts.

    The test fails when it exits or has not started within 60 s; it is terminated after.
    """
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert process.poll() is None, f"the {what} exited"
            time.sleep(0.2)
        else:
            pytest.fail(f"the {what} did not start")
        yield process
    finally:
        process.terminate()
        process.wait(timeout=30)
