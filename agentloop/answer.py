"""The `answer` node: the final reply, with the normalized tool results injected."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable, RunnableConfig

from agentloop.errors import ModelBehaviorError
from agentloop.events import Emit
from agentloop.model_calls import ModelRetry, ainvoke_answer, invoke_answer
from agentloop.models import ModelProvider
from agentloop.planning.node import chunk_text
from agentloop.prompts import render_prompt, to_prompt_json
from agentloop.settings import LoopSettings
from agentloop.state import LoopState, ToolExecutionRecord, empty_round_state
from agentloop.usage import Prices, message_usage, usage_entry

__all__ = ["AnswerNode", "build_answer_messages", "to_action_results"]

ANSWER_TAGS = ["agentloop:answer"]


def _result_value(record: ToolExecutionRecord) -> Any:
    if not record["success"]:
        return {"error": record["error"], "result": record["result"]}
    if record.get("fallback"):
        return {"result": record["result"], "fallback": record["fallback"]}
    return record["result"]


def to_action_results(records: Iterable[ToolExecutionRecord]) -> dict[str, Any]:
    """Key each record's result by its purpose, as the answer model sees them.

    Repeated purposes get `" (2)"`, `" (3)"`... suffixes. A failed record gives
    `{"error", "result"}`; a fallback result gives `{"result", "fallback"}`.

    Args:
        records: `done_plans`, oldest first.

    Returns:
        The action results (empty when nothing ran).
    """
    results: dict[str, Any] = {}
    counts: dict[str, int] = {}
    for record in records:
        purpose = record["purpose"] or f"Use {record['tool_name']}"
        counts[purpose] = counts.get(purpose, 0) + 1
        key = purpose if counts[purpose] == 1 else f"{purpose} ({counts[purpose]})"
        while key in results:
            counts[purpose] += 1
            key = f"{purpose} ({counts[purpose]})"
        results[key] = _result_value(record)
    return results


def build_answer_messages(
    user_input: str, user_extra_requirement: str, action_results: dict[str, Any]
) -> list[BaseMessage]:
    """Render the answer request; tool results are injected only when a tool ran."""
    system = render_prompt(
        "answer_system",
        user_extra_requirement=(
            f"Also follow this requirement: {user_extra_requirement}"
            if user_extra_requirement
            else ""
        ),
    )
    human = render_prompt("answer_user", user_input=user_input)
    if action_results:
        human += "\n\n" + render_prompt(
            "answer_results", action_results=to_prompt_json(action_results)
        )
    return [SystemMessage(system), HumanMessage(human)]


class AnswerNode:
    """Calls the answer model once; a failing model gives a clear reply, not a crash.

    Args:
        models: The loop's models.
        emit_factory: Returns the run's settings and event emitter from a node's config.
        retry: How model calls are retried.
        prices: Model prices, for the cost summary.
        on_finish: Called with the run id once no tool will run anymore (releases the
            run's MCP sessions).
    """

    def __init__(
        self,
        models: ModelProvider,
        emit_factory: Callable[[RunnableConfig], tuple[LoopSettings, Emit]],
        retry: ModelRetry,
        *,
        prices: Prices | None = None,
        on_finish: Sequence[Callable[[str], None]] = (),
    ) -> None:
        self.models = models
        self.emit_factory = emit_factory
        self.retry = retry
        self.prices = prices
        self.on_finish = list(on_finish)

    def _request(
        self, state: LoopState, config: RunnableConfig
    ) -> tuple[list[BaseMessage], dict[str, Any], Emit, str]:
        settings, emit = self.emit_factory(config)
        for finish in self.on_finish:
            finish(state.get("run_id", ""))
        round_state = state.get("round_state") or empty_round_state()
        action_results = to_action_results(round_state["done_plans"])
        messages = build_answer_messages(
            state.get("user_input", ""), state.get("user_extra_requirement", ""), action_results
        )
        emit("answer_started", tool_results=len(action_results))
        return messages, action_results, emit, settings.name

    def _update(
        self,
        state: LoopState,
        reply: BaseMessage | None,
        error: BaseException | None,
        context: tuple[dict[str, Any], Emit, str, float],
    ) -> dict[str, Any]:
        action_results, emit, agent, started = context
        if error is not None:
            text = f"I could not produce an answer: {error}"
        else:
            text = chunk_text(reply) if reply is not None else ""
        emit(
            "answer_completed",
            chars=len(text),
            error=str(error) if error else "",
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
        )
        message = AIMessage(text, id=getattr(reply, "id", None) or None)
        update: dict[str, Any] = {
            "answer": text,
            "action_results": action_results,
            "messages": [message],
            "answered_input": state.get("user_input", ""),
        }
        if reply is not None:
            tokens_in, tokens_out = message_usage([reply])
            name = str((reply.response_metadata or {}).get("model_name") or "")
            update["usage"] = {agent: usage_entry(name, tokens_in, tokens_out, self.prices)}
        return update

    def _configure(self, model: Runnable[Any, BaseMessage]) -> Runnable[Any, BaseMessage]:
        return model.with_config(tags=ANSWER_TAGS, run_name="answer")

    def invoke(self, state: LoopState, config: RunnableConfig) -> dict[str, Any]:
        """Answer (sync)."""
        messages, action_results, emit, agent = self._request(state, config)
        started, reply, failure = time.perf_counter(), None, None
        try:
            reply = invoke_answer(
                self.models.answerers(config), messages, self.retry, chunk_text, self._configure
            )
        except ModelBehaviorError as error:
            failure = error
        return self._update(state, reply, failure, (action_results, emit, agent, started))

    async def ainvoke(self, state: LoopState, config: RunnableConfig) -> dict[str, Any]:
        """Answer (async)."""
        messages, action_results, emit, agent = self._request(state, config)
        started, reply, failure = time.perf_counter(), None, None
        try:
            reply = await ainvoke_answer(
                self.models.answerers(config), messages, self.retry, chunk_text, self._configure
            )
        except ModelBehaviorError as error:
            failure = error
        return self._update(state, reply, failure, (action_results, emit, agent, started))
