"""One planner call: retries and fallbacks, through the app's `wrap_model_call` middleware."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langgraph.runtime import Runtime

from agentloop._effects import Core
from agentloop.model_calls import run_with_retries
from agentloop.nodes.parts import LoopParts
from agentloop.planning.prompt import PLAN_TOOL
from agentloop.planning.reader import PlanRead
from agentloop.settings import PlanMode
from agentloop.state import LoopState

__all__ = ["call_planner"]

Attempt = Callable[[BaseChatModel, list[BaseMessage], dict[str, Any]], Core[PlanRead]]


def call_planner(
    parts: LoopParts,
    state: LoopState,
    runtime: Runtime[Any],
    messages: list[BaseMessage],
    attempt: Attempt,
) -> Core[PlanRead]:
    """Ask the planner (then its fallbacks), through any `wrap_model_call` middleware.

    Args:
        parts: The loop's parts.
        state: The loop's state.
        runtime: The plan node's runtime.
        messages: The planner's request.
        attempt: One streamed call of a model with a request and model settings.

    Raises:
        ModelBehaviorError: Every model failed (or a middleware did).
    """
    scope = parts.scope(runtime)
    models, retry = parts.models.planners(scope.loop), parts.model_retry

    def with_retries(
        model: BaseChatModel, sent: list[BaseMessage], options: dict[str, Any]
    ) -> Core[PlanRead]:
        chosen = [model, *models[1:]]
        return run_with_retries(chosen, lambda one: attempt(one, sent, options), retry)

    middleware = parts.middleware
    if middleware is None:
        return (yield from with_retries(models[0], messages, {}))
    plan_mode = scope.settings.plan_mode
    return (
        yield from middleware.call_model(
            "plan",
            models,
            messages,
            with_retries,
            PlanRead.as_message,
            partial(_read_of, plan_mode=plan_mode),
            state=state,
            runtime=runtime,
            tools=_request_tools(parts, plan_mode),
        )
    )


def _request_tools(parts: LoopParts, plan_mode: PlanMode) -> list[dict[str, Any]]:
    """The tools a planner request binds: the plan tool, the loop's tools, or none."""
    if plan_mode == "tool":
        return [PLAN_TOOL]
    return parts.tools.tool_schemas if plan_mode == "native" else []


def _read_of(message: AIMessage, model: BaseChatModel, *, plan_mode: PlanMode) -> PlanRead:
    """A plan reply a middleware wrote itself, read like one from the model."""
    return PlanRead.of_message(message, model, plan_mode)
