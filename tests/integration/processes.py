"""Finding the MCP server processes this test process started (reads /proc)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path


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
    """Children of this process running `python -m agentloop.servers.<module>`."""
    return child_pids(f"agentloop.servers.{module}\0")


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
