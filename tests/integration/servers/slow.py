"""A server whose tools take their time, writing `start`, `end` or `cancelled` to a log.

`slow_write` carries no hints (a write); `slow_read` is read-only. The log (argv[1])
gets one line per event, with how many calls were running on the server at that moment.
"""

from __future__ import annotations

import sys

import anyio
from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations

mcp = FastMCP("slow")
running = 0


def note(event: str) -> None:
    with open(sys.argv[1], "a", encoding="utf-8") as log:
        log.write(f"{event} {running}\n")


async def take(seconds: float) -> str:
    global running
    running += 1
    note("start")
    try:
        await anyio.sleep(seconds)
    except BaseException:
        running -= 1
        note("cancelled")
        raise
    running -= 1
    note("end")
    return f"slept {seconds}s"


@mcp.tool()
async def slow_write(seconds: float) -> str:
    """Write something, slowly."""
    return await take(seconds)


@mcp.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def slow_read(seconds: float) -> str:
    """Read something, slowly."""
    return await take(seconds)


if __name__ == "__main__":
    mcp.run()
