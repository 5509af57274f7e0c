"""A server that dies at start (stderr says why) until its flag file exists."""

from __future__ import annotations

import sys
from pathlib import Path

from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations

mcp = FastMCP("late")


@mcp.tool(annotations=ToolAnnotations(readOnlyHint=True))
def late_answer() -> str:
    """The answer of a server that started late."""
    return "finally here"


if __name__ == "__main__":
    if not Path(sys.argv[1]).exists():
        print("cannot start: the database is not there yet", file=sys.stderr)
        sys.exit(3)
    mcp.run()
