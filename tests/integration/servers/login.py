"""A stateful server: `login` sets who the session is, `whoami` reads it."""

from __future__ import annotations

from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations

mcp = FastMCP("login")
current_user = "nobody"


@mcp.tool()
def login(user: str) -> str:
    """Log this session in as `user`."""
    global current_user
    current_user = user
    return f"logged in as {user}"


@mcp.tool(annotations=ToolAnnotations(readOnlyHint=True, idempotentHint=True))
def whoami() -> str:
    """Who this session is logged in as."""
    return current_user


if __name__ == "__main__":
    mcp.run()
