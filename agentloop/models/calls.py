"""Model calls that survive the real world: retries, fallbacks, length and loop checks.

- `ModelRetryLayer` retries transient errors (rate limits, timeouts, 5xx, connection
  errors) with exponential backoff and jitter, honouring a provider's `retry-after`;
  authentication and context-overflow errors are not retried.
- LangChain's `ModelFallbackMiddleware` makes a failed call with each fallback model in
  turn (`ModelOptions(fallbacks=...)`).
- `invoke_answer` asks again for an answer cut by the length limit (budget x1.1 per try,
  bounded) or repeating its own tail: no failed call, so inside the layers.

The layers are `wrap_model_call` middleware; `agentloop.middleware.stack.LoopMiddleware`
composes them with the app's (the stack's order is documented there).
"""

from __future__ import annotations

import email.utils
import operator
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial, reduce
from typing import Any

from langchain.agents.middleware import (
    AgentMiddleware,
    ModelFallbackMiddleware,
    ModelRequest,
    ModelResponse,
    ModelRetryMiddleware,
)
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, message_chunk_to_message
from langchain_core.runnables import Runnable
from langgraph.types import RetryPolicy
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt

from agentloop.base.messages import message_text
from agentloop.base.retry import retry_lazily
from agentloop.base.sync import WorkerPool, run_blocking
from agentloop.errors import ConfigurationError, ModelBehaviorError, is_retryable_model_error
from agentloop.models.stream import BoundedRead, ModelLimits

__all__ = [
    "Answer",
    "ModelRetryLayer",
    "ModelRetryPolicy",
    "finish_reason",
    "invoke_answer",
    "is_degenerate",
    "model_layers",
    "needs_another_try",
    "retry_after_s",
]

_LENGTH_REASONS = {"length", "max_tokens", "max_output_tokens", "MAX_TOKENS"}


@dataclass(frozen=True)
class ModelRetryPolicy:
    """How model calls are retried.

    Attributes:
        max_attempts: Attempts per model, the first included.
        initial_delay_s: Wait before the 2nd attempt (unless the provider says otherwise).
        multiplier: Growth of the wait per attempt.
        max_delay_s: Upper bound of one wait, `retry-after` included.
        jitter: Add up to `initial_delay_s` at random.
        length_retries: Extra answer attempts when the reply hit the length limit.
        length_growth: Token budget growth per length retry.
        max_tokens_cap: Upper bound of the token budget.
        default_max_tokens: Budget assumed when the model declares none.
        degenerate_retries: Extra answer attempts for a reply that repeats its own tail.
    """

    max_attempts: int = 4
    initial_delay_s: float = 1.0
    multiplier: float = 2.0
    max_delay_s: float = 60.0
    jitter: bool = True
    length_retries: int = 3
    length_growth: float = 1.1
    max_tokens_cap: int = 65_536
    default_max_tokens: int = 4_096
    degenerate_retries: int = 2

    @classmethod
    def of(cls, policy: ModelRetryPolicy | RetryPolicy) -> ModelRetryPolicy:
        """Accept LangGraph's `RetryPolicy` where a model retry policy is taken."""
        if isinstance(policy, ModelRetryPolicy):
            return policy
        if isinstance(policy, RetryPolicy):
            return cls(
                max_attempts=policy.max_attempts,
                initial_delay_s=policy.initial_interval,
                multiplier=policy.backoff_factor,
                max_delay_s=policy.max_interval,
                jitter=policy.jitter,
            )
        msg = f"a model retry policy must be a ModelRetryPolicy or a RetryPolicy, got {policy!r}"
        raise ConfigurationError(msg)


def retry_after_s(error: BaseException | None) -> float | None:
    """Return the wait a provider asked for (`retry-after` header or attribute), if any."""
    if error is None:
        return None
    value: Any = getattr(error, "retry_after", None)
    if value is None:
        headers = getattr(getattr(error, "response", None), "headers", None) or {}
        try:
            value = headers.get("retry-after") or headers.get("Retry-After")
        except AttributeError:
            value = None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except (TypeError, ValueError):
        parsed = email.utils.parsedate_to_datetime(str(value)) if isinstance(value, str) else None
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


Handler = Callable[[ModelRequest[Any]], ModelResponse[Any]]
AsyncHandler = Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]]


def _retrying(policy: ModelRetryPolicy) -> Retrying:
    """Tenacity's retrier of a failed model call: `policy`'s attempts and backoff."""

    def wait(state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome else None
        asked = retry_after_s(error)
        if asked is not None:
            return min(asked, policy.max_delay_s)
        delay = policy.initial_delay_s * policy.multiplier ** (state.attempt_number - 1)
        if policy.jitter:
            delay += random.uniform(0, policy.initial_delay_s)  # jitter only
        return float(min(delay, policy.max_delay_s))

    return Retrying(
        stop=stop_after_attempt(policy.max_attempts),
        wait=wait,
        retry=retry_if_exception(is_retryable_model_error),
        reraise=True,
    )


async def _one_call(handler: Handler, request: ModelRequest[Any]) -> ModelResponse[Any]:
    """One call of the sync `handler`, as an attempt `retry_lazily` awaits."""
    return handler(request)


class ModelRetryLayer(AgentMiddleware[Any, Any, Any]):
    """The loop's retry of a failed model call (`ModelOptions(retry=...)`), a model layer.

    A transient error is retried up to `max_attempts` calls, after the provider's
    `retry-after` or an exponential backoff (tenacity, built only once a call failed);
    any other error, or the last, is raised.
    """

    def __init__(self, policy: ModelRetryPolicy) -> None:
        self.policy = policy
        self._retrying = partial(_retrying, policy)

    def wrap_model_call(self, request: ModelRequest[Any], handler: Handler) -> ModelResponse[Any]:
        """Call `handler`, again after a wait while the error is transient."""
        attempt = partial(_one_call, handler, request)
        return run_blocking(retry_lazily(attempt, self._retrying, is_retryable_model_error))

    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: AsyncHandler
    ) -> ModelResponse[Any]:
        """`wrap_model_call`, awaited."""
        attempt = partial(handler, request)
        return await retry_lazily(attempt, self._retrying, is_retryable_model_error)


def model_layers(
    retry: ModelRetryPolicy | None,
    fallbacks: Sequence[BaseChatModel],
    middleware: Sequence[AgentMiddleware[Any, Any, Any]],
) -> list[AgentMiddleware[Any, Any, Any]]:
    """The loop's own model layers, inside the app's middleware: its retry, its fallback.

    No retry layer when `retry` is unset (None) and the app's `middleware` retries
    failed calls (`ModelRetryMiddleware`) or takes them over (`ModelFallbackMiddleware`),
    so a failing call is retried once, as under `create_agent`; nor for one attempt.

    Args:
        retry: `ModelOptions(retry=...)` as the app set it (None: the default policy).
        fallbacks: `ModelOptions(fallbacks=...)`, resolved.
        middleware: The app's middleware.
    """
    retries = any(isinstance(m, ModelRetryMiddleware | ModelFallbackMiddleware) for m in middleware)
    policy = retry or (None if retries else ModelRetryPolicy())
    layers: list[AgentMiddleware[Any, Any, Any]] = []
    if policy is not None and policy.max_attempts > 1:
        layers.append(ModelRetryLayer(policy))
    if fallbacks:  # LangChain's own: a failed call made with each fallback in turn
        layers.append(ModelFallbackMiddleware(*fallbacks))
    return layers


def finish_reason(message: BaseMessage) -> str:
    """Return why a reply stopped (`finish_reason` / `stop_reason`), or ""."""
    metadata = getattr(message, "response_metadata", None) or {}
    reason = metadata.get("finish_reason") or metadata.get("stop_reason") or ""
    return str(reason)


def is_degenerate(text: str, *, tail: int = 50, repeats: int = 5) -> bool:
    """Tell whether a reply loops: its last `tail` characters occur more than `repeats` times."""
    if len(text) < tail * (repeats + 1):
        return False
    return text.count(text[-tail:]) > repeats


def needs_another_try(reply: BaseMessage) -> bool:
    """Whether an answer stopped at the length limit or loops (it would be asked again)."""
    return finish_reason(reply) in _LENGTH_REASONS or is_degenerate(message_text(reply))


class _AnswerCheck:
    """Decides whether an answer must be asked again, and with which budget."""

    def __init__(self, model: BaseChatModel, retry: ModelRetryPolicy) -> None:
        declared = getattr(model, "max_tokens", None) or getattr(model, "max_output_tokens", None)
        self.budget = int(declared) if isinstance(declared, int) else retry.default_max_tokens
        self.length_left = retry.length_retries
        self.degenerate_left = retry.degenerate_retries
        self.retry = retry

    def again(self, reply: BaseMessage, text: str) -> bool:
        if finish_reason(reply) in _LENGTH_REASONS and self.length_left > 0:
            self.length_left -= 1
            grown = int(self.budget * self.retry.length_growth) + 1
            self.budget = min(grown, self.retry.max_tokens_cap)
            return True
        if is_degenerate(text) and self.degenerate_left > 0:
            self.degenerate_left -= 1
            return True
        return False

    def runnable(self, model: BaseChatModel, grown: bool) -> Runnable[Any, BaseMessage]:
        return model.bind(max_tokens=self.budget) if grown else model


@dataclass(frozen=True)
class Answer:
    """An answer model's reply, and why it was cut ("" when it ended by itself)."""

    message: BaseMessage
    cut: str = ""


def _answer_read(limits: ModelLimits, workers: WorkerPool) -> BoundedRead[Any]:
    return BoundedRead(
        "answer", limits, limits.max_answer_chars, lambda chunk: len(chunk.text), workers=workers
    )


def _joined(chunks: list[Any]) -> BaseMessage:
    if not chunks:
        msg = "the answer model streamed no output"
        raise ModelBehaviorError(msg)
    return message_chunk_to_message(reduce(operator.add, chunks))


async def invoke_answer(
    model: BaseChatModel,
    messages: list[BaseMessage],
    retry: ModelRetryPolicy,
    limits: ModelLimits,
    text_of: Callable[[BaseMessage], str],
    configure: Callable[[Runnable[Any, BaseMessage]], Runnable[Any, BaseMessage]],
    *,
    workers: WorkerPool,
) -> Answer:
    """Stream one model's answer within the limits, asked again when cut or looping.

    A reply cut by the length limit is asked again with a larger budget, one that
    repeats its own tail asked again (`retry`'s `length_retries`, `degenerate_retries`);
    a failed call raises (the retry and fallback layers around it take it from there).
    A sync stream is read on a thread of `workers` (the loop's pool).
    """
    check = _AnswerCheck(model, retry)
    grown = False
    while True:
        runnable = configure(check.runnable(model, grown))
        read = _answer_read(limits, workers)
        chunks: list[Any] = []
        await read.consume(runnable, messages, chunks.append)
        reply = _joined(chunks)
        if read.cut:
            return Answer(reply, read.cut)
        before = check.budget
        if not check.again(reply, text_of(reply)):
            return Answer(reply)
        grown = grown or check.budget != before
