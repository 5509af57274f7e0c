"""Real checkpointer files for tests: a SQLite file, through the saver of the entry point."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiosqlite
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

__all__ = ["sqlite_saver"]


@asynccontextmanager
async def sqlite_saver(path: Path, entry: str) -> AsyncIterator[Any]:
    """A real SQLite checkpointer file: the sync saver for `invoke`, the async one for `ainvoke`."""
    if entry == "invoke":
        conn = sqlite3.connect(path, check_same_thread=False)
        try:
            yield SqliteSaver(conn)
        finally:
            conn.close()
    else:
        async with aiosqlite.connect(path) as aconn:
            yield AsyncSqliteSaver(aconn)
