"""A server whose write tool appends a line to a file, then asks the user, then returns.

`append_then_ask` (no annotations: a write) appends `line` to `path`, asks with a form
whose `priority` field has a default, and returns the action and the raw content the
client sent, so a test sees both how often the write ran and what was answered.
"""

from __future__ import annotations

import json

from mcp.server.fastmcp import Context, FastMCP

mcp = FastMCP("asks-after-writing")

SCHEMA = {
    "type": "object",
    "properties": {
        "note": {"type": "string", "description": "A note to keep with the line"},
        "priority": {"type": "integer", "default": 3},
    },
    "required": ["note"],
}


@mcp.tool()
async def append_then_ask(path: str, line: str, ctx: Context) -> str:
    """Append `line` to `path`, then ask the user for a note."""
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")
    answer = await ctx.request_context.session.elicit_form(
        f"Wrote {line!r}. Any note to keep with it?",
        SCHEMA,
        ctx.request_id,
    )
    return json.dumps({"action": answer.action, "content": answer.content})


if __name__ == "__main__":
    mcp.run()
