"""Stable identities of runs and calls: the same across resume, replay, fork, re-plan and deploy.

Checkpoint ids change on every replay or fork, so they cannot name a call. A run is
named by what starts it (the call of a parent loop it serves, the human message it
answers, or its turn on the thread and its request). A call has two names:

- `position_key`: its run, its round, its position in the plan and the command written
  there, as the planner wrote it (tool name and arguments, before any repair). The plan
  is kept in the checkpoint, so this name does not depend on the loop's code: a deploy
  that renames an argument or a tool, declares a tool read-only or removes it finds the
  call under the same name. It is the key of the call's ledger entry. A fork that edits
  the command at a position makes a new call.
- `call_key`: its run, its round, its tool, its canonical validated arguments and an
  occurrence number for deliberate repeats within the round. A planner that plans a
  round again (after a crash under `durability="exit"`, say) in another order finds the
  call under this name, so the ledger looks it up there too. It is also the
  `idempotency_key` the tool receives.

A run is also named by who asked, so two users' identical requests on one thread at once
are two runs. A run submitted with an idempotency key names its calls by the key (see
`agentloop.durability.idempotency`) instead of its own run, and keeps their ledger
entries under the key instead of its thread: the same request submitted twice with one
key by one user, on one thread or two, finds the first submission's calls.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping
from typing import Any

__all__ = [
    "IDEMPOTENCY_ARGUMENT",
    "IDEMPOTENCY_KEY_MAX_CHARS",
    "KEY_THREAD_PREFIX",
    "OWNER_META_KEY",
    "call_key",
    "ledger_thread",
    "loop_namespace",
    "name_digest",
    "position_key",
    "run_identity",
]

IDEMPOTENCY_KEY_MAX_CHARS = 256
"""The longest idempotency key a run accepts."""

KEY_THREAD_PREFIX = "idempotency:"
"""How the ledger's thread of an idempotency key begins (`ledger_thread`)."""

IDEMPOTENCY_ARGUMENT = "idempotency_key"
"""An argument the loop fills with the call's stable identity (`call_key`) when a tool
declares it."""

OWNER_META_KEY = "agentloop/owner"
"""The `_meta` key of a tool call that names whom the call serves (a digest of the run's
user context, the same across that user's threads), sent to servers configured with
`"send_owner": true`: the notes server keeps each owner's notes apart."""

_KEY_JSON = json.JSONEncoder(sort_keys=True, ensure_ascii=False, default=str)
"""The canonical JSON of arguments in a key (`json.dumps` with these options, whose
encoder is built once rather than for every call)."""


def _digest(*parts: str, size: int = 24) -> str:
    text = "\x1f".join(parts)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:size]


def loop_namespace(checkpoint_ns: str) -> str:
    """Return a checkpoint namespace with LangGraph's task ids removed.

    `"agent:1f0e...|call_tool:9a2b..."` becomes `"agent|call_tool"`, which stays the same
    when a replay gives the tasks new ids.
    """
    return "|".join(part.split(":", 1)[0] for part in checkpoint_ns.split("|") if part)


def run_identity(thread_id: str | None, namespace: str, anchor: str) -> str:
    """Name a run of the loop.

    Args:
        thread_id: The run's thread; None without a checkpointer, when nothing can be
            resumed and every run gets a fresh random id.
        namespace: The loop's namespace (`loop_namespace`).
        anchor: What starts the run: a parent call's key, else who asked with a human
            message id or the thread's turn number and a digest of the request.

    Returns:
        A 16-character id.
    """
    if thread_id is None:
        return uuid.uuid4().hex[:16]
    return _digest(thread_id, namespace, anchor, size=16)


def name_digest(*parts: str) -> str:
    """A 16-character name made of parts (a digest: equal parts, equal names)."""
    return _digest(*parts, size=16)


def ledger_thread(scope: str) -> str:
    """Where the ledger keeps the calls of a keyed run, in place of the thread's id."""
    return f"{KEY_THREAD_PREFIX}{scope}"


def call_key(
    run_id: str,
    round_label: str,
    tool_name: str,
    arguments: Mapping[str, Any],
    occurrence: int,
) -> str:
    """Name a call: the key of its ledger entry and the `idempotency_key` its tool receives.

    Args:
        run_id: The run (`run_identity`).
        round_label: The round, with the number of rollbacks that re-planned it (`"2.1"`).
        tool_name: The tool.
        arguments: The validated arguments.
        occurrence: 0 for the first call of this tool with these arguments in the round,
            1 for a deliberate repeat, and so on.
    """
    body = _KEY_JSON.encode(arguments)
    return _digest(run_id, round_label, tool_name, body, str(occurrence))


def position_key(
    run_id: str, round_label: str, position: int, tool_name: str, kwargs: Mapping[str, Any]
) -> str:
    """Name a call by its place in the plan: the key of its ledger entry.

    Args:
        run_id: The run (`run_identity`).
        round_label: The round, with the number of rollbacks that re-planned it (`"2.1"`).
        position: The command's position (0-based) in the plan.
        tool_name: The tool, as the planner named it.
        kwargs: The arguments as the planner wrote them (before repair or validation).
    """
    body = _KEY_JSON.encode(kwargs)
    return _digest("position", run_id, round_label, str(position), tool_name, body)
