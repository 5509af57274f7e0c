"""The planner's text reply as the run's answer (`plan_mode="native"`), when it may be."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentloop.nodes.parts import LoopParts
from agentloop.planning.native import adopts_planner_reply
from agentloop.settings import RunScope
from agentloop.state import LoopState, empty_round_state

__all__ = ["adopted_reply"]


def adopted_reply(parts: LoopParts, state: LoopState, scope: RunScope) -> str:
    """The planner's reply when it is the run's answer, else "" (the answer model is asked).

    It is when the last plan is a native reply without tool calls, read whole and usable
    (not empty, not cut, not looping), and `adopts_planner_reply` holds: no tool ran in
    the run, or the answer model is the planner model.
    """
    decision: Mapping[str, Any] = state.get("decision") or {}
    reply = decision.get("reply") or ""
    if not reply or decision.get("next_action") != "response":
        return ""
    if state.get("status") == "planner_failed":
        return ""
    done = (state.get("round_state") or empty_round_state())["done_plans"]
    models = parts.models
    adopts = adopts_planner_reply(
        scope.settings.plan_mode,
        models.planner(scope.loop),
        models.answerer(scope.loop),
        tools_ran=bool(done),
    )
    return reply if adopts else ""
