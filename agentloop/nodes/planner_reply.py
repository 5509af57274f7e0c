"""The planner's text reply as the run's answer (`plan_mode="native"`), when it may be."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.messages import AIMessage

from agentloop.nodes.parts import LoopParts
from agentloop.planning.native import adopts_planner_reply
from agentloop.planning.prompt import omits_results
from agentloop.settings import RunScope
from agentloop.state import LoopState, empty_round_state

__all__ = ["adopted_reply", "refusal_message", "refusal_of"]


def adopted_reply(parts: LoopParts, state: LoopState, scope: RunScope) -> AIMessage | None:
    """The planner's reply when it is the run's answer, else None (the answer model is asked).

    A planner's refusal is the answer (the message as the model gave it, as
    `create_agent` ends with it). Otherwise it is when the last plan is a native reply
    without tool calls, read whole and usable
    (not empty, not cut, not looping), and `adopts_planner_reply` holds: no tool ran in
    the run, or the answer model is the planner model and the planner saw every result.
    The message keeps the reply's id, so a `messages` stream that showed the planner's
    tokens does not show it again.
    """
    decision: Mapping[str, Any] = state.get("decision") or {}
    refusal = decision.get("refusal") or ""
    if refusal and decision.get("next_action") == "response":
        return refusal_message(refusal, decision.get("model_provider") or "", decision)
    reply = decision.get("reply") or ""
    if not reply or decision.get("next_action") != "response":
        return None
    if state.get("status") == "planner_failed":
        return None
    round_state = state.get("round_state") or empty_round_state()
    models = parts.models
    adopts = adopts_planner_reply(
        scope.settings.plan_mode,
        models.planner(scope.loop),
        models.answerer(scope.loop),
        tools_ran=bool(round_state["done_plans"]),
        results_omitted=omits_results(round_state, scope.settings.keep_tool_results),
    )
    return AIMessage(reply, id=decision.get("reply_id") or None) if adopts else None


def refusal_of(message: AIMessage | None) -> str:
    """A reply's refusal (`additional_kwargs["refusal"]`, as langchain-openai gives it)."""
    refusal = message.additional_kwargs.get("refusal") if message is not None else None
    return refusal if isinstance(refusal, str) else ""


def refusal_message(refusal: str, provider: str, decision: Mapping[str, Any]) -> AIMessage:
    """The refused reply as the model gave it: no text, the refusal beside it.

    Args:
        refusal: The refusal's text.
        provider: The reply's `model_provider` ("" when unknown).
        decision: What carries the reply's id (`reply_id`).
    """
    metadata = {"model_provider": provider} if provider else {}
    return AIMessage(
        "",
        id=decision.get("reply_id") or None,
        additional_kwargs={"refusal": refusal},
        response_metadata=metadata,
    )
