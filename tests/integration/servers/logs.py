"""A server that logs through MCP (`notifications/message`) at the level the client set.

`chatter` sends one message per level, skipping those below the level `logging/setLevel`
asked for (all of them until it is asked).
"""

from __future__ import annotations

from typing import Any

from mcp.server.fastmcp import Context, FastMCP
from mcp.types import EmptyResult, LoggingLevel

LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
mcp = FastMCP("logs")
threshold = "debug"


@mcp._mcp_server.set_logging_level()  # type: ignore[untyped-decorator]
async def set_level(level: LoggingLevel) -> Any:
    global threshold
    threshold = level
    return EmptyResult()


@mcp.tool()
async def chatter(ctx: Context) -> str:  # type: ignore[type-arg]
    """Send a log message at each level the client wants; return how many were sent."""
    sent = [level for level in LEVELS if LEVELS.index(level) >= LEVELS.index(threshold)]
    for level in sent:
        await ctx.session.send_log_message(level=level, data=f"{level} news", logger="chatter")  # type: ignore[arg-type]
    return f"sent {len(sent)} from {threshold}"


if __name__ == "__main__":
    mcp.run()
