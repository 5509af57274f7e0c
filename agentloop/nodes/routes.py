"""The loop's routers: pure functions of the state (the stop rules live here)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from langgraph.types import Send

from agentloop.nodes.execute import after_round, next_batch, route_execute
from agentloop.state import LoopState, run_limit

__all__ = ["route_execute", "route_plan", "route_start"]


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
