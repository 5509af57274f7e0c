"""The loop's routers: pure functions of the state (the stop rules live here)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from langgraph.types import Send

from agentloop.nodes.execute import route_collect, route_execute
from agentloop.state import LoopState, run_limit

__all__ = ["route_collect", "route_execute", "route_plan", "route_round", "route_start"]


def route_start(state: LoopState) -> Literal["plan", "answer"]:
    """Plan unless the run allows no round at all."""
    return "plan" if run_limit(state, "max_rounds") > 0 else "answer"


def route_plan(state: LoopState) -> Literal["execute", "answer"]:
    """Execute the plan's commands, or answer when it says `response` or has none."""
    decision: Mapping[str, Any] = state.get("decision") or {}
    wants_tools = decision.get("next_action") == "execute"
    return "execute" if wants_tools and decision.get("execution_commands") else "answer"


def route_round(state: LoopState) -> list[Send] | Literal["plan", "answer", "end"]:
    """After `collect`: the next batch, or plan again, or answer (`route_collect`).

    `"end"` when the round's calls were all of `return_direct` tools: `collect` made the
    last outcome the run's answer (status `ok`), so no model is asked again; the run goes
    where its answer would lead (the `after_agent` hooks, or `END`), as in `create_agent`.
    """
    routed = route_collect(state)
    if isinstance(routed, list) or state.get("status") != "ok":
        return routed
    return "end"
