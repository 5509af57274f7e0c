"""A server that adds a tool when asked, and says so with `tools/list_changed`."""

from __future__ import annotations

import sys

from mcp.server.fastmcp import Context, FastMCP
from mcp.types import ToolAnnotations

mcp = FastMCP("dynamic")


def secret() -> str:
    """The secret, available once unlocked."""
    return "opened sesame"


@mcp.tool()
async def unlock(ctx: Context) -> str:  # type: ignore[type-arg]
    """Make the `secret` tool available."""
    mcp.add_tool(secret, annotations=ToolAnnotations(readOnlyHint=True))
    await ctx.session.send_tool_list_changed()
    return "unlocked"


@mcp.tool(annotations=ToolAnnotations(readOnlyHint=True))
def shout(text: str) -> str:
    """Upper-case a text, writing a line to stderr and a log message on the way."""
    print(f"shouting {text!r}", file=sys.stderr, flush=True)
    return text.upper()


if __name__ == "__main__":
    print("dynamic server starting", file=sys.stderr, flush=True)
    mcp.run()
