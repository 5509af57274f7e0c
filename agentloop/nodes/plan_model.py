"""The planner model as each `plan_mode` calls it: bound to nothing, the plan tool or the tools."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import Runnable
from langgraph.constants import TAG_NOSTREAM

from agentloop.errors import ConfigurationError
from agentloop.planning.prompt import PLAN_TOOL, PLAN_TOOL_STRICT
from agentloop.settings import LoopSettings

__all__ = ["PLAN_TAGS", "check_native_planners", "planner_runnable"]

PLAN_TAGS = ["agentloop:plan"]
"""Tags of every planner call (plus LangGraph's `nostream` unless planner tokens stream)."""


def _bind_plan_tool(model: BaseChatModel) -> Runnable[Any, Any]:
    """Force the plan tool; strict structured output where the model's binding offers it."""
    try:
        if _takes_strict(model):
            return model.bind_tools([PLAN_TOOL_STRICT], tool_choice="PlanDecision", strict=True)
        return model.bind_tools([PLAN_TOOL], tool_choice="PlanDecision")
    except NotImplementedError as error:
        msg = f"plan_mode='tool' needs a model with tool calling; {type(model).__name__} has none"
        raise ConfigurationError(msg) from error


def _bind_tools(model: BaseChatModel, tools: Sequence[dict[str, Any]]) -> Runnable[Any, Any]:
    """Bind the loop's tools; the model may call several of them in one reply.

    Raises:
        ConfigurationError: The model has no tool calling.
    """
    try:
        return model.bind_tools(list(tools))
    except NotImplementedError as error:
        msg = (
            f"plan_mode='native' needs a model with tool calling; {type(model).__name__} "
            "has none: use plan_mode='json'"
        )
        raise ConfigurationError(msg) from error


def check_native_planners(models: Sequence[BaseChatModel], tools: Sequence[dict[str, Any]]) -> None:
    """Fail at build time when a planner model (or a fallback) cannot call tools.

    Raises:
        ConfigurationError: A model has no tool calling.
    """
    for model in models:
        _bind_tools(model, tools)


def _takes_strict(model: BaseChatModel) -> bool:
    """Whether `bind_tools` names a `strict` parameter (OpenAI-style strict schemas)."""
    try:
        parameters = inspect.signature(model.bind_tools).parameters
    except (TypeError, ValueError):
        return False
    return "strict" in parameters


def planner_runnable(
    model: BaseChatModel,
    settings: LoopSettings,
    options: dict[str, Any],
    tools: Sequence[dict[str, Any]],
) -> Runnable[Any, Any]:
    """The planner call: tagged so LangGraph's `messages` stream leaves it out by default.

    Args:
        model: The planner model.
        settings: The run's settings (`plan_mode`, `stream_plan_tokens`).
        options: Model settings to bind (from `wrap_model_call` middleware).
        tools: The loop's tools as bound tool schemas (used in `plan_mode="native"`).
    """
    if settings.plan_mode == "tool":
        bound = _bind_plan_tool(model)
    elif settings.plan_mode == "native":
        bound = _bind_tools(model, tools)
    else:
        bound = model
    tags = PLAN_TAGS if settings.stream_plan_tokens else [*PLAN_TAGS, TAG_NOSTREAM]
    configured = bound.with_config(tags=tags, run_name="plan")
    return configured.bind(**options) if options else configured
