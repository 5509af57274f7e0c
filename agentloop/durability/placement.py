"""Where a run's side-effect ledger lives, chosen from its checkpointer and store.

In order:
1. a ledger given with `GovernanceOptions(ledger=...)`;
2. an SQLite or PostgreSQL saver (or a subclass): a table in the same database;
3. a checkpointer of the LangGraph server (`langgraph dev`, LangGraph Server, any
   `langgraph_runtime_*` edition), recognized by the module of its type: the server's
   PostgreSQL database when `POSTGRES_URI` or `DATABASE_URI` names one
   (`PostgresUriLedger`, atomic claims); under `langgraph dev` (the in-memory edition)
   otherwise, an SQLite file beside the server's state (`SqliteFileLedger`, committed
   before each call with side effects starts); else the store the server lends the run
   (`StoreLedger`);
4. anything else: this process's memory (`MemoryLedger`).

A checkpointer that keeps checkpoints beyond this process but ends up with a ledger
that does not (`durability_gap`) is reported: exactly-once then holds only while the
process lives.
"""

from __future__ import annotations

import functools
import sys
import weakref
from typing import Any

from langgraph.checkpoint.memory import PersistentDict
from langgraph.store.base import BaseStore

from agentloop.durability._langgraph import current_checkpointer
from agentloop.durability.ledger import MemoryLedger, SideEffectLedger
from agentloop.durability.server_database import (
    PostgresUriLedger,
    SqliteFileLedger,
    dev_ledger_path,
    server_database_uri,
)
from agentloop.durability.sql import (
    AsyncPostgresLedger,
    AsyncSqliteLedger,
    PostgresLedger,
    SqliteLedger,
)
from agentloop.durability.store import StoreLedger

__all__ = [
    "DEV_SERVER_MODULE_PREFIX",
    "SERVER_MODULE_PREFIXES",
    "durability_gap",
    "is_dev_server_checkpointer",
    "is_server_checkpointer",
    "ledger_for",
    "run_ledger",
]

_ledgers: weakref.WeakKeyDictionary[Any, SideEffectLedger] = weakref.WeakKeyDictionary()
_database_ledgers: dict[str, PostgresUriLedger] = {}
_file_ledgers: dict[str, SqliteFileLedger] = {}

_SQL_LEDGERS: list[tuple[str, str, Any]] = [
    ("langgraph.checkpoint.sqlite.aio", "AsyncSqliteSaver", AsyncSqliteLedger),
    ("langgraph.checkpoint.sqlite", "SqliteSaver", SqliteLedger),
    ("langgraph.checkpoint.postgres.aio", "AsyncPostgresSaver", AsyncPostgresLedger),
    ("langgraph.checkpoint.postgres", "PostgresSaver", PostgresLedger),
]
"""Checkpointers whose database can hold the ledger (their packages are optional)."""

SERVER_MODULE_PREFIXES = ("langgraph_runtime_", "langgraph_api.")
"""Modules of the LangGraph server's checkpointers: `langgraph_runtime_inmem` (`langgraph
dev`), `langgraph_runtime_postgres` (LangGraph Server) and other runtime editions."""
DEV_SERVER_MODULE_PREFIX = "langgraph_runtime_inmem"
"""The module of `langgraph dev`'s checkpointer, which writes its state to files every 10 s."""


def _sql_ledger(saver: Any) -> SideEffectLedger | None:
    for module_name, class_name, ledger_class in _SQL_LEDGERS:
        module = sys.modules.get(module_name)  # a saver of a module never imported can't exist
        if module is not None and isinstance(saver, getattr(module, class_name)):
            ledger: SideEffectLedger = ledger_class(saver)
            return ledger
    return None


def is_server_checkpointer(checkpointer: Any) -> bool:
    """Whether a checkpointer is the LangGraph server's (by the modules of its type's MRO)."""
    return _from_modules(type(checkpointer).__mro__, SERVER_MODULE_PREFIXES)


def is_dev_server_checkpointer(checkpointer: Any) -> bool:
    """Whether a checkpointer is `langgraph dev`'s (langgraph-runtime-inmem)."""
    return _from_modules(type(checkpointer).__mro__, DEV_SERVER_MODULE_PREFIX)


@functools.cache
def _from_modules(mro: tuple[type, ...], prefixes: str | tuple[str, ...]) -> bool:
    """Whether a class of `mro` (a class's, itself first) comes from modules `prefixes` name.

    Asked on every guarded call; a fact of the class, so worked out once per class.
    """
    return any(cls.__module__.startswith(prefixes) for cls in mro)


def _memory_only(checkpointer: Any) -> bool:
    """Whether checkpoints live in this process only: LangGraph's own `InMemorySaver`."""
    if type(checkpointer).__module__ != "langgraph.checkpoint.memory":
        return False
    return not isinstance(getattr(checkpointer, "storage", None), PersistentDict)


def _server_ledger(checkpointer: Any, store: BaseStore | None) -> SideEffectLedger | None:
    """The server's database (one ledger per URI), `langgraph dev`'s file, else the store."""
    uri = server_database_uri()
    if uri is not None:
        return _database_ledgers.setdefault(uri, PostgresUriLedger(uri))
    if is_dev_server_checkpointer(checkpointer):
        path = str(dev_ledger_path())  # not resolved here: no file system call on a loop
        ledger = _file_ledgers.get(path)
        if ledger is None:
            ledger = _file_ledgers.setdefault(path, SqliteFileLedger(path))
        return ledger
    return None if store is None else StoreLedger(store)  # lent per run: not cached


def ledger_for(checkpointer: Any, store: BaseStore | None = None) -> SideEffectLedger:
    """Return the ledger that goes with a checkpointer (and the run's store).

    SQLite and PostgreSQL savers keep it in their database, so claims hold across
    processes; the LangGraph server's checkpointers keep it in the server's PostgreSQL
    database (`POSTGRES_URI`, `DATABASE_URI`), else (`langgraph dev`) in an SQLite file
    beside the server's state, else in the store it lends the run;
    any other checkpointer gets one ledger in this process's memory per checkpointer
    object.
    """
    cached = _ledgers.get(checkpointer)
    if cached is not None and not isinstance(cached, MemoryLedger):
        return cached  # the saver's own database
    if cached is None:
        sql = _sql_ledger(checkpointer)
        if sql is not None:
            _ledgers[checkpointer] = sql
            return sql
    if is_server_checkpointer(checkpointer):
        served = _server_ledger(checkpointer, store)
        if served is not None:
            return served
    if cached is None:
        cached = _ledgers[checkpointer] = MemoryLedger()
    return cached


def run_ledger(
    explicit: SideEffectLedger | None, store: BaseStore | None
) -> SideEffectLedger | None:
    """Return the ledger of the running graph: the explicit one, else `ledger_for` its checkpointer.

    None when neither is there (a run without a checkpointer has nothing to resume).
    """
    if explicit is not None:
        return explicit
    saver = current_checkpointer()
    return None if saver is None else ledger_for(saver, store)


def durability_gap(checkpointer: Any, ledger: SideEffectLedger) -> str | None:
    """Say why exactly-once will not survive a restart, or None when it will (or cannot matter).

    A checkpointer that keeps its checkpoints beyond this process (a file, a database,
    the LangGraph server) with a ledger that does not lets a resumed, retried or
    replayed run repeat a call with side effects after a restart. LangGraph's own
    `InMemorySaver` loses its checkpoints with the process, so there is nothing to repeat.
    """
    if ledger.durable or _memory_only(checkpointer):
        return None
    saver = f"{type(checkpointer).__module__}.{type(checkpointer).__qualname__}"
    return (
        f"{saver} keeps checkpoints beyond this process, but the side-effect ledger "
        f"({type(ledger).__name__}) does not: after a restart, a resumed, retried or replayed "
        "run may repeat a call with side effects. Pass GovernanceOptions(ledger=...) with a "
        "durable ledger, or run where the loop keeps one (see docs/how-to/deploy.md)"
    )
