"""Whose results a cached entry may answer: the identity of the run that stored it.

By default a cached or last good result only answers calls made with the same identity:
the same thread, the same `context` and the same user keys of `configurable` (a tool
that reads `config["configurable"]["user_id"]` never sees another user's entry). A tool
whose results are the same for everyone declares `ToolPolicy(cache_scope="global")`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
from collections.abc import Mapping
from typing import Any, Literal

__all__ = ["CacheScope", "RunIdentities", "run_identities", "run_identity", "scoped_key"]

CacheScope = Literal["identity", "global"]
"""`identity` (default): entries are kept per thread, context and user configuration;
`global`: one entry per call for every run of the loop (for data that is the same for
everyone)."""

_RUN_KEYS = frozenset(
    {
        "checkpoint_id",
        "checkpoint_ns",
        "checkpoint_map",
        "run_id",
        "task_id",
        "agentloop_call",
        "idempotency_key",
        "langgraph_request_id",
        "langgraph_version",
        "langgraph_api_version",
        "langgraph_plan",
        "langgraph_host",
        "langgraph_api_url",
        "langsmith-trace",
        "langsmith-metadata",
        "langsmith-tags",
        "langsmith-project",
        "x-request-id",
    }
)
"""`configurable` keys that change from run to run and name no one (LangGraph's own and
the LangGraph server's tracing headers). Every other key counts: one that does not name a
user only makes runs miss each other's entries."""


def _plain(value: Any) -> Any:
    try:
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return {"__dataclass__": type(value).__qualname__, **dataclasses.asdict(value)}
        model_dump = getattr(value, "model_dump", None)
        if callable(model_dump):
            return {"__model__": type(value).__qualname__, **model_dump()}
    except Exception:  # an odd context counts by its repr
        return repr(value)
    return value


_SCALARS = (str, int, float, bool, type(None))


class RunIdentities:
    """The identities one loop computed from plain values (`LoopParts.identities`).

    Each entry is a run's identity with and without its thread (`run_identities`). The
    oldest are dropped first beyond `entries`; a lookup (one for every tool call) is
    one dict read, without a lock.

    Args:
        entries: How many it keeps.
    """

    def __init__(self, entries: int = 1024) -> None:
        self._entries = entries
        self._digests: dict[tuple[Any, ...], tuple[str, str]] = {}
        self._lock = threading.Lock()  # writers only: a dict read is atomic

    def __len__(self) -> int:
        """How many identities it keeps."""
        return len(self._digests)

    def get(self, key: tuple[Any, ...]) -> tuple[str, str] | None:
        """The digests kept for a key."""
        try:
            return self._digests[key]
        except KeyError:
            return None

    def keep(self, key: tuple[Any, ...], digest: tuple[str, str]) -> None:
        """Keep a key's digests."""
        with self._lock:
            self._digests.pop(key, None)
            while self._digests and len(self._digests) >= self._entries:
                del self._digests[next(iter(self._digests))]
            self._digests[key] = digest


def _user_configurable(
    configurable: Mapping[str, Any], context: Any = None
) -> tuple[dict[str, Any], tuple[Any, ...] | None]:
    """The user's own configuration, and a key for the digests of plain values (one pass).

    LangGraph's own keys (they start with `__`) and the run's are left out, and so is the
    server's user object when its id says who (`langgraph_auth_user_id`). The key is None
    when a value could change in place (not a scalar). It holds each value's type (1,
    1.0 and True are equal keys but different JSON) in the config's order: the same
    values in another order only make another entry.
    """
    server_user = "langgraph_auth_user_id" in configurable
    users: dict[str, Any] = {}
    plain = type(context) in _SCALARS
    items: tuple[Any, ...] = ()
    for name, value in configurable.items():  # no call for each key: one runs per tool call
        if name[:2] == "__" or name in _RUN_KEYS:
            continue
        if server_user and name == "langgraph_auth_user":
            continue
        users[name] = value
        if plain:
            kind = type(value)
            if kind in _SCALARS:
                items += ((name, kind.__name__, value),)
            else:
                plain = False
    return users, ((type(context).__name__, context, items) if plain else None)


def _digest(configurable: dict[str, Any], context: Any) -> str:
    identity = {"configurable": configurable, "context": _plain(context)}
    try:
        body = json.dumps(identity, sort_keys=True, default=repr)
    except (TypeError, ValueError, RecursionError):
        body = repr(identity)
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def run_identities(
    config: Mapping[str, Any] | None, context: Any = None, *, known: RunIdentities | None = None
) -> tuple[str, str]:
    """Return `run_identity` of a run with its thread counted, and without (the owner's).

    Both come from one reading of the config, and a loop's `known` keeps them together.
    """
    configurable, key = _user_configurable((config or {}).get("configurable") or {}, context)
    if known is not None and key is not None:
        found = known.get(key)
        if found is not None:
            return found
    identity = _digest(configurable, context)
    if "thread_id" in configurable:
        configurable.pop("thread_id")
        digests = (identity, _digest(configurable, context))
    else:
        digests = (identity, identity)
    if known is not None and key is not None:
        known.keep(key, digests)
    return digests


def run_identity(
    config: Mapping[str, Any] | None,
    context: Any = None,
    *,
    thread: bool = True,
    known: RunIdentities | None = None,
) -> str:
    """Return a digest of who a run serves: its thread, its context, its user configuration.

    Values that are not JSON count by their `repr`, so two different objects never share
    an identity (at worst, a run misses the cache).

    Args:
        config: The run's config (its `configurable`, thread included).
        context: The run's `context`.
        thread: Count the thread (False: the user's identity across their threads).
        known: The loop's identities: one of plain values is computed once there.

    Returns:
        A hex digest; equal for runs of the same thread, context and configuration.
    """
    if known is not None:
        return run_identities(config, context, known=known)[0 if thread else 1]
    configurable, _ = _user_configurable((config or {}).get("configurable") or {})
    if not thread:
        configurable.pop("thread_id", None)
    return _digest(configurable, context)


def scoped_key(key: str, identity: str, scope: CacheScope) -> str:
    """Return a call's cache key within a scope (`key` itself when global)."""
    return key if scope == "global" else f"{identity}|{key}"
