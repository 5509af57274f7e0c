"""One answer call, through the model-call stack (`agentloop.middleware.LoopMiddleware`)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from typing import Any, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import Runnable
from langgraph.runtime import Runtime

from agentloop.middleware import Render
from agentloop.model_calls import Answer, invoke_answer
from agentloop.nodes.parts import LoopParts
from agentloop.state import LoopState

__all__ = ["call_answerer"]


Configure = Callable[[Runnable[Any, BaseMessage]], Runnable[Any, BaseMessage]]


def _with(configure: Configure, options: dict[str, Any]) -> Configure:
    """`configure`, then the request's model settings bound to the model."""
    if not options:
        return configure
    return lambda runnable: configure(runnable).bind(**options)


def _reply_of(answer: Answer) -> AIMessage:
    return cast(AIMessage, answer.message)


def _answer_of(message: AIMessage, model: BaseChatModel) -> Answer:
    return Answer(message)


async def call_answerer(
    parts: LoopParts,
    state: LoopState,
    runtime: Runtime[Any],
    arguments: Sequence[Any],
    render: Render | None = None,
) -> Answer:
    """Ask the answer model through the model-call stack (the app's middleware, retry, fallback).

    Args:
        parts: The loop's parts.
        state: The loop's state.
        runtime: The answer node's runtime.
        arguments: `invoke_answer`'s arguments (the model and messages first).
        render: The request for the transcript as a `wrap_model_call` middleware passed
            it on (None when its edits change nothing the request shows): middleware
            sees the transcript in `ModelRequest.messages`, as under `create_agent`.

    Raises:
        ModelBehaviorError: Every model failed (or a middleware did).
    """
    workers = parts.runner.invoker.threads.workers
    model, messages, retry, limits, text_of, configure = arguments

    def call(
        model: BaseChatModel, sent: list[BaseMessage], options: dict[str, Any], tools: list[Any]
    ) -> Coroutine[Any, Any, Answer]:
        configured = _with(configure, options)
        return invoke_answer(model, sent, retry, limits, text_of, configured, workers=workers)

    return await parts.middleware.call_model(
        "answer",
        model,
        messages,
        call,
        _reply_of,
        _answer_of,
        state=state,
        runtime=runtime,
        transcript=state.get("messages") or [],
        render=render,
    )
