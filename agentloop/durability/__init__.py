"""Exactly once across crashes, replays, forks and concurrent workers.

Each call of a checkpointed run consults a side-effect ledger keyed by the thread, the
loop's namespace and the call's stable identity (see `identity`), never by a checkpoint
id. The ledger lives with the checkpointer: in memory for `InMemorySaver`, in a small
table of the database for the SQLite and PostgreSQL savers.
"""

from __future__ import annotations

import logging
import sys
import weakref
from typing import Any

from agentloop.durability._langgraph import Durability, current_checkpointer, current_durability
from agentloop.durability.guard import CallGuard, Settled
from agentloop.durability.identity import call_key, loop_namespace, run_identity
from agentloop.durability.late import LateLedgerWriter
from agentloop.durability.ledger import LedgerEntry, LedgerKey, MemoryLedger, SideEffectLedger
from agentloop.durability.sql import (
    AsyncPostgresLedger,
    AsyncSqliteLedger,
    PostgresLedger,
    SqliteLedger,
)
from agentloop.redaction import install_log_redaction

__all__ = [
    "AsyncPostgresLedger",
    "AsyncSqliteLedger",
    "CallGuard",
    "Durability",
    "LateLedgerWriter",
    "LedgerEntry",
    "LedgerKey",
    "MemoryLedger",
    "PostgresLedger",
    "SideEffectLedger",
    "SqliteLedger",
    "Settled",
    "call_key",
    "current_checkpointer",
    "current_durability",
    "ledger_for",
    "loop_namespace",
    "run_identity",
]

logger = install_log_redaction(logging.getLogger(__name__))

_ledgers: weakref.WeakKeyDictionary[Any, SideEffectLedger] = weakref.WeakKeyDictionary()
_warned: set[str] = set()


_SQL_LEDGERS: list[tuple[str, str, Any]] = [
    ("langgraph.checkpoint.sqlite.aio", "AsyncSqliteSaver", AsyncSqliteLedger),
    ("langgraph.checkpoint.sqlite", "SqliteSaver", SqliteLedger),
    ("langgraph.checkpoint.postgres.aio", "AsyncPostgresSaver", AsyncPostgresLedger),
    ("langgraph.checkpoint.postgres", "PostgresSaver", PostgresLedger),
]
"""Checkpointers whose database can hold the ledger (their packages are optional)."""


def _sql_ledger(saver: Any) -> SideEffectLedger | None:
    for module_name, class_name, ledger_class in _SQL_LEDGERS:
        module = sys.modules.get(module_name)  # a saver of a module never imported can't exist
        if module is not None and isinstance(saver, getattr(module, class_name)):
            ledger: SideEffectLedger = ledger_class(saver)
            return ledger
    return None


def ledger_for(checkpointer: Any) -> SideEffectLedger:
    """Return the ledger that goes with a checkpointer (one per checkpointer object).

    SQLite and PostgreSQL savers keep it in their database, so claims hold across
    processes; any other checkpointer gets a ledger in this process's memory, and a
    log line says so once.
    """
    ledger = _ledgers.get(checkpointer)
    if ledger is not None:
        return ledger
    ledger = _sql_ledger(checkpointer)
    if ledger is None:
        ledger = MemoryLedger()
        name = type(checkpointer).__name__
        if name != "InMemorySaver" and name not in _warned:
            _warned.add(name)
            logger.info(
                "%s: agentloop keeps its side-effect ledger in this process; claims do not "
                "hold across processes (pass GovernanceOptions(ledger=...) for that)",
                name,
            )
    _ledgers[checkpointer] = ledger
    return ledger
