"""The loop's routers: pure functions of the state (the stop rules live here).

`route_entry` also reads whether the run has a checkpointer (where the run starts).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from langchain_core.runnables import RunnableConfig
from langgraph.types import Send

from agentloop.durability import current_checkpointer
from agentloop.nodes.execute import after_round, next_batch, route_execute
from agentloop.state import LoopState, run_limit

__all__ = ["route_entry", "route_execute", "route_plan", "route_start"]


def route_entry(state: LoopState, config: RunnableConfig) -> Literal["prepare", "plan"]:
    """Where a run starts: `prepare`, or `plan` in a run without a checkpointer.

    With a checkpointer the run's per-run state is reset in a step of its own, which a
    person can stop before (an interrupt given to one run, as LangGraph Studio sets
    them) and which a resume finds done. Without one nothing can stop the run there, so
    `plan` makes the same update first and the run takes one step less, as
    `create_agent`'s starts in its model node.
    """
    return "prepare" if current_checkpointer(config) is not None else "plan"


def route_start(state: LoopState) -> Literal["plan", "answer"]:
    """Plan unless the run allows no round at all."""
    return "plan" if run_limit(state, "max_rounds") > 0 else "answer"


def route_plan(state: LoopState) -> list[Send] | Literal["plan", "execute", "answer", "end"]:
    """After `plan`: the round's next batch, or where the plan leads.

    While calls of the round are still to run, their next batch (the first one too, when
    `plan` prepared the round); `plan` again when it prepared a round none of whose
    calls runs (all settled: it ends the round). Once a round ended, the
    answer at `max_rounds`, or the end when its calls were all of `return_direct` tools
    (`after_round`). Otherwise `execute` the plan's commands, or answer when it says
    `response` or has none.
    """
    sends = next_batch(state)
    if sends:
        return sends
    if state.get("round_calls"):  # prepared, and none of its calls runs: `plan` ends it
        return "plan"
    then = after_round(state)
    if then != "plan":
        return then
    decision: Mapping[str, Any] = state.get("decision") or {}
    wants_tools = decision.get("next_action") == "execute"
    return "execute" if wants_tools and decision.get("execution_commands") else "answer"
