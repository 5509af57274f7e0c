"""A server that writes a line of text to stdout first (argv[1]); then serves (argv[2] == "serve")
or says nothing more."""

from __future__ import annotations

import sys
import time

if __name__ == "__main__":
    print(sys.argv[1], flush=True)
    if sys.argv[2:] != ["serve"]:
        time.sleep(120)
        sys.exit(0)
    from mcp.server.fastmcp import FastMCP

    mcp = FastMCP("banner")

    @mcp.tool()
    def hello() -> str:
        """Say hello."""
        return "hello"

    mcp.run()
