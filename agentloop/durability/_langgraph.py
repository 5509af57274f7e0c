"""The LangGraph internals durability needs, in one place.

LangGraph has no public accessor for the checkpointer that serves the current run (the
loop's own, or the one a parent graph lends it as a subgraph), for the run's
durability mode, nor for whether the running task is resumed with an answer to an
interrupt it raised before. Both are read from the task's config under LangGraph's own keys; the
contract test `tests/unit/test_durability_contract.py` fails loudly when an upgrade moves
them.
"""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.config import get_config

__all__ = ["Durability", "current_checkpointer", "current_durability", "resuming"]

Durability = Literal["sync", "async", "exit"]

CHECKPOINTER_KEY = "__pregel_checkpointer"
"""LangGraph's config key for the checkpointer of the running graph (1.x)."""
DURABILITY_KEY = "__pregel_durability"
"""LangGraph's config key for the run's durability mode (1.x)."""
SCRATCHPAD_KEY = "__pregel_scratchpad"
"""LangGraph's config key for the task's scratchpad, which holds its resume values (1.x)."""


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
