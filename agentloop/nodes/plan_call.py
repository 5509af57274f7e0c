"""One planner call, through the model-call stack (`agentloop.middleware.LoopMiddleware`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.runtime import Runtime

from agentloop.middleware import Render
from agentloop.nodes.parts import LoopParts
from agentloop.planning.reader import PlanRead
from agentloop.settings import PlanMode
from agentloop.state import LoopState
from agentloop.tools.registry import dict_tool_name

__all__ = ["call_planner"]

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
    attempt: Attempt,
    render: Render | None = None,
) -> PlanRead:
    """Ask the planner through the model-call stack (the app's middleware, retry, fallback).

    Args:
        parts: The loop's parts.
        state: The loop's state.
        runtime: The plan node's runtime.
        messages: The planner's request.
        attempt: One streamed call of a model with a request, model settings and tools.
        render: The request for the transcript as a `wrap_model_call` middleware passed
            it on (None when its edits change nothing the request shows): middleware
            sees the transcript in `ModelRequest.messages`, as under `create_agent`.

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
        sent, schemas, offered = _offer(parts, plan_mode, sent, tools)
        read = await attempt(model, sent, options, schemas)
        read.offered = offered
        return read

    return await parts.middleware.call_model(
        "plan",
        parts.models.planner(scope.loop),
        messages,
        call,
        PlanRead.as_message,
        partial(_read_of, plan_mode=plan_mode),
        state=state,
        runtime=runtime,
        tools=parts.tools.offered,  # the loop's, in every plan mode
        transcript=state.get("messages") or [],
        render=render,
    )


def _name(tool: Any) -> str:
    return dict_tool_name(tool) if isinstance(tool, dict) else str(tool.name)


def _offer(
    parts: LoopParts, plan_mode: PlanMode, sent: list[BaseMessage], tools: list[Any] | None
) -> tuple[list[BaseMessage], list[dict[str, Any]] | None, frozenset[str] | None]:
    """The request, the schemas to bind and the tool names offered, for the request's tools.

    When a middleware narrowed the tools (`LLMToolSelectorMiddleware`), the planner is
    offered only those: bound in native mode, in the prompt's tool list otherwise.
    Otherwise the request is as it is, with the loop's tools (None, None).
    """
    if tools is None:
        return sent, None, None
    names = frozenset(_name(tool) for tool in tools)
    if names == frozenset(_name(tool) for tool in parts.tools.offered):
        return sent, None, None
    text, schemas = parts.tools.narrowed(names)
    if plan_mode == "native":
        return sent, _as_requested(schemas, tools, parts), names
    listed = parts.tool_list
    narrowed = [
        message.model_copy(update={"content": message.content.replace(listed, text, 1)})
        if isinstance(message, HumanMessage)
        and isinstance(message.content, str)
        and listed in message.content
        else message
        for message in sent
    ]
    return narrowed, schemas, names


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
