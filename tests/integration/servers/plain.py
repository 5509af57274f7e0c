"""A server whose tools carry no annotations (the MCP spec's defaults apply to them).

`toggle` flips a switch held in this process and returns how often it was flipped;
`explode` ends the process in the middle of its call; `peek` reads the count.
"""

from __future__ import annotations

import os
import sys

from mcp.server.fastmcp import FastMCP

mcp = FastMCP("plain")
flips = 0


@mcp.tool()
def toggle() -> int:
    """Flip the switch; return how many times it was flipped in this session."""
    global flips
    flips += 1
    return flips


@mcp.tool()
def peek() -> int:
    """How many times the switch was flipped in this session."""
    return flips


@mcp.tool()
def explode(marker_file: str) -> str:
    """Append to a file, then stop the server process mid-call."""
    with open(marker_file, "a", encoding="utf-8") as handle:
        handle.write("called\n")
    print("plain: out of coffee, stopping", file=sys.stderr, flush=True)
    os._exit(1)


if __name__ == "__main__":
    mcp.run()
