"""One answer call, through the model-call stack (`agentloop.middleware.LoopMiddleware`)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import Runnable
from langgraph.runtime import Runtime

from agentloop.messages import message_text
from agentloop.model_calls import Answer, invoke_answer
from agentloop.nodes.parts import LoopParts
from agentloop.state import LoopState

if TYPE_CHECKING:
    from agentloop.nodes.answer import AnswerPrompt

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
    prompt: AnswerPrompt,
    configure: Configure,
) -> Answer:
    """Ask the answer model through the model-call stack (the app's middleware, retry, fallback).

    Args:
        parts: The loop's parts.
        state: The loop's state (as the `before_model` hooks left it).
        runtime: The answer node's runtime.
        prompt: The request: the answer model, the transcript it carries, what is sent.
        configure: Tags and names the answer's model call.

    Raises:
        ModelBehaviorError: Every model failed (or a middleware did).
    """
    workers = parts.runner.invoker.threads.workers
    retry, limits = parts.model_retry, parts.model_limits

    def call(
        model: BaseChatModel, sent: list[BaseMessage], options: dict[str, Any], tools: list[Any]
    ) -> Coroutine[Any, Any, Answer]:
        configured = _with(configure, options)
        return invoke_answer(model, sent, retry, limits, message_text, configured, workers=workers)

    return await parts.middleware.call_model(
        "answer",
        prompt.answerer,
        prompt.transcript,
        prompt.compose,
        call,
        _reply_of,
        _answer_of,
        state=state,
        runtime=runtime,
    )
