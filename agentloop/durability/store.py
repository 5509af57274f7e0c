"""A ledger kept in a LangGraph store: the durable state the LangGraph server gives every graph.

Under `langgraph dev` and LangGraph Server the graph is compiled without a checkpointer
or store of its own; the server lends it both for each run. Its store (`runtime.store`,
`langgraph.config.get_store()`) outlives the server process: the dev server writes it to
`.langgraph_api/` about every 10 s (best effort: a kill inside that window loses what was
not written), LangGraph Server keeps it in PostgreSQL.

A `BaseStore` has no insert-if-absent, so a claim is a read, a write and a read back,
with the workers of one process taking turns (a worker that finds another of its
process claiming the call sees it claimed). That is exact within one process (so for
runs of different threads sharing an idempotency key under `langgraph dev`), and across
processes when no two runs of one thread call the ledger at the same time, which is
what the server guarantees: it starts a thread's next run only once the previous one has
stopped running, whatever the multitask strategy (`reject` refuses the new run,
`enqueue` queues it, `interrupt` and `rollback` cancel the running one first; a call the
cancelled run started and did not finish stays claimed, so a later resume of that run
reports it as `unknown_outcome`; `rollback` deletes the run and its checkpoints but not
its ledger entries, since its effects happened). Two processes resuming one thread
outside the server's control need a ledger with atomic claims (`PostgresLedger`,
`SqliteLedger`).
"""

from __future__ import annotations

import hashlib
import threading
import time
from typing import Any

from langgraph.config import get_store
from langgraph.store.base import BaseStore, Item

from agentloop.base.sync import by_mode
from agentloop.durability.ledger import LedgerEntry, LedgerKey, LedgerOp, SideEffectLedger

__all__ = ["LEDGER_NAMESPACE", "StoreLedger", "is_memory_only"]

LEDGER_NAMESPACE = "agentloop_ledger"
"""The first label of every namespace the ledger writes: `("agentloop_ledger", thread)`."""


def _thread_label(thread_id: str) -> str:
    """The thread id as a namespace label (labels may not be empty or hold "." or NUL)."""
    if thread_id and "." not in thread_id and "\x00" not in thread_id:
        return thread_id
    return "sha256-" + hashlib.sha256(thread_id.encode("utf-8", "surrogatepass")).hexdigest()


def _where(key: LedgerKey) -> tuple[tuple[str, ...], str]:
    return (LEDGER_NAMESPACE, _thread_label(key.thread_id)), f"{key.namespace}/{key.call_key}"


_claiming: set[tuple[int, tuple[tuple[str, ...], str]]] = set()
"""Entries a worker of this process is claiming right now, by store."""
_claiming_lock = threading.Lock()


def _value(owner: str, started_at: float, outcome: dict[str, Any] | None) -> dict[str, Any]:
    return {"owner": owner, "started_at": started_at, "outcome": outcome}


def _entry(item: Item | None) -> LedgerEntry | None:
    if item is None:
        return None
    value = item.value
    return LedgerEntry(str(value["owner"]), float(value["started_at"]), value.get("outcome"))


def _won(entry: LedgerEntry | None, owner: str) -> bool:
    return entry is not None and entry.owner == owner and entry.outcome is None


def is_memory_only(store: BaseStore) -> bool:
    """Whether a store keeps its data in this process only (LangGraph's `InMemoryStore`)."""
    return type(store).__module__ == "langgraph.store.memory"


class StoreLedger(SideEffectLedger):
    """The ledger of a LangGraph `BaseStore`, the default under the LangGraph server.

    Args:
        store: The store; None reads the store of the running graph (`get_store()`) at
            each call, which is what a graph served by `langgraph dev` or LangGraph Server
            gets.
    """

    cross_process = False  # exact only while one run at a time uses a thread (see above)

    def __init__(self, store: BaseStore | None = None) -> None:
        self._store = store

    @property
    def durable(self) -> bool:  # type: ignore[override]
        """Whether entries outlive this process (not for LangGraph's `InMemoryStore`)."""
        store = self._store if self._store is not None else _running_store(required=False)
        return store is not None and not is_memory_only(store)

    @property
    def identity(self) -> int:
        """The store's: every `StoreLedger` over one store reaches the same entries."""
        return id(self.store)

    @property
    def store(self) -> BaseStore:
        """The store entries are kept in."""
        return self._store if self._store is not None else _running_store(required=True)

    async def operation(self, op: LedgerOp) -> Any:
        """Do one operation as calls of the store (`_call`); a store cannot list by age."""
        if op.name in ("stale_threads", "call_keys"):
            return None  # a namespace may name its thread by a digest: not listed
        if op.name == "forget_thread":
            namespace = (LEDGER_NAMESPACE, _thread_label(op.thread_id))
            while items := (await self._call("search", namespace, limit=100)):
                for item in items:
                    await self._call("delete", namespace, item.key)
            return None
        where = _where(op.entry_key)
        existing = None
        if op.name != "take_over":
            existing = _entry(await self._call("get", *where))
        if op.name == "get":
            return existing
        if op.name == "claim":
            if existing is not None:
                return existing
            claiming = (self.identity, where)
            with _claiming_lock:  # two workers of this process: one claims, one waits
                busy = claiming in _claiming
                _claiming.add(claiming)
            if busy:
                return LedgerEntry(op.owner, time.time())
            try:
                value = _value(op.owner, time.time(), None)
                await self._call("put", *where, value, index=False)
                confirmed = _entry(await self._call("get", *where))
            finally:
                with _claiming_lock:
                    _claiming.discard(claiming)
            return None if _won(confirmed, op.owner) else confirmed
        if op.name == "release":
            if _won(existing, op.owner):
                await self._call("delete", *where)
            return None
        started = existing.started_at if existing is not None else time.time()
        outcome = op.outcome if op.name == "finish" else None
        await self._call("put", *where, _value(op.owner, started, outcome), index=False)
        return None

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Call `BaseStore.<method>` (`get`, `put`, `delete`, `search`) or await its `a<method>`.

        The store is looked up when the step runs (`store` may read the running graph's).
        """
        return await by_mode(
            lambda: getattr(self.store, method)(*args, **kwargs),
            lambda: getattr(self.store, f"a{method}")(*args, **kwargs),
        )


def _running_store(*, required: bool) -> Any:
    try:
        store = get_store()
    except RuntimeError:  # outside a graph run
        store = None
    if store is None and required:
        msg = (
            "StoreLedger() without a store reads the store of the running graph: compile "
            "the graph with store=..., run it under the LangGraph server, or pass a store"
        )
        raise RuntimeError(msg)
    return store
