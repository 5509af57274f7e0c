"""Stable identities of runs and calls: the same across resume, replay, fork and re-planning.

Checkpoint ids change on every replay or fork and positions change when a planner
re-plans in another order, so neither can name a call. A run is named by what starts it
(the call of a parent loop it serves, the human message it answers, or its turn on the
thread and its request); a call by its run, its round, its tool, its canonical validated
arguments and an occurrence number for deliberate repeats within the round.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping
from typing import Any

__all__ = ["call_key", "loop_namespace", "run_identity"]


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
        anchor: What starts the run: a parent call's key, a human message id, or the
            thread's turn number with a digest of the request.

    Returns:
        A 16-character id.
    """
    if thread_id is None:
        return uuid.uuid4().hex[:16]
    return _digest(thread_id, namespace, anchor, size=16)


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
    body = json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str)
    return _digest(run_id, round_label, tool_name, body, str(occurrence))
