"""One planner call, through the model-call stack (`agentloop.middleware.stack.LoopMiddleware`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langgraph.runtime import Runtime

from agentloop.governance.registry import dict_tool_name
from agentloop.middleware.stack import Compose
from agentloop.nodes.parts import LoopParts
from agentloop.planning.reader import PlanRead
from agentloop.settings import PlanMode
from agentloop.state import LoopState

__all__ = ["call_planner", "listed_tools"]

Attempt = Callable[
    [BaseChatModel, list[BaseMessage], dict[str, Any], list[dict[str, Any]] | None],
    Awaitable[PlanRead],
]
"""One streamed call of a model with a request, model settings and the tool schemas to
bind in `plan_mode="native"` (None: the loop's)."""


async def call_planner(
    parts: LoopParts,
    state: LoopState,
    runtime: Runtime[Any],
    messages: list[BaseMessage],
    compose: Compose,
    attempt: Attempt,
) -> PlanRead:
    """Ask the planner through the model-call stack (the app's middleware, retry, fallback).

    Args:
        parts: The loop's parts.
        state: The loop's state (as the `before_model` hooks left it).
        runtime: The plan node's runtime.
        messages: The transcript the request carries (`transcript_view`).
        compose: What is sent for the request as the middleware passed it on.
        attempt: One streamed call of a model with a request, model settings and tools.

    Raises:
        ModelBehaviorError: Every model failed (or a middleware did).
    """
    scope = parts.scope(runtime)
    plan_mode = scope.settings.plan_mode

    async def call(
        model: BaseChatModel,
        sent: list[BaseMessage],
        options: dict[str, Any],
        tools: list[Any] | None = None,
    ) -> PlanRead:
        schemas, offered = _offer(parts, plan_mode, tools)
        read = await attempt(model, sent, options, schemas)
        read.offered = offered
        return read

    return await parts.middleware.call_model(
        "plan",
        parts.models.planner(scope.loop),
        messages,
        compose,
        call,
        PlanRead.as_message,
        partial(_read_of, plan_mode=plan_mode),
        state=state,
        runtime=runtime,
        tools=parts.tools.offered,  # the loop's, in every plan mode
    )


def _name(tool: Any) -> str:
    return dict_tool_name(tool) if isinstance(tool, dict) else str(tool.name)


def _narrowed_to(parts: LoopParts, tools: Sequence[Any] | None) -> frozenset[str] | None:
    """The names of the request's tools when a middleware narrowed them (None: it did not)."""
    if tools is None:
        return None
    names = frozenset(_name(tool) for tool in tools)
    if names == frozenset(_name(tool) for tool in parts.tools.offered):
        return None
    return names


def listed_tools(parts: LoopParts, tools: Sequence[Any]) -> str:
    """A JSON or tool planner's tool list: the loop's, or only those the request still offers.

    When a middleware narrowed the tools (`LLMToolSelectorMiddleware`), the list shows
    only those.
    """
    names = _narrowed_to(parts, tools)
    return parts.tool_list if names is None else parts.tools.narrowed(names)[0]


def _offer(
    parts: LoopParts, plan_mode: PlanMode, tools: list[Any] | None
) -> tuple[list[dict[str, Any]] | None, frozenset[str] | None]:
    """The schemas to bind and the tool names offered, for the request's tools.

    When a middleware narrowed the tools, the planner is offered only those: bound in
    native mode, in the tool list otherwise. Otherwise (None, None): the loop's tools.
    """
    names = _narrowed_to(parts, tools)
    if names is None or tools is None:
        return None, None
    _, schemas = parts.tools.narrowed(names)
    if plan_mode == "native":
        return _as_requested(schemas, tools, parts), names
    return schemas, names


def _as_requested(
    schemas: list[dict[str, Any]], tools: list[Any], parts: LoopParts
) -> list[dict[str, Any]]:
    """The schemas to bind as a middleware changed the request's tools.

    A tool it marked `extras["defer_loading"]` (`ProviderToolSearchMiddleware`) is bound
    with `defer_loading`, and a provider's tool it added (its tool search) is bound after
    the loop's, as `create_agent` binds the request's tools.
    """
    known = {_name(tool) for tool in parts.tools.offered}
    deferred = {
        _name(tool)
        for tool in tools
        if not isinstance(tool, dict)
        and (getattr(tool, "extras", None) or {}).get("defer_loading") is True
    }
    added = [tool for tool in tools if isinstance(tool, dict) and _name(tool) not in known]
    marked = [
        {**schema, "defer_loading": True} if dict_tool_name(schema) in deferred else schema
        for schema in schemas
    ]
    return [*marked, *added]


def _read_of(message: AIMessage, model: BaseChatModel, *, plan_mode: PlanMode) -> PlanRead:
    """A plan reply a middleware wrote itself, read like one from the model."""
    return PlanRead.of_message(message, model, plan_mode)
