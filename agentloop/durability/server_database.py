"""The ledgers of the LangGraph server: its PostgreSQL database, or a file beside its state.

LangGraph Server keeps its state in PostgreSQL and tells its processes where in
`POSTGRES_URI` (`DATABASE_URI` for some runtime editions). When its checkpointer is not
a saver whose connection the loop can borrow, the ledger opens its own short
connections to that database: the same `agentloop_ledger` table and atomic
`INSERT ... ON CONFLICT DO NOTHING` claims as `PostgresLedger`, one connection per
ledger operation (no pool to leak across the server's event loops).
`check_server_database` tries that database once when a loop is built for the server,
so a URI that cannot be reached stops the server's start-up rather than a first payment.

`langgraph dev` (langgraph-runtime-inmem) with no database keeps its checkpoints, runs
and store in `.langgraph_api/` and writes them about every 10 s. Its ledger is an
SQLite file in that folder (`SqliteFileLedger`, or the file `AGENTLOOP_LEDGER_PATH`
names), committed before a call with side effects starts and when it ends, so a kill
at any moment finds every claim on disk after the restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import sqlite3
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

from agentloop.base.sync import by_mode
from agentloop.durability.sql import (
    _CREATE,
    PostgresLedger,
    _arun_postgres,
    _fetch,
    _SqlLedger,
)
from agentloop.errors import ConfigurationError

__all__ = [
    "DEV_LEDGER_FILE",
    "LEDGER_PATH_VARIABLE",
    "SERVER_DATABASE_VARIABLES",
    "PostgresUriLedger",
    "SqliteFileLedger",
    "check_server_database",
    "dev_ledger_path",
    "server_database_uri",
]

LEDGER_PATH_VARIABLE = "AGENTLOOP_LEDGER_PATH"
"""Where `langgraph dev`'s ledger file is kept, when set (else `DEV_LEDGER_FILE`)."""
DEV_LEDGER_FILE = Path(".langgraph_api") / "agentloop_ledger.sqlite"
"""`langgraph dev`'s ledger, beside the state the server keeps in its working directory."""
CONNECT_TIMEOUT_S = 5
"""How long `check_server_database` waits for the server's database."""

SERVER_DATABASE_VARIABLES = ("POSTGRES_URI", "DATABASE_URI")
"""Where the LangGraph server says which PostgreSQL database it uses, in this order."""

_SCHEME = re.compile(r"^postgres(?:ql)?(?:\+\w+)?://")


def server_database_uri() -> str | None:
    """Return the server's PostgreSQL URI from the environment (driver suffix removed), or None."""
    for name in SERVER_DATABASE_VARIABLES:
        value = os.environ.get(name, "").strip()
        if _SCHEME.match(value):
            return _SCHEME.sub("postgresql://", value, count=1)
    return None


def dev_ledger_path() -> Path:
    """Return where `langgraph dev` keeps its ledger file (`AGENTLOOP_LEDGER_PATH` if set).

    A relative path is taken from the working directory, as the server takes
    `.langgraph_api/` (it runs in the app's folder).
    """
    given = os.environ.get(LEDGER_PATH_VARIABLE, "").strip()
    return Path(given) if given else DEV_LEDGER_FILE


def check_server_database() -> None:
    """Connect once to the server's PostgreSQL database, when the environment names one.

    Raises:
        ConfigurationError: `POSTGRES_URI` (or `DATABASE_URI`) names a database that
            cannot be reached, or psycopg is not installed.
    """
    uri = server_database_uri()
    if uri is None:
        return
    variable = next(name for name in SERVER_DATABASE_VARIABLES if os.environ.get(name, "").strip())
    try:
        import psycopg
    except ImportError as error:
        msg = (
            f"{variable} is set, so the side-effect ledger lives in that PostgreSQL "
            "database, but psycopg is not installed: pip install 'agentloop[postgres]'"
        )
        raise ConfigurationError(msg) from error
    try:
        with psycopg.connect(uri, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        msg = (
            f"{variable} names a PostgreSQL database the side-effect ledger cannot reach "
            f"({reason}). Calls with side effects would fail: start the database, correct "
            f"{variable}, or unset it"
        )
        raise ConfigurationError(msg) from None


class SqliteFileLedger(_SqlLedger):
    """A ledger in an SQLite file of its own (the standard library's `sqlite3`).

    Every operation is committed before it returns (WAL journal, `synchronous=FULL`):
    a claim is on disk before the call it guards starts. Under `ainvoke` the
    statements run in a worker thread, off the event loop.

    Args:
        path: The database file; its folder is created when missing.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(saver=None)
        self.path = Path(path)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    async def statement(self, name: str, params: tuple[Any, ...]) -> tuple[int, Any]:
        """Run one statement: blocking, or in a worker thread when awaited."""
        run = partial(self.execute, name, params)
        return await by_mode(run, partial(asyncio.to_thread, run))

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                self.path, timeout=30, isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute(_CREATE)
            self._conn = conn
        return self._conn

    def execute(self, name: str, params: tuple[Any, ...]) -> tuple[int, Any]:
        """Run one statement and commit it (autocommit: each statement is a transaction)."""
        with self._lock:
            cursor = self._connection().execute(self.sql[name], params)
            try:
                return cursor.rowcount, _fetch(name, cursor)
            finally:
                cursor.close()

    def close(self) -> None:
        """Close the file's connection (the next operation opens it again)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


class PostgresUriLedger(PostgresLedger):
    """The ledger in a PostgreSQL database given by URI (psycopg, extra `.[postgres]`).

    Args:
        uri: A libpq connection string or `postgresql://` URI.
    """

    def __init__(self, uri: str) -> None:
        super().__init__(saver=None)
        self.uri = uri

    @contextlib.contextmanager
    def _connection(self) -> Iterator[Any]:
        import psycopg  # an optional dependency

        with psycopg.connect(self.uri, autocommit=True) as conn:
            yield conn

    async def statement(self, name: str, params: tuple[Any, ...]) -> tuple[int, Any]:
        """Run one statement on a connection of its own, blocking or awaited."""
        return await by_mode(
            partial(self.execute, name, params), partial(self.aexecute, name, params)
        )

    async def aexecute(self, name: str, params: tuple[Any, ...]) -> tuple[int, Any]:
        """Run one statement on an async connection of its own."""
        import psycopg

        async with await psycopg.AsyncConnection.connect(self.uri, autocommit=True) as conn:
            return await _arun_postgres(self, conn, name, params)
