"""Model calls: retries, retry-after, no retry for auth/overflow, length, loops, fallbacks."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace
from typing import Any

import pytest
from langchain.agents.middleware import ModelRequest, ModelRetryMiddleware, wrap_model_call
from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from agentloop import ConfigurationError, ModelOptions, create_tool_loop
from agentloop.errors import is_retryable_model_error
from agentloop.middleware.stack import MODEL_CALL_KEY
from agentloop.models.calls import ModelRetryPolicy, is_degenerate, retry_after_s
from agentloop.models.resolve import resolve_model
from agentloop.testing import ScriptedChatModel, plan_reply

FAST = ModelRetryPolicy(max_attempts=3, initial_delay_s=0.01, max_delay_s=0.5, jitter=False)


@tool
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


class RateLimited(Exception):
    status_code = 429

    def __init__(self, retry_after: float) -> None:
        super().__init__("rate limited")
        self.retry_after = retry_after


class AuthenticationError(Exception):
    status_code = 401


def loop(planner: Any, answerer: Any, **options: Any) -> Any:
    models = replace(options.pop("models", ModelOptions(retry=FAST)), answer_model=answerer)
    return create_tool_loop(planner, [add], models=models, **options)


async def test_transient_planner_errors_are_retried() -> None:
    planner = ScriptedChatModel(
        [TimeoutError("slow"), ConnectionError("reset"), plan_reply("response")]
    )
    out = await loop(planner, ScriptedChatModel(["hi"])).ainvoke({"user_input": "x"})
    assert len(planner.requests) == 3
    assert out["answer"] == "hi"
    assert "parse_error" not in out["decision"]


async def test_retry_after_is_honoured() -> None:
    answerer = ScriptedChatModel([RateLimited(0.3), "done"])
    out = await loop(ScriptedChatModel([plan_reply("response")]), answerer).ainvoke(
        {"user_input": "x"}
    )
    assert out["answer"] == "done"
    assert len(answerer.requests) == 2
    assert retry_after_s(RateLimited(2)) == 2
    # asked to come back in an hour, the retry waits for it (the backoff alone is 10 ms)
    patient = ModelRetryPolicy(max_attempts=3, initial_delay_s=0.01, max_delay_s=7200)
    answerer = ScriptedChatModel([RateLimited(3600), "done"])
    graph = loop(
        ScriptedChatModel([plan_reply("response")]), answerer, models=ModelOptions(retry=patient)
    )
    run = asyncio.create_task(graph.ainvoke({"user_input": "x"}))
    try:
        for _ in range(3000):  # the first request is made at once (30 s only bound a hang)
            if answerer.requests:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)  # room for a retry that did not wait to show
        assert len(answerer.requests) == 1
        assert not run.done()
    finally:
        run.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await run


async def test_auth_and_context_overflow_are_not_retried() -> None:
    answerer = ScriptedChatModel([AuthenticationError("invalid api key")])
    out = await loop(ScriptedChatModel([plan_reply("response")]), answerer).ainvoke(
        {"user_input": "x"}
    )
    assert len(answerer.requests) == 1
    assert "credentials" in out["answer"]
    overflow = ValueError("This model's maximum context length is 8192 tokens")
    assert not is_retryable_model_error(overflow)
    planner = ScriptedChatModel([overflow])
    out = await loop(planner, ScriptedChatModel(["fallback answer"])).ainvoke({"user_input": "x"})
    assert len(planner.requests) == 1
    assert "context window" in out["decision"]["parse_error"]


async def test_answer_cut_by_length_is_asked_again_with_a_bigger_budget() -> None:
    budgets: list[Any] = []

    class Recording(ScriptedChatModel):
        async def _astream(
            self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any
        ) -> Any:
            budgets.append(kwargs.get("max_tokens"))  # answers are streamed
            async for chunk in super()._astream(messages, stop, run_manager, **kwargs):
                yield chunk

    cut = AIMessage("The answer is", response_metadata={"finish_reason": "length"})
    answerer = Recording([cut, cut, "The answer is 42."])
    out = await loop(ScriptedChatModel([plan_reply("response")]), answerer).ainvoke(
        {"user_input": "x"}
    )
    assert out["answer"] == "The answer is 42."
    assert budgets[0] is None
    assert budgets[1] == int(4096 * 1.1) + 1
    assert budgets[2] > budgets[1]


async def test_degenerate_reply_is_asked_again() -> None:
    looping = "Sure. " + "I will check that again and again. " * 20
    assert is_degenerate(looping)
    assert not is_degenerate("A normal, varied answer. " * 3)
    answerer = ScriptedChatModel([looping, "A clean answer."])
    out = await loop(ScriptedChatModel([plan_reply("response")]), answerer).ainvoke(
        {"user_input": "x"}
    )
    assert out["answer"] == "A clean answer."


async def test_fallback_models_are_tried_in_order() -> None:
    broken = ScriptedChatModel([ConnectionError("down")] * 10)
    backup = ScriptedChatModel(
        [
            plan_reply("execute", [{"tool_name": "add", "tool_kwargs": {"a": 1, "b": 1}}]),
            plan_reply("response"),
            "from backup",
        ]
    )
    graph = create_tool_loop(
        broken,
        [add],
        models=ModelOptions(retry=FAST, fallbacks=[backup]),
    )
    out = await graph.ainvoke({"user_input": "x"})
    assert out["answer"] == "from backup"
    assert out["round_state"]["done_plans"][0]["result"] == 2
    # the fallback layer sits inside the retry: each of the 3 calls falls back at once
    assert len(broken.requests) == 3


async def test_the_loops_retry_is_inside_the_apps_middleware_and_wraps_its_fallback(
    run_loop: Any,
) -> None:
    seen: list[str] = []

    @wrap_model_call
    def watch(request: ModelRequest[Any], handler: Any) -> Any:
        if request.state[MODEL_CALL_KEY] == "answer":
            seen.append(str(request.model.name))
        return handler(request)

    down = ScriptedChatModel([ConnectionError("down")], repeat_last=True, name="down")
    backup = ScriptedChatModel([ConnectionError("busy"), "from backup"], name="backup")
    graph = create_tool_loop(
        ScriptedChatModel([plan_reply("response")]),
        [add],
        middleware=[watch],
        models=ModelOptions(answer_model=down, fallbacks=[backup], retry=FAST),
    )
    out = await run_loop(graph, {"user_input": "x"})
    assert out["answer"] == "from backup"
    # app -> retry -> fallback -> model: the app's middleware sees one call of the answer
    # model; each retry tries the model, then its fallback
    assert seen == ["down"]
    assert (down.request_count, backup.request_count) == (2, 2)


async def test_a_retry_the_app_set_stays_beside_its_retry_middleware(run_loop: Any) -> None:
    def loop_with(retry: ModelRetryPolicy | None) -> tuple[Any, ScriptedChatModel]:
        down = ScriptedChatModel([ConnectionError("down")], repeat_last=True)
        middleware = ModelRetryMiddleware(max_retries=1, initial_delay=0, jitter=False)
        graph = create_tool_loop(
            ScriptedChatModel([plan_reply("response")], repeat_last=True),
            [add],
            middleware=[middleware],
            models=ModelOptions(answer_model=down, retry=retry),
        )
        return graph, down

    graph, down = loop_with(None)  # the middleware replaces the loop's retry
    out = await run_loop(graph, {"user_input": "x"})
    assert out["answer"] == "Model call failed after 2 attempts with ConnectionError: down"
    assert down.request_count == 2

    graph, down = loop_with(FAST)  # set by the app: the loop retries inside the middleware
    out = await run_loop(graph, {"user_input": "x"})
    assert out["answer"] == "Model call failed after 2 attempts with ConnectionError: down"
    assert down.request_count == 2 * 3


async def test_usage_and_cost_summary() -> None:
    planner = ScriptedChatModel(
        [
            plan_reply("execute", [{"tool_name": "add", "tool_kwargs": {"a": 1, "b": 2}}]),
            plan_reply("response"),
        ]
    )
    graph = loop(
        planner,
        ScriptedChatModel(["three"]),
        models=ModelOptions(retry=FAST, prices={"scripted": (1.0, 2.0)}),
        name="calc",
    )
    out = await graph.ainvoke({"user_input": "1+2"})
    usage = out["usage"]["calc"]
    assert usage["model_calls"] == 3
    assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0
    expected = (usage["input_tokens"] * 1.0 + usage["output_tokens"] * 2.0) / 1_000_000
    assert usage["cost_usd"] == pytest.approx(expected)


def test_model_strings() -> None:
    with pytest.raises(ConfigurationError, match="nosuchprovider"):
        resolve_model("nosuchprovider:some-model")
    with pytest.raises(ConfigurationError):
        resolve_model("")
