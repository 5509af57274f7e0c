"""The `answer` node: the final reply, with the normalized tool results injected."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
)
from langgraph.runtime import Runtime

from agentloop.base.messages import message_text
from agentloop.errors import ModelBehaviorError
from agentloop.middleware.hooks import HookRun, held_events, waiting_reply
from agentloop.models.calls import Answer
from agentloop.models.usage import message_usage, sum_usage, usage_entry, wasted_usage
from agentloop.nodes._runnable import LoopNode
from agentloop.nodes.answer_call import (
    AnswerPrompt,
    answer_prompt,
    call_answerer,
    configure_answer,
    refusal_message,
    refusal_of,
)
from agentloop.nodes.parts import LoopParts
from agentloop.nodes.structured import StructuredResult
from agentloop.nodes.updates import AnswerUpdate
from agentloop.observability.events import AnswerCompleted, AnswerStarted, HeldEvents
from agentloop.settings import LoopContext, RunScope
from agentloop.state import LoopState, invocation_of

if TYPE_CHECKING:
    from agentloop.nodes.accelerate import Accelerator, SpeculativeAnswer

__all__ = ["AFTER_ANSWER_NODE", "make_answer", "make_answer_after_model"]

AFTER_ANSWER_NODE = "answer.after_model"
"""The node of the answer's `after_model` hooks, named as `create_agent` names its."""


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
            relayed = await speculative.adopt(configure_answer, call.scope.emit)
            adopted = self._adopted(call, relayed)
            if adopted is not None:
                return self._update(state, call, adopted)
        try:
            answer = await call_answerer(self.parts, state, runtime, call.prompt, configure_answer)
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
