"""Ledgers kept in a small table of an SQLite or PostgreSQL checkpointer's own database.

The table `agentloop_ledger` lives beside LangGraph's checkpoint tables and is reached
through the checkpointer's own connection (or pool) and lock. A claim is an
`INSERT ... ON CONFLICT DO NOTHING`, which both databases make atomic across processes:
two workers resuming one thread from two processes claim a call once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

from agentloop.durability.ledger import LedgerEntry, LedgerKey, SideEffectLedger

__all__ = ["AsyncPostgresLedger", "AsyncSqliteLedger", "PostgresLedger", "SqliteLedger"]

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
}


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


def _dump(outcome: dict[str, Any]) -> str:
    """The outcome as ASCII JSON: escapes keep NUL and surrogates out of the TEXT column."""
    return json.dumps(outcome, default=str)


class _SqlLedger(SideEffectLedger):
    """The statements of the ledger, over a `_run(statement, params)` each subclass supplies."""

    cross_process = True
    durable = True
    placeholder = "?"

    def __init__(self, saver: Any) -> None:
        self.saver = saver
        self.sql = _statements(self.placeholder)
        self._ready = False

    # subclasses: run one statement, return (rows affected, first row)
    def _run(self, name: str, params: tuple[Any, ...]) -> tuple[int, Any]:
        raise NotImplementedError

    async def _arun(self, name: str, params: tuple[Any, ...]) -> tuple[int, Any]:
        return self._run(name, params)

    def get(self, key: LedgerKey) -> LedgerEntry | None:
        """Return the entry of a call, or None."""
        return _entry(self._run("get", _key(key))[1])

    def claim(self, key: LedgerKey, owner: str) -> LedgerEntry | None:
        """Claim a call: None when this owner won, else the entry that was there."""
        claimed, _ = self._run("claim", (*_key(key), owner, _now()))
        return None if claimed == 1 else self.get(key)

    def finish(self, key: LedgerKey, owner: str, outcome: dict[str, Any]) -> None:
        """Store a call's outcome."""
        self._run("finish", (*_key(key), owner, _now(), _dump(outcome)))

    def release(self, key: LedgerKey, owner: str) -> None:
        """Remove this owner's claim of an unfinished call."""
        self._run("release", (*_key(key), owner))

    def take_over(self, key: LedgerKey, owner: str) -> None:
        """Make `owner` the claimant of a call and clear its outcome."""
        self._run("take_over", (*_key(key), owner, _now()))

    def forget_thread(self, thread_id: str) -> None:
        """Drop every entry of a thread (after `checkpointer.delete_thread`, say)."""
        self._run("forget", (thread_id,))

    async def aget(self, key: LedgerKey) -> LedgerEntry | None:
        """Async `get`."""
        return _entry((await self._arun("get", _key(key)))[1])

    async def aclaim(self, key: LedgerKey, owner: str) -> LedgerEntry | None:
        """Async `claim`."""
        claimed, _ = await self._arun("claim", (*_key(key), owner, _now()))
        return None if claimed == 1 else await self.aget(key)

    async def afinish(self, key: LedgerKey, owner: str, outcome: dict[str, Any]) -> None:
        """Async `finish`."""
        await self._arun("finish", (*_key(key), owner, _now(), _dump(outcome)))

    async def arelease(self, key: LedgerKey, owner: str) -> None:
        """Async `release`."""
        await self._arun("release", (*_key(key), owner))

    async def atake_over(self, key: LedgerKey, owner: str) -> None:
        """Async `take_over`."""
        await self._arun("take_over", (*_key(key), owner, _now()))


def _now() -> float:
    return time.time()


def _on_saver_loop(saver: Any, coroutine: Any) -> Any:
    """Run a coroutine of an async checkpointer from sync code, on the saver's loop."""
    loop: asyncio.AbstractEventLoop = saver.loop
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        coroutine.close()
        msg = (
            f"{type(saver).__name__} is async: run the loop with ainvoke/astream, "
            "or use its sync counterpart with invoke/stream"
        )
        raise RuntimeError(msg)
    return asyncio.run_coroutine_threadsafe(coroutine, loop).result()


# --- SQLite ------------------------------------------------------------------------------


class SqliteLedger(_SqlLedger):
    """The ledger of a `langgraph.checkpoint.sqlite.SqliteSaver`."""

    def _run(self, name: str, params: tuple[Any, ...]) -> tuple[int, Any]:
        with self.saver.lock:
            conn = self.saver.conn
            if not self._ready:
                conn.execute(_CREATE)
                conn.commit()
                self._ready = True
            cursor = conn.execute(self.sql[name], params)
            try:
                row = cursor.fetchone() if name == "get" else None
                return cursor.rowcount, row
            finally:
                cursor.close()
                conn.commit()


class AsyncSqliteLedger(_SqlLedger):
    """The ledger of a `langgraph.checkpoint.sqlite.aio.AsyncSqliteSaver`."""

    def _run(self, name: str, params: tuple[Any, ...]) -> tuple[int, Any]:
        result: tuple[int, Any] = _on_saver_loop(self.saver, self._arun(name, params))
        return result

    async def _arun(self, name: str, params: tuple[Any, ...]) -> tuple[int, Any]:
        if not self._ready:
            await self.saver.setup()  # opens the connection
        async with self.saver.lock:
            conn = self.saver.conn
            if not self._ready:
                await conn.execute(_CREATE)
                await conn.commit()
                self._ready = True
            async with conn.execute(self.sql[name], params) as cursor:
                row = await cursor.fetchone() if name == "get" else None
                count = cursor.rowcount
            await conn.commit()
            return count, row


# --- PostgreSQL --------------------------------------------------------------------------


def _is_pool(conn: Any) -> bool:
    """Whether a saver's `conn` is a psycopg pool rather than one connection."""
    return any(cls.__name__.endswith("ConnectionPool") for cls in type(conn).__mro__)


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

    def _run(self, name: str, params: tuple[Any, ...]) -> tuple[int, Any]:
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
                row = cursor.fetchone() if name == "get" else None
                return cursor.rowcount, row


class AsyncPostgresLedger(_SqlLedger):
    """The ledger of a `langgraph.checkpoint.postgres.aio.AsyncPostgresSaver`."""

    placeholder = "%s"

    def _run(self, name: str, params: tuple[Any, ...]) -> tuple[int, Any]:
        result: tuple[int, Any] = _on_saver_loop(self.saver, self._arun(name, params))
        return result

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[Any]:
        conn = self.saver.conn
        if _is_pool(conn):
            async with conn.connection() as pooled:
                yield pooled
        else:
            async with self.saver.lock:
                yield conn

    async def _arun(self, name: str, params: tuple[Any, ...]) -> tuple[int, Any]:
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
        row = await cursor.fetchone() if name == "get" else None
        return cursor.rowcount, row
