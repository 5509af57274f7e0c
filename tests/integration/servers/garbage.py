"""A server that writes a line of text (argv[1]) to stdout when it starts; then serves
(argv[2] == "serve": a banner before the protocol) or says nothing more."""

from __future__ import annotations

import sys
import time

if __name__ == "__main__":
    if sys.argv[2:] != ["serve"]:
        print(sys.argv[1], flush=True)
        time.sleep(120)
        sys.exit(0)
    from mcp.server.fastmcp import FastMCP

    mcp = FastMCP("banner")

    @mcp.tool()
    def hello() -> str:
        """Say hello."""
        return "hello"

    print(sys.argv[1], flush=True)
    mcp.run()
