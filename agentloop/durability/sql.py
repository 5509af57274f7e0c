"""Ledgers kept in a small table of an SQLite or PostgreSQL checkpointer's own database.

The table `agentloop_ledger` lives beside LangGraph's checkpoint tables and is reached
through the checkpointer's own connection (or pool) and lock. A claim is an
`INSERT ... ON CONFLICT DO NOTHING`, which both databases make atomic across processes:
two workers resuming one thread from two processes claim a call once.

With a psycopg pool, a PostgreSQL ledger survives a server restart: a statement whose
connection was lost runs once more on a fresh connection. LangGraph's savers do not
retry, so give the pool `check=ConnectionPool.check_connection` (docs/how-to/deploy.md says how).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Iterator
from functools import partial
from typing import Any

from agentloop.base.sync import blocked_loop, by_mode
from agentloop.durability.ledger import LedgerEntry, LedgerKey, LedgerOp, SideEffectLedger

__all__ = ["AsyncPostgresLedger", "AsyncSqliteLedger", "PostgresLedger", "SqliteLedger"]

logger = logging.getLogger(__name__)

TABLE = "agentloop_ledger"

_CREATE = f"""CREATE TABLE IF NOT EXISTS {TABLE} (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL,
    call_key TEXT NOT NULL,
    owner TEXT NOT NULL,
    started_at DOUBLE PRECISION NOT NULL,
    outcome TEXT,
    PRIMARY KEY (thread_id, checkpoint_ns, call_key)
)"""
_WHERE = "thread_id = {p} AND checkpoint_ns = {p} AND call_key = {p}"
_STATEMENTS = {
    "get": f"SELECT owner, started_at, outcome FROM {TABLE} WHERE {_WHERE}",
    "claim": f"INSERT INTO {TABLE} (thread_id, checkpoint_ns, call_key, owner, started_at) "
    "VALUES ({p}, {p}, {p}, {p}, {p}) ON CONFLICT DO NOTHING",
    "finish": f"INSERT INTO {TABLE} "
    "(thread_id, checkpoint_ns, call_key, owner, started_at, outcome) "
    "VALUES ({p}, {p}, {p}, {p}, {p}, {p}) "
    "ON CONFLICT (thread_id, checkpoint_ns, call_key) "
    "DO UPDATE SET owner = excluded.owner, outcome = excluded.outcome",
    "release": f"DELETE FROM {TABLE} WHERE {_WHERE} AND owner = {{p}} AND outcome IS NULL",
    "take_over": f"INSERT INTO {TABLE} (thread_id, checkpoint_ns, call_key, owner, started_at) "
    "VALUES ({p}, {p}, {p}, {p}, {p}) "
    "ON CONFLICT (thread_id, checkpoint_ns, call_key) "
    "DO UPDATE SET owner = excluded.owner, started_at = excluded.started_at, outcome = NULL",
    "forget": f"DELETE FROM {TABLE} WHERE thread_id = {{p}}",
    "stale_threads": f"SELECT thread_id, MAX(started_at) FROM {TABLE} GROUP BY thread_id "
    "HAVING MAX(started_at) < {p} AND MAX(started_at) > {p} ORDER BY MAX(started_at) LIMIT {p}",
    "call_keys": f"SELECT call_key FROM {TABLE} WHERE thread_id = {{p}} AND call_key LIKE {{p}}",
}
LISTS = frozenset({"stale_threads", "call_keys"})
"""The statements that return every row (`get` returns its first)."""


def _statements(placeholder: str) -> dict[str, str]:
    return {name: text.replace("{p}", placeholder) for name, text in _STATEMENTS.items()}


def _key(key: LedgerKey) -> tuple[str, str, str]:
    return (key.thread_id, key.namespace, key.call_key)


def _entry(row: Any) -> LedgerEntry | None:
    if row is None:
        return None
    if isinstance(row, dict):
        owner, started_at, outcome = row["owner"], row["started_at"], row["outcome"]
    else:
        owner, started_at, outcome = row
    return LedgerEntry(str(owner), float(started_at), json.loads(outcome) if outcome else None)


def _fetch(name: str, cursor: Any) -> Any:
    """What a statement returns: `get` its first row, a listing all of them, others none."""
    if name == "get":
        return cursor.fetchone()
    return cursor.fetchall() if name in LISTS else None


async def _afetch(name: str, cursor: Any) -> Any:
    """`_fetch` on an async cursor."""
    if name == "get":
        return await cursor.fetchone()
    return await cursor.fetchall() if name in LISTS else None


def _columns(rows: Any) -> list[tuple[Any, ...]]:
    """Rows as tuples, whether the connection gives tuples or dicts (`dict_row`)."""
    return [tuple(row.values()) if isinstance(row, dict) else tuple(row) for row in rows or ()]


def _like_prefix(prefix: str) -> str:
    """A `LIKE` pattern for `prefix` (no wildcard of its own: the loop's prefixes have none)."""
    return f"{prefix}%"


def _dump(outcome: dict[str, Any]) -> str:
    """The outcome as ASCII JSON: escapes keep NUL and surrogates out of the TEXT column."""
    return json.dumps(outcome, default=str)


class _SqlLedger(SideEffectLedger):
    """The statements of the ledger; each backend runs them (`statement`).

    Running a statement returns the rows it affected and its first row (for `get`).
    """

    cross_process = True
    durable = True
    placeholder = "?"

    def __init__(self, saver: Any) -> None:
        self.saver = saver
        self.sql = _statements(self.placeholder)
        self._ready = False

    async def statement(self, name: str, params: tuple[Any, ...]) -> tuple[int, Any]:
        """Run one statement: `(rows affected, first row)` (a sync saver's blocks either way)."""
        return self.execute(name, params)

    def execute(self, name: str, params: tuple[Any, ...]) -> tuple[int, Any]:
        """Run one statement with blocking calls (sync savers)."""
        raise NotImplementedError

    async def operation(self, op: LedgerOp) -> Any:
        """Do one operation as statements."""
        if op.name == "forget_thread":
            await self.statement("forget", (op.thread_id,))
            return None
        if op.name == "stale_threads":
            _, rows = await self.statement("stale_threads", (op.before, op.after, op.limit))
            return [(str(thread), float(at)) for thread, at in _columns(rows)]
        if op.name == "call_keys":
            params = (op.thread_id, _like_prefix(op.prefix))
            _, rows = await self.statement("call_keys", params)
            return [str(call_key) for (call_key,) in _columns(rows)]
        key = _key(op.entry_key)
        if op.name == "get":
            return _entry((await self.statement("get", key))[1])
        if op.name == "claim":
            claimed, _ = await self.statement("claim", (*key, op.owner, _now()))
            return None if claimed == 1 else _entry((await self.statement("get", key))[1])
        if op.name == "finish":
            await self.statement("finish", (*key, op.owner, _now(), _dump(op.outcome or {})))
        elif op.name == "release":
            await self.statement("release", (*key, op.owner))
        else:
            await self.statement("take_over", (*key, op.owner, _now()))
        return None


def _now() -> float:
    return time.time()


def _on_saver_loop(saver: Any, coroutine: Any) -> Any:
    """Run a coroutine of an async checkpointer from sync code, on the saver's loop."""
    loop: asyncio.AbstractEventLoop = saver.loop
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop or blocked_loop() is loop:  # it would wait for itself
        coroutine.close()
        msg = (
            f"{type(saver).__name__} is async: run the loop with ainvoke/astream, "
            "or use its sync counterpart with invoke/stream"
        )
        raise RuntimeError(msg)
    return asyncio.run_coroutine_threadsafe(coroutine, loop).result()


class _AsyncSaverLedger(_SqlLedger):
    """A ledger on an async saver's connection: sync callers run each statement on its loop."""

    async def statement(self, name: str, params: tuple[Any, ...]) -> tuple[int, Any]:
        """Run one statement: awaited natively, or on the saver's loop from sync code."""
        return await by_mode(
            lambda: _on_saver_loop(self.saver, self.aexecute(name, params)),
            partial(self.aexecute, name, params),
        )

    async def aexecute(self, name: str, params: tuple[Any, ...]) -> tuple[int, Any]:
        """Run one statement on the saver's async connection."""
        raise NotImplementedError


# --- SQLite ------------------------------------------------------------------------------


class SqliteLedger(_SqlLedger):
    """The ledger of a `langgraph.checkpoint.sqlite.SqliteSaver`."""

    def execute(self, name: str, params: tuple[Any, ...]) -> tuple[int, Any]:
        """Run one statement on the saver's connection."""
        with self.saver.lock:
            conn = self.saver.conn
            if not self._ready:
                conn.execute(_CREATE)
                conn.commit()
                self._ready = True
            cursor = conn.execute(self.sql[name], params)
            try:
                return cursor.rowcount, _fetch(name, cursor)
            finally:
                cursor.close()
                conn.commit()


class AsyncSqliteLedger(_AsyncSaverLedger):
    """The ledger of a `langgraph.checkpoint.sqlite.aio.AsyncSqliteSaver`."""

    async def aexecute(self, name: str, params: tuple[Any, ...]) -> tuple[int, Any]:
        """Run one statement on the saver's connection."""
        if not self._ready:
            await self.saver.setup()  # opens the connection
        async with self.saver.lock:
            conn = self.saver.conn
            if not self._ready:
                await conn.execute(_CREATE)
                await conn.commit()
                self._ready = True
            async with conn.execute(self.sql[name], params) as cursor:
                row = await _afetch(name, cursor)
                count = cursor.rowcount
            await conn.commit()
            return count, row


# --- PostgreSQL --------------------------------------------------------------------------


def _is_pool(conn: Any) -> bool:
    """Whether a saver's `conn` is a psycopg pool rather than one connection."""
    return any(cls.__name__.endswith("ConnectionPool") for cls in type(conn).__mro__)


def _pool_of(saver: Any) -> Any:
    """The saver's psycopg pool, or None (one connection, or no saver)."""
    conn = getattr(saver, "conn", None)
    return conn if conn is not None and _is_pool(conn) else None


def _connection_lost(error: BaseException) -> bool:
    """Whether psycopg lost the connection, so the statement may run again on a fresh one.

    An `OperationalError`: `AdminShutdown` after a server restart, a closed socket. Every
    ledger statement may run again: a read, an upsert and a delete do what they did; a
    claim whose first try went through finds its own claim and reports the call as
    `unknown_outcome` rather than run it.
    """
    return any(
        cls.__name__ == "OperationalError" and cls.__module__.startswith("psycopg")
        for cls in type(error).__mro__
    )


def _ignore_concurrent_create(error: Exception) -> bool:
    name = type(error).__name__
    return name in ("UniqueViolation", "DuplicateTable", "DuplicateObject")


class PostgresLedger(_SqlLedger):
    """The ledger of a `langgraph.checkpoint.postgres.PostgresSaver`."""

    placeholder = "%s"

    @contextlib.contextmanager
    def _connection(self) -> Iterator[Any]:
        conn = self.saver.conn
        if _is_pool(conn):  # each caller gets its own connection
            with conn.connection() as pooled:
                yield pooled
        else:
            with self.saver.lock:
                yield conn

    def execute(self, name: str, params: tuple[Any, ...]) -> tuple[int, Any]:
        """Run one statement on the saver's connection (or one of its pool).

        With a pool, a statement that finds its connection lost (the server restarted)
        runs once more on a fresh one, after the pool dropped its broken connections.
        """
        try:
            return self._execute_once(name, params)
        except Exception as error:
            pool = _pool_of(self.saver)
            if pool is None or not _connection_lost(error):
                raise
            logger.warning("the ledger's connection was lost (%s); retrying once", error)
            pool.check()
            return self._execute_once(name, params)

    def _execute_once(self, name: str, params: tuple[Any, ...]) -> tuple[int, Any]:
        with self._connection() as conn:
            if not self._ready:
                try:
                    with conn.transaction():
                        conn.execute(_CREATE)
                except Exception as error:
                    if not _ignore_concurrent_create(error):
                        raise
                self._ready = True
            with conn.transaction(), conn.cursor() as cursor:
                cursor.execute(self.sql[name], params)
                return cursor.rowcount, _fetch(name, cursor)


class AsyncPostgresLedger(_AsyncSaverLedger):
    """The ledger of a `langgraph.checkpoint.postgres.aio.AsyncPostgresSaver`."""

    placeholder = "%s"

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[Any]:
        conn = self.saver.conn
        if _is_pool(conn):
            async with conn.connection() as pooled:
                yield pooled
        else:
            async with self.saver.lock:
                yield conn

    async def aexecute(self, name: str, params: tuple[Any, ...]) -> tuple[int, Any]:
        """Run one statement on the saver's connection (or one of its pool).

        With a pool, a statement that finds its connection lost (the server restarted)
        runs once more on a fresh one, after the pool dropped its broken connections.
        """
        try:
            async with self._connection() as conn:
                return await _arun_postgres(self, conn, name, params)
        except Exception as error:
            pool = _pool_of(self.saver)
            if pool is None or not _connection_lost(error):
                raise
            logger.warning("the ledger's connection was lost (%s); retrying once", error)
            await pool.check()
            async with self._connection() as conn:
                return await _arun_postgres(self, conn, name, params)


async def _arun_postgres(
    ledger: _SqlLedger, conn: Any, name: str, params: tuple[Any, ...]
) -> tuple[int, Any]:
    """Run one statement of a PostgreSQL ledger on an async psycopg connection."""
    if not ledger._ready:
        try:
            async with conn.transaction():
                await conn.execute(_CREATE)
        except Exception as error:
            if not _ignore_concurrent_create(error):
                raise
        ledger._ready = True
    async with conn.transaction(), conn.cursor() as cursor:
        await cursor.execute(ledger.sql[name], params)
        return cursor.rowcount, await _afetch(name, cursor)
