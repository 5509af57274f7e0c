"""A streamable HTTP server on 127.0.0.1:<port> whose calls can stall or drop their stream.

- `add(a, b)` (read-only) and `append(path, line)` (a write) answer at once;
- `stall(seconds, marker)` answers after a long wait, touching the file `marker` (when
  given) as the wait starts (a test kills the server meanwhile);
- `append_then_stall(path, line)` (a write) appends the line, then never answers (a
  test kills or restarts the server while it waits);
- `drops_stream(text)` closes its response stream, then answers: the answer reaches a
  client only by resuming the stream with `Last-Event-ID` (the server keeps its events).

Usage: `python http_streams.py PORT [json]`; with `json`, each answer is one JSON
response instead of an event stream (the connection of a call is then its only link).
"""

from __future__ import annotations

import asyncio
import itertools
import sys

from mcp.server.fastmcp import Context, FastMCP
from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp.types import JSONRPCMessage, ToolAnnotations


class MemoryEventStore(EventStore):
    """Every event of this process, so a dropped stream can be resumed."""

    def __init__(self) -> None:
        self._events: list[tuple[StreamId, EventId, JSONRPCMessage | None]] = []
        self._ids = itertools.count(1)

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        event_id = str(next(self._ids))
        self._events.append((stream_id, event_id, message))
        return event_id

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        stream = next((s for s, e, _ in self._events if e == last_event_id), None)
        if stream is None:
            return None
        after = False
        for stream_id, event_id, message in self._events:
            if after and stream_id == stream and message is not None:
                await send_callback(EventMessage(message, event_id))
            after = after or event_id == last_event_id
        return stream


mcp = FastMCP("http-streams", event_store=MemoryEventStore(), retry_interval=100)
mcp.settings.host = "127.0.0.1"
mcp.settings.port = int(sys.argv[1])
mcp.settings.json_response = sys.argv[2:] == ["json"]


@mcp.tool(annotations=ToolAnnotations(readOnlyHint=True))
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@mcp.tool()
def append(path: str, line: str) -> str:
    """Append a line to a file."""
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")
    return "appended"


@mcp.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def stall(seconds: float, marker: str = "") -> str:
    """Answer after `seconds`; touch the file `marker` (when given) as the wait starts."""
    if marker:
        with open(marker, "a", encoding="utf-8"):
            pass
    await asyncio.sleep(seconds)
    return "late"


@mcp.tool()
async def append_then_stall(path: str, line: str) -> str:
    """Append a line to a file, then wait for good (its effect has taken place)."""
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")
    await asyncio.sleep(3600)
    return "appended"


@mcp.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def drops_stream(text: str, ctx: Context) -> str:
    """Close the response stream, then answer (kept for a client that resumes)."""
    await ctx.close_sse_stream()
    await asyncio.sleep(0.5)
    return f"resumed: {text}"


if __name__ == "__main__":
    mcp.run(transport="streamable-http")
