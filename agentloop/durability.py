"""Exactly-once bookkeeping for calls with side effects, kept in the checkpointer.

Before a call that is not idempotent runs, a "started" marker is written to the
checkpointer as a pending write of the checkpoint its task runs from. LangGraph keeps the
writes of finished tasks, so after a crash only unfinished calls run again on resume; a
call whose marker is there but whose result is not may have happened, and is reported as
`unknown_outcome` instead of being repeated blindly.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig

__all__ = [
    "STARTED_CHANNEL",
    "amark_started",
    "awas_started",
    "is_resuming",
    "mark_started",
    "was_started",
]

STARTED_CHANNEL = "agentloop:call_started"
_CHECKPOINTER_KEY = "__pregel_checkpointer"
_RESUMING_KEY = "__pregel_resuming"


def _configurable(config: RunnableConfig | None) -> dict[str, Any]:
    return dict((config or {}).get("configurable") or {})


def _checkpointer(config: RunnableConfig | None) -> Any:
    return _configurable(config).get(_CHECKPOINTER_KEY)


def is_resuming(config: RunnableConfig | None) -> bool:
    """Tell whether the task runs as part of a run resumed from a checkpoint."""
    return bool(_configurable(config).get(_RESUMING_KEY))


def _loop_checkpoint(config: RunnableConfig | None) -> RunnableConfig | None:
    """The checkpoint the current task runs from (the loop's level, not the task's)."""
    configurable = _configurable(config)
    task_ns = str(configurable.get("checkpoint_ns", ""))
    loop_ns = task_ns.rsplit("|", 1)[0] if "|" in task_ns else ""
    checkpoint_id = (configurable.get("checkpoint_map") or {}).get(loop_ns)
    thread_id = configurable.get("thread_id")
    if checkpoint_id is None or thread_id is None:
        return None
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": loop_ns,
            "checkpoint_id": checkpoint_id,
        }
    }


def _marker_task(call_id: str) -> str:
    return f"agentloop-started:{call_id}"


def _has_marker(pending: Any, call_id: str) -> bool:
    task = _marker_task(call_id)
    return any(write[0] == task and write[1] == STARTED_CHANNEL for write in pending or [])


def mark_started(config: RunnableConfig | None, call_id: str) -> bool:
    """Persist that a call is about to run; False when there is no checkpointer."""
    saver, target = _checkpointer(config), _loop_checkpoint(config)
    if saver is None or target is None:
        return False
    saver.put_writes(target, [(STARTED_CHANNEL, call_id)], _marker_task(call_id))
    return True


async def amark_started(config: RunnableConfig | None, call_id: str) -> bool:
    """Async `mark_started`."""
    saver, target = _checkpointer(config), _loop_checkpoint(config)
    if saver is None or target is None:
        return False
    await saver.aput_writes(target, [(STARTED_CHANNEL, call_id)], _marker_task(call_id))
    return True


def was_started(config: RunnableConfig | None, call_id: str) -> bool:
    """Tell whether a call was marked as started in the checkpoint its task runs from."""
    saver, target = _checkpointer(config), _loop_checkpoint(config)
    if saver is None or target is None:
        return False
    found = saver.get_tuple(target)
    return found is not None and _has_marker(found.pending_writes, call_id)


async def awas_started(config: RunnableConfig | None, call_id: str) -> bool:
    """Async `was_started`."""
    saver, target = _checkpointer(config), _loop_checkpoint(config)
    if saver is None or target is None:
        return False
    found = await saver.aget_tuple(target)
    return found is not None and _has_marker(found.pending_writes, call_id)
