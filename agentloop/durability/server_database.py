"""A ledger in the LangGraph server's own PostgreSQL database, reached by its URI.

LangGraph Server keeps its state in PostgreSQL and tells its processes where in
`POSTGRES_URI` (`DATABASE_URI` for some runtime editions). When its checkpointer is not
a saver whose connection the loop can borrow, the ledger opens its own short
connections to that database: the same `agentloop_ledger` table and atomic
`INSERT ... ON CONFLICT DO NOTHING` claims as `PostgresLedger`, one connection per
ledger operation (no pool to leak across the server's event loops).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from functools import partial
from typing import Any

from agentloop._effects import Effect
from agentloop.durability.sql import PostgresLedger, _arun_postgres

__all__ = ["SERVER_DATABASE_VARIABLES", "PostgresUriLedger", "server_database_uri"]

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

    def statement(self, name: str, params: tuple[Any, ...]) -> Effect[tuple[int, Any]]:
        """Run one statement on a connection of its own, blocking or awaited."""
        return Effect(partial(self.execute, name, params), partial(self.aexecute, name, params))

    async def aexecute(self, name: str, params: tuple[Any, ...]) -> tuple[int, Any]:
        """Run one statement on an async connection of its own."""
        import psycopg

        async with await psycopg.AsyncConnection.connect(self.uri, autocommit=True) as conn:
            return await _arun_postgres(self, conn, name, params)
