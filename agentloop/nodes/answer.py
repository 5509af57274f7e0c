"""The `answer` node: the final reply, with the normalized tool results injected."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable
from langgraph.runtime import Runtime

from agentloop.errors import ModelBehaviorError
from agentloop.events import AnswerCompleted, AnswerStarted, HeldEvents
from agentloop.hooks import HookRun, held_events, waiting_reply
from agentloop.messages import conversation_turns, message_text
from agentloop.middleware import Render
from agentloop.model_calls import Answer
from agentloop.nodes._runnable import LoopNode
from agentloop.nodes.answer_call import call_answerer
from agentloop.nodes.parts import LoopParts
from agentloop.planning.prompt import conversation_text, default_prompts
from agentloop.prompts import (
    PromptSet,
    quote_user_text,
    result_notes,
    tagged_section,
    to_prompt_json,
)
from agentloop.settings import LoopContext, RunScope
from agentloop.state import LoopState, ToolExecutionRecord, empty_round_state, invocation_of
from agentloop.structured import StructuredResult
from agentloop.system_prompt import with_app_instructions
from agentloop.transcript import edited_prompt
from agentloop.updates import AnswerUpdate
from agentloop.usage import message_usage, sum_usage, usage_entry, wasted_usage

if TYPE_CHECKING:
    from agentloop.accelerate import Accelerator, SpeculativeAnswer

__all__ = [
    "AFTER_ANSWER_NODE",
    "ANSWER_TAGS",
    "AnswerPrompt",
    "answer_prompt",
    "build_answer_messages",
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


def _result_value(record: ToolExecutionRecord) -> Any:
    if record.get("stale"):
        age = record.get("stale_age_s", 0.0)
        return {"error": record["error"], "stale_result": record["result"], "stale_age_s": age}
    if not record["success"]:
        return {"error": record["error"], "result": record["result"]}
    if record.get("fallback"):
        return {"result": record["result"], "fallback": record["fallback"]}
    return record["result"]


_NOT_RUN_KEY = "commands not run (over the round's cap)"
"""The action result that stands for a run of commands refused for exceeding the
per-round cap (`{"error", "not_run"}`)."""


def to_action_results(records: Iterable[ToolExecutionRecord]) -> dict[str, Any]:
    """Key each record's result by its purpose, as the answer model sees them.

    A command without a purpose is named by its tool and arguments. Repeated purposes
    get `" (2)"`, `" (3)"`... suffixes. A failed record gives
    `{"error", "result"}`; a fallback result gives `{"result", "fallback"}`. Commands
    refused for exceeding the per-round cap are one item per run of them, keyed
    "commands not run (over the round's cap)": `{"error", "not_run": count}` (as the
    planner's prompt shows them).

    Args:
        records: `done_plans`, oldest first.

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
            purpose = record["purpose"] or (
                f"{record['tool_name']} {to_prompt_json(record['kwargs'])}"
            )
            value = _result_value(record)
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


def build_answer_messages(
    user_input: str,
    user_extra_requirement: str,
    action_results: dict[str, Any],
    media: Sequence[dict[str, Any]] = (),
    *,
    conversation: Sequence[dict[str, str]] = (),
    prompts: PromptSet | None = None,
) -> list[BaseMessage]:
    """Render the answer request; tool results are injected only when a tool ran.

    Earlier turns of the conversation come before the request; media (from
    `media_blocks`) follow the text in the same human message.
    """
    prompts = prompts or default_prompts()
    system = prompts.render(
        "answer_system",
        user_extra_requirement=(
            f"Also follow this requirement: {quote_user_text(user_extra_requirement)}"
            if user_extra_requirement
            else ""
        ),
    )
    turns = conversation_text(conversation)
    human = prompts.render(
        "answer_user",
        user_input=quote_user_text(user_input),
        conversation=turns,
        conversation_section=tagged_section("conversation", turns) if conversation else "",
    )
    if action_results:
        results = to_prompt_json(action_results)
        human += "\n\n" + prompts.render(
            "answer_results", action_results=results, result_notes=result_notes(results)
        )
    if media:
        return [SystemMessage(system), HumanMessage([{"type": "text", "text": human}, *media])]
    return [SystemMessage(system), HumanMessage(human)]


_PROMPT_KEYS = ("messages", "user_input", "user_extra_requirement", "round_state")
"""The state keys the answer's prompt is built from."""


def _configure(model: Runnable[Any, BaseMessage]) -> Runnable[Any, BaseMessage]:
    return model.with_config(tags=ANSWER_TAGS, run_name="answer")


@dataclass(frozen=True)
class AnswerPrompt:
    """The answer request a run's state calls for."""

    answerer: BaseChatModel
    """The answer model (the loop's fallback layer may take a failed call over)."""
    messages: list[BaseMessage]
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
    messages = build_answer_messages(
        state.get("user_input", ""),
        state.get("user_extra_requirement", ""),
        action_results,
        media,
        conversation=conversation_turns(
            state.get("messages") or [],
            max_turns=settings.history_turns,
            max_chars=settings.history_chars,
        ),
        prompts=parts.prompts,
    )
    messages = with_app_instructions(messages, parts.system_prompt)
    return AnswerPrompt(answerer, messages, action_results, len(media) // 2)


@dataclass
class _AnswerCall:
    """One answer request: its run scope, the results it injects, the model call's arguments."""

    scope: RunScope
    action_results: dict[str, Any]
    arguments: tuple[Any, ...]
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
        arguments = (
            prompt.answerer,
            prompt.messages,
            self.parts.model_retry,
            self.parts.model_limits,
            message_text,
            _configure,
        )
        speculative = self.accelerator.take_answer(invocation_of(state))
        call = _AnswerCall(scope, prompt.action_results, arguments, time.perf_counter(), unplanned)
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
        scope, action_results, started = call.scope, call.action_results, call.started
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
            return hooks.merged(AnswerUpdate(action_results=call.action_results))  # no call
        if hooks.changed(_PROMPT_KEYS):  # the prompt is built from the state the hooks left
            prompt = answer_prompt(self.parts, hooks.state, call.scope)
            call.arguments = (call.arguments[0], prompt.messages, *call.arguments[2:])
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
        model, messages = call.arguments[:2]
        through = (self.parts.middleware, state, runtime)
        result = await structured.ask(model, messages, update["answer"], through)
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
            render = self._render(state, call) if self.parts.middleware.models else None
            answer = await call_answerer(self.parts, state, runtime, call.arguments, render)
        except ModelBehaviorError as error:
            return self._update(state, call, None, error)
        return self._update(state, call, answer)

    def _render(self, state: LoopState, call: _AnswerCall) -> Render:
        """The answer's request for the transcript as a `wrap_model_call` middleware left it."""
        return edited_prompt(
            state, lambda edited: answer_prompt(self.parts, edited, call.scope).messages
        )

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
    """A reply's refusal (`additional_kwargs["refusal"]`, as langchain-openai gives it)."""
    refusal = message.additional_kwargs.get("refusal") if message is not None else None
    return refusal if isinstance(refusal, str) else ""


def refusal_message(refusal: str, provider: str, decision: Mapping[str, Any]) -> AIMessage:
    """The refused reply as the model gave it: no text, the refusal beside it."""
    metadata = {"model_provider": provider} if provider else {}
    return AIMessage(
        "",
        id=decision.get("reply_id") or None,
        additional_kwargs={"refusal": refusal},
        response_metadata=metadata,
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
