"""A chat model that does not stream: its whole reply is read as a streamed one is.

LangChain's `stream` / `astream` of a model without `_stream` / `_astream` yield its one
reply whole, an `AIMessage` (not a chunk): its tool calls are `tool_calls`, with no
`tool_call_chunks`. Every plan mode reads them, through both entry points and both
input forms, and the transcript holds the plan with its calls.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from pydantic import Field, PrivateAttr

from agentloop import create_tool_loop
from agentloop.testing import plan_reply


class WholeReplies(BaseChatModel):
    """Replies from a script, each whole: `_generate` only, as many custom models are."""

    replies: list[AIMessage]
    requests: list[list[BaseMessage]] = Field(default_factory=list)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "whole-replies"

    def bind_tools(self, tools: Any, **kwargs: Any) -> WholeReplies:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        with self._lock:
            self.requests.append(list(messages))
            reply = self.replies[len(self.requests) - 1]
        return ChatResult(generations=[ChatGeneration(message=reply)])


def first_plan(plan_mode: str) -> AIMessage:
    """The planner's first reply in `plan_mode`: look up the weather in Oslo and in Bergen."""
    commands = [
        {"tool_name": "get_weather", "tool_kwargs": {"city": city}} for city in ("Oslo", "Bergen")
    ]
    if plan_mode == "native":
        return AIMessage(
            "",
            id="plan-1",
            tool_calls=[
                {"name": "get_weather", "args": {"city": city}, "id": f"call-{city}"}
                for city in ("Oslo", "Bergen")
            ],
        )
    reply = plan_reply("execute", commands, as_tool_call=plan_mode == "tool")
    return reply if isinstance(reply, AIMessage) else AIMessage(reply, id="plan-1")


def then_answer(plan_mode: str) -> list[AIMessage]:
    """The replies after the first plan: native answers at once, the others plan, then answer."""
    answer = AIMessage("Sunny in Oslo and in Bergen.")
    if plan_mode == "native":
        return [answer]
    decision = plan_reply("response", as_tool_call=plan_mode == "tool")
    return [decision if isinstance(decision, AIMessage) else AIMessage(decision), answer]


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@pytest.mark.parametrize("plan_mode", ["native", "json", "tool"])
@pytest.mark.parametrize("input_form", ["user_input", "messages"])
async def test_a_model_that_does_not_stream_has_its_calls_run(
    run_loop: Any, plan_mode: str, input_form: str
) -> None:
    model = WholeReplies(replies=[first_plan(plan_mode), *then_answer(plan_mode)])
    loop = create_tool_loop(model, [get_weather], plan_mode=plan_mode)  # type: ignore[arg-type]
    question = "What is the weather in Oslo and in Bergen?"
    payload = (
        {"user_input": question}
        if input_form == "user_input"
        else {"messages": [HumanMessage(question)]}
    )
    out = await run_loop(loop, payload)
    assert out["status"] == "ok"
    assert [(r["tool_name"], r["status"]) for r in out["tool_logs"]] == [
        ("get_weather", "succeeded"),
        ("get_weather", "succeeded"),
    ]
    assert [r["result"] for r in out["tool_logs"]] == ["sunny in Oslo", "sunny in Bergen"]
    assert out["answer"] == "Sunny in Oslo and in Bergen."
    plans = [m for m in out["messages"] if isinstance(m, AIMessage) and m.tool_calls]
    assert [call["args"] for call in plans[0].tool_calls] == [{"city": "Oslo"}, {"city": "Bergen"}]
    results = [m.content for m in out["messages"] if isinstance(m, ToolMessage)]
    assert len(results) == 2 and all("sunny in" in str(content) for content in results)
    assert len(model.requests) == len(model.replies)
