"""An MCP server that keeps notes in a JSON-lines file.

The file is `AGENTLOOP_NOTES_FILE`, or `./agentloop-notes.jsonl` when that is
unset. Each save appends one line and syncs it to disk; a save that repeats an
earlier `idempotency_key` of the same owner returns the earlier note instead of
writing again. Notes belong to the owner named by the call's
`_meta["agentloop/owner"]` (the loop sends a digest of the run's user context):
an owner lists, reads and deduplicates only its own notes (calls without an
owner share one space). A title is at most 200 characters, a body at most
100,000. Run it over stdio with `python -m agentloop.cli.servers.notes`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from mcp.types import ToolAnnotations
from typing_extensions import TypedDict

try:
    from mcp.server.fastmcp import Context, FastMCP
    from mcp.server.fastmcp.exceptions import ToolError

    CallContext = Context[Any, Any, Any]
except ImportError:  # mcp 2.x names it MCPServer, its context has two type parameters
    from mcp.server.mcpserver import Context  # type: ignore[import-not-found, no-redef]
    from mcp.server.mcpserver import (  # type: ignore[import-not-found, no-redef, unused-ignore]
        MCPServer as FastMCP,
    )
    from mcp.server.mcpserver.exceptions import (  # type: ignore[import-not-found, no-redef, unused-ignore]
        ToolError,
    )

    CallContext = Context[Any, Any]  # type: ignore[misc]

from agentloop.cli.servers import DEFAULT_NOTES_FILE, NOTES_FILE_ENV, OWNER_META_KEY

_FILE_ARGUMENT = ""
"""The `--file` the server was started with ("" when none)."""

__all__ = [
    "Note",
    "NoteSummary",
    "SavedNote",
    "list_notes",
    "main",
    "mcp",
    "notes_file",
    "read_note",
    "save_note",
]

MAX_TITLE_CHARS = 200
MAX_BODY_CHARS = 100_000

mcp = FastMCP("agentloop-notes", log_level="WARNING")
_READ_ONLY = ToolAnnotations(
    readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False
)
_WRITES = ToolAnnotations(
    readOnlyHint=False, destructiveHint=True, idempotentHint=False, openWorldHint=False
)


class Note(TypedDict):
    """A stored note."""

    id: str
    title: str
    body: str
    created_at: str
    idempotency_key: str


class SavedNote(Note):
    """A note as `save_note` returns it."""

    deduplicated: bool


class NoteSummary(TypedDict):
    """What `list_notes` shows of a note."""

    id: str
    title: str
    created_at: str


def notes_file() -> Path:
    """Return the notes file this process uses: `--file`, else the environment, else the default."""
    return Path(_FILE_ARGUMENT or os.environ.get(NOTES_FILE_ENV) or DEFAULT_NOTES_FILE)


def _lock(handle: IO[str]) -> None:
    """Hold an exclusive lock on the file until it is closed (POSIX only)."""
    if sys.platform != "win32":
        import fcntl

        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)


def _owner(ctx: CallContext | None) -> str:
    """Whom the call serves: `_meta["agentloop/owner"]` of the request ("" when absent)."""
    try:
        meta = ctx.request_context.meta if ctx is not None else None
    except (AttributeError, ValueError, LookupError):
        return ""
    extra = meta if isinstance(meta, dict) else getattr(meta, "model_extra", None)  # mcp 2.x, 1.x
    owner = (extra or {}).get(OWNER_META_KEY)
    return owner if isinstance(owner, str) else ""


def _parse(lines: list[str], owner: str) -> list[Note]:
    """The notes of `owner` among the lines of the file."""
    notes: list[Note] = []
    for line in lines:
        try:
            record: Any = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line torn by a crash mid-write is skipped, not fatal
        if (
            isinstance(record, dict)
            and isinstance(record.get("id"), str)
            and record.get("owner", "") == owner
        ):
            notes.append(
                Note(
                    id=record["id"],
                    title=str(record.get("title", "")),
                    body=str(record.get("body", "")),
                    created_at=str(record.get("created_at", "")),
                    idempotency_key=str(record.get("idempotency_key", "")),
                )
            )
    return notes


def _read_all(owner: str) -> list[Note]:
    path = notes_file()
    if not path.exists():
        return []
    return _parse(path.read_text(encoding="utf-8").splitlines(), owner)


@mcp.tool(annotations=_WRITES)
def save_note(  # noqa: D417 - `ctx` is the server's, not shown to the model
    title: str, body: str, idempotency_key: str = "", ctx: CallContext | None = None
) -> SavedNote:
    """Save a note and return it with its new id.

    Args:
        title: A short title.
        body: The note's text.
        idempotency_key: Optional. When a note was already saved with this key,
            that note is returned with `deduplicated: true` and nothing is written.
    """
    if not title.strip():
        msg = "title must not be empty"
        raise ToolError(msg)
    if len(title) > MAX_TITLE_CHARS or len(body) > MAX_BODY_CHARS:
        msg = f"a note's title is at most {MAX_TITLE_CHARS} characters, its body {MAX_BODY_CHARS}"
        raise ToolError(msg)
    owner = _owner(ctx)
    path = notes_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+", encoding="utf-8") as handle:
        _lock(handle)
        handle.seek(0)
        content = handle.read()
        if idempotency_key:
            for note in _parse(content.splitlines(), owner):
                if note["idempotency_key"] == idempotency_key:
                    return SavedNote(**note, deduplicated=True)
        note = Note(
            id=uuid.uuid4().hex[:12],
            title=title,
            body=body,
            created_at=datetime.now(UTC).isoformat(timespec="seconds"),
            idempotency_key=idempotency_key,
        )
        separator = "\n" if content and not content.endswith("\n") else ""
        line = json.dumps({**note, "owner": owner}, ensure_ascii=False)
        handle.write(separator + line + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    return SavedNote(**note, deduplicated=False)


@mcp.tool(annotations=_READ_ONLY)
def list_notes(ctx: CallContext | None = None) -> list[NoteSummary]:
    """List the saved notes, oldest first, without their bodies."""
    return [
        NoteSummary(id=n["id"], title=n["title"], created_at=n["created_at"])
        for n in _read_all(_owner(ctx))
    ]


@mcp.tool(annotations=_READ_ONLY)
def read_note(  # noqa: D417 - `ctx` is the server's, not shown to the model
    note_id: str, ctx: CallContext | None = None
) -> Note:
    """Return one saved note in full.

    Args:
        note_id: The `id` from `save_note` or `list_notes`.
    """
    for note in _read_all(_owner(ctx)):
        if note["id"] == note_id:
            return note
    msg = f"unknown note_id {note_id!r}"
    raise ToolError(msg)


def main(argv: list[str] | None = None) -> None:
    """Serve the tools over stdio until the client closes the connection."""
    global _FILE_ARGUMENT
    parser = argparse.ArgumentParser(prog="python -m agentloop.cli.servers.notes")
    parser.add_argument("--file", help=f"the notes file (default: ${NOTES_FILE_ENV})")
    _FILE_ARGUMENT = parser.parse_args(argv).file or ""
    mcp.run()


if __name__ == "__main__":
    main()
