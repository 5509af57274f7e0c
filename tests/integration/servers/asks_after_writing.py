"""A server whose write tool appends a line to a file, then asks the user, then returns.

`append_then_ask` (no annotations: a write) appends `line` to `path`, asks with a form
whose `priority` field has a default, and returns the action and the raw content the
client sent, so a test sees both how often the write ran and what was answered.

Usage: `python asks_after_writing.py [--port PORT] [--echo-progress-token]`: over stdio,
or streamable HTTP on 127.0.0.1:PORT; with `--echo-progress-token`, the question
carries the call's `progressToken` in its `_meta` (stdio carries nothing else that
names the call a question belongs to).
"""

from __future__ import annotations

import argparse
import json

from mcp import types
from mcp.server.fastmcp import Context, FastMCP
from mcp.shared.message import ServerMessageMetadata

parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int)
parser.add_argument("--echo-progress-token", action="store_true")
options = parser.parse_args()

mcp = FastMCP("asks-after-writing")

SCHEMA = {
    "type": "object",
    "properties": {
        "note": {"type": "string", "description": "A note to keep with the line"},
        "priority": {"type": "integer", "default": 3},
    },
    "required": ["note"],
}


async def ask(ctx: Context, message: str) -> types.ElicitResult:
    """Ask the client, about the call `ctx` serves."""
    session = ctx.request_context.session
    if not options.echo_progress_token:
        return await session.elicit_form(message, SCHEMA, ctx.request_id)
    meta = ctx.request_context.meta
    echoed = {"progressToken": meta.progressToken} if meta and meta.progressToken else {}
    params = types.ElicitRequestFormParams(message=message, requestedSchema=SCHEMA, _meta=echoed)
    return await session.send_request(
        types.ServerRequest(types.ElicitRequest(params=params)),
        types.ElicitResult,
        metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
    )


@mcp.tool()
async def append_then_ask(path: str, line: str, ctx: Context) -> str:
    """Append `line` to `path`, then ask the user for a note."""
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")
    answer = await ask(ctx, f"Wrote {line!r}. Any note to keep with it?")
    return json.dumps({"action": answer.action, "content": answer.content})


if __name__ == "__main__":
    if options.port is None:
        mcp.run()
    else:
        mcp.settings.host = "127.0.0.1"
        mcp.settings.port = options.port
        mcp.run(transport="streamable-http")
