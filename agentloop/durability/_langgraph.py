"""The LangGraph internals durability needs, in one place.

LangGraph has no public accessor for the checkpointer that serves the current run (the
loop's own, or the one a parent graph lends it as a subgraph), for the run's
durability mode, nor for whether the running task is resumed with an answer to an
interrupt it raised before. Both are read from the task's config under LangGraph's own keys.
Nor does it let a task whose run is being cancelled leave anything in the state: its
output is lost with it (`save_step_input` saves an update as input to the task's step,
the way LangGraph keeps a `Command(update=...)`). The contract test
`tests/unit/test_durability_contract.py` fails loudly when an upgrade moves them.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any, Literal

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.config import get_config
from langgraph.runtime import ExecutionInfo

from agentloop.base.sync import by_mode

__all__ = [
    "Durability",
    "current_checkpointer",
    "current_durability",
    "resuming",
    "save_step_input",
]

Durability = Literal["sync", "async", "exit"]

CHECKPOINTER_KEY = "__pregel_checkpointer"
"""LangGraph's config key for the checkpointer of the running graph (1.x)."""
DURABILITY_KEY = "__pregel_durability"
"""LangGraph's config key for the run's durability mode (1.x)."""
SCRATCHPAD_KEY = "__pregel_scratchpad"
"""LangGraph's config key for the task's scratchpad, which holds its resume values (1.x)."""
NULL_TASK_ID = "00000000-0000-0000-0000-000000000000"
"""The task id LangGraph saves a step's input writes under (`Command(update=...)`) (1.x)."""


def _configurable(config: RunnableConfig | None) -> dict[str, Any]:
    if config is None:
        try:
            config = get_config()
        except RuntimeError:  # outside a graph run
            return {}
    return dict(config.get("configurable") or {})


def current_checkpointer(config: RunnableConfig | None = None) -> BaseCheckpointSaver[Any] | None:
    """Return the checkpointer of the running graph, or None when it has none."""
    saver = _configurable(config).get(CHECKPOINTER_KEY)
    return saver if isinstance(saver, BaseCheckpointSaver) else None


def current_durability(config: RunnableConfig | None = None) -> Durability:
    """Return the run's durability mode (LangGraph's default is "async")."""
    mode = _configurable(config).get(DURABILITY_KEY)
    return mode if mode in ("sync", "async", "exit") else "async"


def resuming(config: RunnableConfig | None = None) -> bool:
    """Return whether the running task is resumed with an answer to an interrupt it raised.

    True when `Command(resume=...)` gave it a value (its own, or the run's single one)
    that an `interrupt(...)` of the task will return.
    """
    scratchpad = _configurable(config).get(SCRATCHPAD_KEY)
    if scratchpad is None:
        return False
    if getattr(scratchpad, "resume", None):
        return True
    return scratchpad.get_null_resume(False) is not None


async def save_step_input(
    saver: BaseCheckpointSaver[Any], execution: ExecutionInfo, writes: Sequence[tuple[str, Any]]
) -> bool:
    """Save writes as input to the step a task runs in, as LangGraph keeps `Command(update=...)`.

    A read of the thread's state shows them applied; a run resumed at that step starts
    from them, and runs the step's unfinished tasks as usual (the task's own output would
    mark it finished, and without the graph's edges the run could not go on).

    Args:
        saver: The run's checkpointer.
        execution: The task's execution info (its thread, namespace and checkpoint).
        writes: `(channel, value)` pairs, as a node's update writes them.

    Returns:
        Whether they were saved: False when the step's checkpoint is not saved (yet).
    """
    task_ns = execution.checkpoint_ns
    config: RunnableConfig = {
        "configurable": {
            "thread_id": execution.thread_id,
            "checkpoint_ns": task_ns.rsplit("|", 1)[0] if "|" in task_ns else "",
            "checkpoint_id": execution.checkpoint_id,
        }
    }
    found = await by_mode(partial(saver.get_tuple, config), partial(saver.aget_tuple, config))
    if found is None:
        return False
    kept = [
        (channel, value)
        for task, channel, value in found.pending_writes or ()
        if task == NULL_TASK_ID
    ]
    both = [*kept, *writes]  # a step's input accumulates, as LangGraph saves it
    await by_mode(
        partial(saver.put_writes, config, both, NULL_TASK_ID),
        partial(saver.aput_writes, config, both, NULL_TASK_ID),
    )
    return True
