"""A server with many tools (2,000 by default): `<area>_<number>`, in four areas.

Each tool takes a `query` and echoes its own name; the areas (`crm`, `billing`,
`search`, `files`) take turns, so `search_0002`, `search_0006`, ... are search tools.
"""

from __future__ import annotations

import sys

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

AREAS = ("crm", "billing", "search", "files")
COUNT = int(sys.argv[1]) if len(sys.argv) > 1 else 2000

TOOLS = [
    types.Tool(
        name=f"{AREAS[i % len(AREAS)]}_{i:04d}",
        description=(
            f"Look up records of the {AREAS[i % len(AREAS)]} area, partition {i}: returns "
            "the matching records with their identifiers, owners and last changes."
        ),
        inputSchema={
            "type": "object",
            "properties": {"query": {"type": "string", "description": "What to look for"}},
            "required": ["query"],
        },
        annotations=types.ToolAnnotations(readOnlyHint=True),
    )
    for i in range(COUNT)
]

server: Server = Server("many-tools")


@server.list_tools()  # type: ignore[misc, no-untyped-call]
async def list_tools() -> list[types.Tool]:
    return TOOLS


@server.call_tool()  # type: ignore[misc]
async def call_tool(name: str, arguments: dict[str, object]) -> list[types.TextContent]:
    return [types.TextContent(type="text", text=f"{name}: {arguments.get('query')}")]


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
