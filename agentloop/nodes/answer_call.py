"""The answer request: what the answer model is sent, built from the transcript, and its call.

The request is the conversation as the middleware left it, the run's tool results (from
its `ToolMessage`s, keyed by purpose) injected with the quote-your-sources instruction,
and the media the tools returned; the call goes through the model-call stack
(`agentloop.middleware.stack.LoopMiddleware`).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import Runnable
from langgraph.runtime import Runtime

from agentloop.base.messages import message_text
from agentloop.middleware.stack import Compose
from agentloop.models.calls import Answer, invoke_answer
from agentloop.nodes.parts import LoopParts
from agentloop.planning.prompt import MessageViews, shown_result, transcript_view
from agentloop.planning.system_prompt import system_message
from agentloop.planning.templates import quote_user_text, result_notes, to_prompt_json
from agentloop.settings import RunScope
from agentloop.state import LoopState, ToolExecutionRecord, empty_round_state

__all__ = [
    "ANSWER_TAGS",
    "AnswerPrompt",
    "Configure",
    "answer_compose",
    "answer_prompt",
    "call_answerer",
    "configure_answer",
    "media_blocks",
    "refusal_message",
    "refusal_of",
    "to_action_results",
]


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


ANSWER_TAGS = ["agentloop:answer"]

_RECORDED: Any = object()
"""A record's result as it recorded it (not the transcript's)."""
_GONE: Any = object()
"""No `ToolMessage` of the call is left in the transcript."""


def _result_value(record: ToolExecutionRecord, shown: Any = _RECORDED) -> Any:
    """A record's result as the answer reads it: `shown`, the transcript's, else the record's."""
    result = record["result"] if shown is _RECORDED else shown
    if record.get("stale"):
        if shown is not _RECORDED:
            return shown  # the transcript gives the error and the stale result together
        age = record.get("stale_age_s", 0.0)
        return {"error": record["error"], "stale_result": result, "stale_age_s": age}
    if not record["success"]:
        if shown is not _RECORDED:
            return {"error": shown}
        return {"error": record["error"], "result": result}
    if record.get("fallback"):
        return {"result": result, "fallback": record["fallback"]}
    return result


_NOT_RUN_KEY = "commands not run (over the round's cap)"
"""The action result that stands for a run of commands refused for exceeding the
per-round cap (`{"error", "not_run"}`)."""


def to_action_results(
    records: Iterable[ToolExecutionRecord], shown: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Key each record's result by its purpose, as the answer model sees them.

    A command without a purpose is named by its tool and arguments. Repeated purposes
    get `" (2)"`, `" (3)"`... suffixes. A failed record gives
    `{"error", "result"}`; a fallback result gives `{"result", "fallback"}`. Commands
    refused for exceeding the per-round cap are one item per run of them, keyed
    "commands not run (over the round's cap)": `{"error", "not_run": count}` (as the
    planner's prompt shows them).

    Args:
        records: `done_plans`, oldest first.
        shown: The result each call's `ToolMessage` holds in the transcript, by
            `tool_call_id`, as the middleware left it (a call whose message is gone is
            left out; a failed call's is its error); None: the records' own results.

    Returns:
        The action results (empty when nothing ran).
    """
    results: dict[str, Any] = {}
    counts: dict[str, int] = {}
    refused: dict[str, Any] | None = None  # the run of refusals over the cap going on
    for record in records:
        if record.get("error_type") == "too_many_commands":
            if refused is not None:
                refused["not_run"] += 1
                continue
            purpose = _NOT_RUN_KEY
            refused = {"error": record["error"], "not_run": 1}
            value: Any = refused
        else:
            refused = None
            shown_value: Any = _RECORDED
            if shown is not None:
                shown_value = shown.get(record.get("tool_call_id") or "", _GONE)
                if shown_value is _GONE:
                    continue
            purpose = record["purpose"] or (
                f"{record['tool_name']} {to_prompt_json(record['kwargs'])}"
            )
            value = _result_value(record, shown_value)
        counts[purpose] = counts.get(purpose, 0) + 1
        key = purpose if counts[purpose] == 1 else f"{purpose} ({counts[purpose]})"
        while key in results:
            counts[purpose] += 1
            key = f"{purpose} ({counts[purpose]})"
        results[key] = value
    return results


MAX_ANSWER_ATTACHMENTS = 8
"""At most this many media attachments go to the answer model (the latest ones)."""
_MODALITIES = {"image": "image_inputs", "audio": "audio_inputs"}


def media_blocks(
    records: Iterable[ToolExecutionRecord], model: BaseChatModel | Any
) -> list[dict[str, Any]]:
    """The tools' images and audio as content blocks, for a model whose profile accepts them.

    Each block follows a text block naming its handle, as the results name it. A model
    without a profile gets none (set `model.profile = {"image_inputs": True}` to opt in).

    Args:
        records: `done_plans`, oldest first.
        model: The answer model.

    Returns:
        Content blocks, or none.
    """
    profile = getattr(model, "profile", None) or {}
    wanted = [
        attachment
        for record in records
        if record.get("success")
        for attachment in record.get("attachments") or []
        if attachment.get("data") and profile.get(_MODALITIES.get(attachment["kind"], ""))
    ][-MAX_ANSWER_ATTACHMENTS:]
    blocks: list[dict[str, Any]] = []
    for attachment in wanted:
        blocks.append({"type": "text", "text": f"Attachment {attachment['handle']}:"})
        blocks.append(
            {
                "type": attachment["kind"],
                "base64": attachment["data"],
                "mime_type": attachment["mime_type"],
            }
        )
    return blocks


def _conversation(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """What the answer model reads of the transcript: the user's messages and the answers.

    The rounds' calls and results are left out: the run's results follow, injected.
    """
    view: list[BaseMessage] = []
    for message in messages:
        kind = message.type
        if kind == "human":
            view.append(message)
        elif kind == "ai" and not getattr(message, "tool_calls", None):
            if message_text(message).strip():
                view.append(AIMessage(message_text(message)))
        elif kind not in ("ai", "tool") and message_text(message).strip():
            view.append(HumanMessage(message_text(message)))
    return view


def _shown(message: BaseMessage) -> Any:
    return shown_result(message.content)


def _shown_results(
    messages: Sequence[BaseMessage], calls: frozenset[str], views: MessageViews
) -> dict[str, Any]:
    """The result each of the run's calls' `ToolMessage` holds, by `tool_call_id`."""
    return {
        message.tool_call_id: views.of("shown", message, _shown)
        for message in messages
        if isinstance(message, ToolMessage) and message.tool_call_id in calls
    }


def answer_compose(
    parts: LoopParts,
    state: LoopState,
    media: Sequence[dict[str, Any]] = (),
) -> Compose:
    """What the answer model is sent for the request's system message and transcript.

    The app's instructions and the loop's answer rules, the conversation (the user's
    messages and the answers, as the middleware left them), then, when a tool ran, the
    run's results keyed by purpose as their `ToolMessage`s hold them, with the
    quote-your-sources instruction, and the tools' media.
    """
    prompts = parts.prompts
    extra = state.get("user_extra_requirement", "")
    rules = prompts.render(
        "answer_system",
        user_extra_requirement=(
            f"Also follow this requirement: {quote_user_text(extra)}" if extra else ""
        ),
    )
    records = (state.get("round_state") or empty_round_state())["done_plans"]
    calls = frozenset(record.get("tool_call_id") or "" for record in records)

    def compose(
        system: SystemMessage | None, messages: list[BaseMessage], tools: list[Any]
    ) -> list[BaseMessage]:
        request = [system_message(system, rules), *_conversation(messages)]
        held = _shown_results(messages, calls, parts.views) if records else {}
        results = to_action_results(records, held) if records else {}
        if not results and not media:
            return request
        text = ""
        if results:
            shown = to_prompt_json(results)
            text = prompts.render(
                "answer_results", action_results=shown, result_notes=result_notes(shown)
            )
        if media:
            return [*request, HumanMessage([{"type": "text", "text": text}, *media])]
        return [*request, HumanMessage(text)]

    return compose


def configure_answer(model: Runnable[Any, BaseMessage]) -> Runnable[Any, BaseMessage]:
    """Tag and name an answer's model call (chat UIs filter on the tag)."""
    return model.with_config(tags=ANSWER_TAGS, run_name="answer")


@dataclass(frozen=True)
class AnswerPrompt:
    """The answer request a run's state calls for."""

    answerer: BaseChatModel
    """The answer model (the loop's fallback layer may take a failed call over)."""
    transcript: list[BaseMessage]
    """The transcript the request carries (`transcript_view`)."""
    compose: Compose
    """What is sent for the request (`answer_compose`)."""
    messages: list[BaseMessage]
    """What is sent when no middleware changes the request."""
    action_results: dict[str, Any]
    media: int
    """How many media attachments the request carries."""


def answer_prompt(parts: LoopParts, state: LoopState, scope: RunScope) -> AnswerPrompt:
    """Build the answer request for the run's state (the answer node's, and a speculative one)."""
    round_state = state.get("round_state") or empty_round_state()
    action_results = to_action_results(round_state["done_plans"])
    answerer = parts.models.answerer(scope.loop)
    media = media_blocks(round_state["done_plans"], answerer)
    settings = scope.settings
    transcript = transcript_view(
        state.get("messages") or (),
        keep_tool_results=None,
        history_turns=settings.history_turns,
        history_chars=settings.history_chars,
    )
    compose = answer_compose(parts, state, media)
    messages = compose(parts.system_prompt, transcript, [])
    return AnswerPrompt(answerer, transcript, compose, messages, action_results, len(media) // 2)


def refusal_of(message: AIMessage | None) -> str:
    """A reply's refusal: langchain-openai's `additional_kwargs["refusal"]`, or its blocks.

    Its standard `refusal` content blocks, joined ("" when it refused nothing).
    """
    if message is None:
        return ""
    refusal = message.additional_kwargs.get("refusal")
    if isinstance(refusal, str):
        return refusal
    if type(message.content) is not list:
        return ""
    return "".join(
        str(block.get("refusal") or "")
        for block in message.content
        if isinstance(block, dict) and block.get("type") == "refusal"
    )


def refusal_message(refusal: str, provider: str, decision: Mapping[str, Any]) -> AIMessage:
    """The refused reply as the model gave it: no text, the refusal beside it.

    As langchain-openai gives it (`additional_kwargs["refusal"]`) for its provider, else
    as the standard `refusal` content block; either reads as one in `content_blocks`.
    """
    message_id = decision.get("reply_id") or None
    if provider != "openai":
        return AIMessage([{"type": "refusal", "refusal": refusal}], id=message_id)
    return AIMessage(
        "",
        id=message_id,
        additional_kwargs={"refusal": refusal},
        response_metadata={"model_provider": provider},
    )
