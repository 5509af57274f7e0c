"""Exactly once across crashes, replays, forks, concurrent workers and server restarts.

Each call of a checkpointed run consults a side-effect ledger keyed by the thread, the
loop's namespace and the call's stable identity (see `identity`: its place in the plan,
which survives a deploy of new code, then its tool and arguments), never by a checkpoint
id. The ledger lives with the checkpointer (see `placement`): in a small table of the
database for the SQLite and PostgreSQL savers, in the server's PostgreSQL database
under the LangGraph server (in an SQLite file beside `langgraph dev`'s state when it has
none), in memory for `InMemorySaver`. A run the server retries keeps the identity its
first attempt recorded (see `retry`). The entries of threads the checkpointer no longer
holds are swept at the start of later runs (see `retention`).

A ledger writes each operation once, as a coroutine whose I/O blocks when no event loop
runs (`by_mode`): `await ledger.operation(op)` from async code, `ledger.perform(op)` or
`run_blocking(...)` from sync code.

A ledger knows no graph. May import: `agentloop.base`, `agentloop.errors`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentloop.base.sync import by_mode, run_blocking
    from agentloop.durability._langgraph import (
        Durability,
        current_checkpointer,
        current_durability,
        resuming,
        save_step_input,
    )
    from agentloop.durability.guard import CallGuard, Settled
    from agentloop.durability.idempotency import (
        IDEMPOTENCY_KEY_TTL_S,
        idempotency_scope,
        settle_idempotency_key,
    )
    from agentloop.durability.identity import (
        IDEMPOTENCY_KEY_MAX_CHARS,
        call_key,
        ledger_thread,
        loop_namespace,
        position_key,
        run_identity,
    )
    from agentloop.durability.late import LateLedgerWriter
    from agentloop.durability.ledger import (
        LedgerEntry,
        LedgerKey,
        LedgerOp,
        MemoryLedger,
        SideEffectLedger,
    )
    from agentloop.durability.placement import (
        durability_gap,
        is_server_checkpointer,
        ledger_for,
        run_ledger,
    )
    from agentloop.durability.retention import (
        LedgerRetention,
        LedgerSweeps,
        SweptPage,
        hold_key,
        sweep_ledger,
        sweep_page,
    )
    from agentloop.durability.retry import (
        RunAttempt,
        RunRecords,
        run_attempt,
        run_record_key,
        settle_run_identity,
        started_before,
    )
    from agentloop.durability.server_database import (
        PostgresUriLedger,
        SqliteFileLedger,
        check_server_database,
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
    "IDEMPOTENCY_KEY_MAX_CHARS",
    "IDEMPOTENCY_KEY_TTL_S",
    "AsyncPostgresLedger",
    "AsyncSqliteLedger",
    "CallGuard",
    "Durability",
    "LateLedgerWriter",
    "LedgerEntry",
    "LedgerKey",
    "LedgerOp",
    "LedgerRetention",
    "LedgerSweeps",
    "MemoryLedger",
    "PostgresLedger",
    "PostgresUriLedger",
    "RunAttempt",
    "RunRecords",
    "SideEffectLedger",
    "SqliteFileLedger",
    "SqliteLedger",
    "Settled",
    "StoreLedger",
    "SweptPage",
    "by_mode",
    "call_key",
    "check_server_database",
    "current_checkpointer",
    "current_durability",
    "durability_gap",
    "hold_key",
    "idempotency_scope",
    "is_server_checkpointer",
    "ledger_for",
    "ledger_thread",
    "loop_namespace",
    "position_key",
    "resuming",
    "run_attempt",
    "run_blocking",
    "run_identity",
    "run_ledger",
    "run_record_key",
    "save_step_input",
    "server_database_uri",
    "settle_idempotency_key",
    "settle_run_identity",
    "started_before",
    "sweep_ledger",
    "sweep_page",
]


def __getattr__(name: str) -> Any:
    """Load the ledgers on the first use of a public name.

    Importing one light submodule (`identity`, which the bundled servers use) runs this
    package's `__init__` first; the ledgers, LangGraph and the database drivers wait until
    a name of the package is used.
    """
    if name not in __all__:
        msg = f"module 'agentloop.durability' has no attribute {name!r}"
        raise AttributeError(msg)
    from agentloop.base import sync as _sync
    from agentloop.durability import (
        _langgraph,
        guard,
        idempotency,
        identity,
        late,
        ledger,
        placement,
        retention,
        retry,
        server_database,
        sql,
        store,
    )

    modules = (_sync, _langgraph, guard, idempotency, identity, late, ledger, placement)
    for module in (*modules, retention, retry, server_database, sql, store):
        if name in module.__all__:
            value = getattr(module, name)
            globals()[name] = value
            return value
    msg = f"agentloop.durability lists {name!r} but no submodule defines it"
    raise AttributeError(msg)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
