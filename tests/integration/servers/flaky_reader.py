"""A read-only tool whose server process dies on its first call, then answers."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations

mcp = FastMCP("flaky")
COUNTER = Path(sys.argv[1])


@mcp.tool(annotations=ToolAnnotations(readOnlyHint=True))
def lookup(key: str) -> str:
    """Look a key up."""
    calls = int(COUNTER.read_text()) if COUNTER.exists() else 0
    COUNTER.write_text(str(calls + 1))
    if calls == 0:
        os._exit(1)
    return f"value of {key}"


if __name__ == "__main__":
    mcp.run()
