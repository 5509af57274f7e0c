"""The `answer` node: the final reply, with the normalized tool results injected."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import Runnable
from langgraph.runtime import Runtime

from agentloop.errors import ModelBehaviorError
from agentloop.events import AnswerCompleted, AnswerStarted, HeldEvents
from agentloop.hooks import HookRun, held_events, waiting_reply
from agentloop.messages import message_text
from agentloop.middleware import Compose
from agentloop.model_calls import Answer
from agentloop.nodes._runnable import LoopNode
from agentloop.nodes.answer_call import call_answerer
from agentloop.nodes.parts import LoopParts
from agentloop.planning.prompt import MessageViews, shown_result, transcript_view
from agentloop.prompts import (
    quote_user_text,
    result_notes,
    to_prompt_json,
)
from agentloop.settings import LoopContext, RunScope
from agentloop.state import LoopState, ToolExecutionRecord, empty_round_state, invocation_of
from agentloop.structured import StructuredResult
from agentloop.system_prompt import system_message
from agentloop.updates import AnswerUpdate
from agentloop.usage import message_usage, sum_usage, usage_entry, wasted_usage

if TYPE_CHECKING:
    from agentloop.accelerate import Accelerator, SpeculativeAnswer

__all__ = [
    "AFTER_ANSWER_NODE",
    "ANSWER_TAGS",
    "AnswerPrompt",
    "answer_prompt",
    "answer_compose",
    "make_answer",
    "make_answer_after_model",
    "media_blocks",
    "refusal_message",
    "refusal_of",
    "to_action_results",
]

AFTER_ANSWER_NODE = "answer.after_model"
"""The node of the answer's `after_model` hooks, named as `create_agent` names its."""

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


def _configure(model: Runnable[Any, BaseMessage]) -> Runnable[Any, BaseMessage]:
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


@dataclass
class _AnswerCall:
    """One answer request: its run scope and what it asks."""

    scope: RunScope
    prompt: AnswerPrompt
    started: float
    unplanned: str = ""
    """The reply when the planner failed before any tool ran (no model is asked then)."""
    adopted: AIMessage | None = None
    """The planner's text reply, when it is the answer (no model is asked then)."""
    speculative: SpeculativeAnswer | None = None
    """The answer the plan node started, when it is the one this request asks for."""
    wasted: list[dict[str, float]] = field(default_factory=list)
    """Usage of speculative answers that were not used."""
    held: HeldEvents | None = None
    """What the request said, held until the model call's `before_model` hooks ran."""


class _Answer:
    """Calls the answer model once; a failing model gives a clear reply, not a crash."""

    def __init__(self, parts: LoopParts, accelerator: Accelerator) -> None:
        self.parts = parts
        self.accelerator = accelerator

    def _request(self, state: LoopState, runtime: Runtime[LoopContext]) -> _AnswerCall:
        scope = self.parts.scope(runtime)
        prompt = answer_prompt(self.parts, state, scope)
        unplanned = ""
        if state.get("status") == "planner_failed" and not prompt.action_results:
            reason = state.get("status_reason") or "no usable plan"
            consulted = (
                "Tool calls started for a plan that was then rejected are in tool_logs, "
                "but their results were not used"
                if state.get("tool_logs")
                else "No tool was consulted"
            )
            unplanned = (
                f"I could not answer: {reason}. {consulted}, so rather than guess, "
                "I give no answer."
            )
        adopted = None if unplanned else self.accelerator.adopted_reply(state, scope)
        # a model is asked, after its `before_model` hooks: said once they let it go ahead
        held = None if unplanned or adopted else held_events(self.parts.hooks, scope.emit)
        if not unplanned:  # no plan, no answer to start: the reply says why
            started = AnswerStarted(
                tool_results=len(prompt.action_results),
                media=prompt.media,
                planner_reply=adopted is not None,
            )
            if held is None:
                scope.emit(started)
            else:
                held.append(started)
        speculative = self.accelerator.take_answer(invocation_of(state))
        call = _AnswerCall(scope, prompt, time.perf_counter(), unplanned)
        call.adopted = adopted
        call.held = held
        if speculative is not None:
            if adopted is not None:
                self._drop(call, speculative, "cancelled")
            elif not unplanned and speculative.matches(prompt.answerer, prompt.messages):
                call.speculative = speculative
            else:
                self._drop(call, speculative, "stale")
        return call

    def _drop(self, call: _AnswerCall, speculative: SpeculativeAnswer, outcome: str) -> None:
        """Cancel a speculative answer that is not used; its tokens still count."""
        name, tokens_in, tokens_out = speculative.drop(call.scope.emit, outcome)
        call.wasted.append(wasted_usage(name, tokens_in, tokens_out, self.parts.prices))

    def _adopted(self, call: _AnswerCall, answer: Answer | None) -> Answer | None:
        speculative = call.speculative
        assert speculative is not None
        if answer is None:
            self._drop(call, speculative, "unusable")
        return answer

    def _update(
        self,
        state: LoopState,
        call: _AnswerCall,
        answer: Answer | None,
        error: BaseException | None = None,
    ) -> AnswerUpdate:
        scope, action_results, started = call.scope, call.prompt.action_results, call.started
        reply = answer.message if answer is not None else None
        status, reason = state.get("status") or "ok", state.get("status_reason") or ""
        if status == "running":
            status = "ok"
        if error is not None:
            text = f"I could not produce an answer: {error}"
            status, reason = "answer_failed", str(error)
        elif call.unplanned:
            text = call.unplanned
        else:
            text = message_text(reply) if reply is not None else ""
        refusal = refusal_of(reply) if isinstance(reply, AIMessage) else ""
        if refusal and not text.strip():  # the answer is the refusal, as the model gave it
            text, reason = refusal, "the model refused"
        if answer is not None and answer.cut:
            status, reason = "answer_cut", answer.cut
        scope.emit(
            AnswerCompleted(
                chars=len(text),
                error=str(error) if error else "",
                cut=answer.cut if answer is not None else "",
                status=status,
                duration_ms=round((time.perf_counter() - started) * 1000, 3),
                planner_reply=call.adopted is not None,
            )
        )
        update: AnswerUpdate = {
            "answer": text,
            "action_results": action_results,
            "messages": [_final_message(text, reply, refusal)],
            "run_book": {"answered_input": state.get("user_input", "")},
            "status": status,
            "status_reason": reason,
        }
        entries = list(call.wasted)
        if reply is not None and call.adopted is None:  # the planner's call counted its usage
            tokens_in, tokens_out = message_usage([reply])
            name = str((reply.response_metadata or {}).get("model_name") or "")
            entries.append(usage_entry(name, tokens_in, tokens_out, self.parts.prices))
        if entries:
            update["usage"] = sum_usage({scope.settings.name: entry} for entry in entries)
        return self.parts.safe(update)

    async def run(self, state: LoopState, runtime: Runtime[LoopContext]) -> AnswerUpdate:
        """Answer; then, with a `response_format`, ask for the typed result."""
        self.parts.release_kept(invocation_of(state))  # no call of the run is to come
        call = self._request(state, runtime)
        try:
            return await self._run(state, runtime, call)
        except BaseException:  # cancelled, interrupted or failed: the answer is not used
            if call.speculative is not None:
                call.speculative.cancel()  # else it streams to its end for nobody
            raise

    async def _run(
        self, state: LoopState, runtime: Runtime[LoopContext], call: _AnswerCall
    ) -> AnswerUpdate:
        hooks = HookRun(self.parts.hooks, "answer", state, runtime, call.held)
        asks = not call.unplanned and call.adopted is None  # a model call, with its hooks
        if asks and (await hooks.before()) is not None:
            return hooks.merged(AnswerUpdate(action_results=call.prompt.action_results))
        if hooks.state is not state:  # the request is the transcript as the hooks left it
            call.prompt = answer_prompt(self.parts, hooks.state, call.scope)
        state = hooks.state
        update = await self._answered(state, call, runtime)
        # with after_model hooks the answer is checkpointed first, and they run in
        # `answer.after_model` (after the typed result, as create_agent makes it in
        # its model call): an interrupt in one resumes without another answer call
        hooks_after = self.parts.hooks is not None and self.parts.hooks.after_any_model
        deferred = asks and hooks_after
        if asks and not deferred:
            await hooks.after(update)
        structured = self.parts.structured
        if structured is None:
            return hooks.merged(update, deferred=deferred)
        if not _structurable(update):
            update = AnswerUpdate(**update, structured_response=None)
            return hooks.merged(update, deferred=deferred)
        prompt = call.prompt
        through = (self.parts.middleware, state, runtime)
        result = await structured.ask(
            prompt.answerer, prompt.transcript, prompt.compose, update["answer"], through
        )
        return hooks.merged(self._structured(update, result), deferred=deferred)

    async def _answered(
        self, state: LoopState, call: _AnswerCall, runtime: Runtime[Any]
    ) -> AnswerUpdate:
        if call.unplanned:
            return self._update(state, call, None)
        if call.adopted is not None:
            return self._update(state, call, Answer(call.adopted))
        speculative = call.speculative
        if speculative is not None:
            relayed = await speculative.adopt(_configure, call.scope.emit)
            adopted = self._adopted(call, relayed)
            if adopted is not None:
                return self._update(state, call, adopted)
        try:
            answer = await call_answerer(self.parts, state, runtime, call.prompt, _configure)
        except ModelBehaviorError as error:
            return self._update(state, call, None, error)
        return self._update(state, call, answer)

    def _structured(self, update: AnswerUpdate, result: StructuredResult) -> AnswerUpdate:
        """The answer's update with the typed result, or the status that says it failed."""
        update = {**update, "structured_response": result.value}
        if result.error:
            update["status"] = "structured_response_failed"
            update["status_reason"] = self.parts.safe_value(result.error)
        entries = [update.get("usage") or {}]
        for reply in result.replies:
            tokens_in, tokens_out = message_usage([reply])
            name = str((reply.response_metadata or {}).get("model_name") or "")
            entry = usage_entry(name, tokens_in, tokens_out, self.parts.prices)
            entries.append({self.parts.settings.name: entry})
        update["usage"] = sum_usage(entries)
        return update


def _final_message(text: str, reply: BaseMessage | None, refusal: str) -> AIMessage:
    """The transcript's last message: the answer, or a refusal as the model gave it."""
    message_id = getattr(reply, "id", None) or None
    if refusal and text == refusal and reply is not None:
        provider = str(reply.response_metadata.get("model_provider") or "")
        return refusal_message(refusal, provider, {"reply_id": message_id})
    return AIMessage(text, id=message_id)


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


def _structurable(update: AnswerUpdate) -> bool:
    """Whether the run has a model's answer to give as a typed result."""
    return update["status"] in ("ok", "answer_cut") and bool(update["answer"])


def make_answer(parts: LoopParts, accelerator: Accelerator) -> LoopNode:
    """Build the `answer` node of a loop (`accelerator`: what the plan node started ahead)."""
    node = _Answer(parts, accelerator)
    return LoopNode("answer", coroutine=node.run)


def make_answer_after_model(parts: LoopParts) -> LoopNode:
    """Build the `answer.after_model` node: the `after_model` hooks of the answer.

    As `plan.after_model` for the planner's reply: it runs them (in reverse list
    order, `HookRun.after`) once the `answer` node has checkpointed the answer, and only
    when that node asked the answer model. It is in the graph only when some middleware
    has such a hook.
    """

    async def after_answer(state: LoopState, runtime: Runtime[LoopContext]) -> AnswerUpdate:
        hooks = HookRun(parts.hooks, "answer", state, runtime)
        if waiting_reply(state) == "answer":
            await hooks.after()
        return hooks.merged(AnswerUpdate())

    return LoopNode(AFTER_ANSWER_NODE, coroutine=after_answer)
