"""A server whose only tool (no annotations: a write) appends to a file after a delay."""

from __future__ import annotations

import time

from mcp.server.fastmcp import FastMCP

mcp = FastMCP("slow")


@mcp.tool()
def slow_append(marker_file: str, seconds: float) -> str:
    """Wait `seconds`, then append a line to `marker_file`."""
    time.sleep(seconds)
    with open(marker_file, "a", encoding="utf-8") as handle:
        handle.write("appended\n")
    return "appended"


if __name__ == "__main__":
    mcp.run()
