"""A server that adds a tool when asked, and says so with `tools/list_changed`.

After `unlock_slowly`, listing its tools takes a second (a slow server, a fast planner).
`publish` adds a resource and says so with `resources/list_changed`.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.resources import TextResource
from mcp.types import ToolAnnotations

slow_listing = False


class Dynamic(FastMCP):  # type: ignore[type-arg]
    async def list_tools(self) -> Any:
        if slow_listing:
            await anyio.sleep(1.0)
        return await super().list_tools()


mcp = Dynamic("dynamic")


def secret() -> str:
    """The secret, available once unlocked."""
    return "opened sesame"


@mcp.tool()
async def unlock(ctx: Context) -> str:  # type: ignore[type-arg]
    """Make the `secret` tool available."""
    mcp.add_tool(secret, annotations=ToolAnnotations(readOnlyHint=True))
    await ctx.session.send_tool_list_changed()
    return "unlocked"


@mcp.tool()
async def unlock_slowly(ctx: Context) -> str:  # type: ignore[type-arg]
    """Make the `secret` tool available; listing the tools takes a second from now on."""
    global slow_listing
    slow_listing = True
    return await unlock(ctx)


@mcp.tool()
async def publish(name: str, text: str, ctx: Context) -> str:  # type: ignore[type-arg]
    """Publish a text as the resource `memo://<name>`."""
    uri = f"memo://{name}"
    mcp.add_resource(TextResource(uri=uri, name=name, description=f"memo {name}", text=text))  # type: ignore[arg-type]
    await ctx.session.send_resource_list_changed()
    return uri


@mcp.tool(annotations=ToolAnnotations(readOnlyHint=True))
def shout(text: str) -> str:
    """Upper-case a text, writing a line to stderr and a log message on the way."""
    print(f"shouting {text!r}", file=sys.stderr, flush=True)
    return text.upper()


if __name__ == "__main__":
    print("dynamic server starting", file=sys.stderr, flush=True)
    mcp.run()
