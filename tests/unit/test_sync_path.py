"""Under `invoke`, sync tools run through the one pipeline with no event loop per call."""

from __future__ import annotations

import asyncio
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.tools import tool

from agentloop import GovernanceOptions, ModelOptions, ToolPolicy, ToolRetry, create_tool_loop
from agentloop.base.sync import has_running_loop
from agentloop.testing import ScriptedChatModel, plan_reply


class LoopWatch(AgentMiddleware):  # type: ignore[type-arg]
    """A middleware that notes whether an event loop runs where the tool call runs.

    It has both hooks, as `AuditLog` does: `invoke` runs the sync one, `ainvoke` the async.
    """

    def __init__(self) -> None:
        super().__init__()
        self.loops: list[bool] = []

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        self.loops.append(has_running_loop())
        return handler(request)

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        self.loops.append(has_running_loop())
        return await handler(request)


class AppMiddleware(AgentMiddleware):  # type: ignore[type-arg]
    """The same with only the async hook: it needs an event loop."""

    def __init__(self) -> None:
        super().__init__()
        self.loops: list[bool] = []

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        await asyncio.sleep(0.001)  # needs an event loop
        self.loops.append(has_running_loop())
        return await handler(request)


def flaky_tools() -> tuple[list[Any], dict[str, int]]:
    attempts = {"get_rate": 0}

    @tool
    def get_rate(currency: str) -> str:
        """Read an exchange rate."""
        attempts["get_rate"] += 1
        if attempts["get_rate"] < 3:
            raise ConnectionError("the rates service is busy")
        return f"{currency}: 1.08"

    @tool
    def get_item(n: int) -> str:
        """Read item n."""
        return f"item {n}"

    return [get_rate, get_item], attempts


def loop(tools: list[Any], middleware: AgentMiddleware) -> Any:  # type: ignore[type-arg]
    plans = [
        plan_reply(
            "execute",
            [
                {"tool_name": "get_rate", "tool_kwargs": {"currency": "EUR"}},
                {"tool_name": "get_item", "tool_kwargs": {"n": 1}},
            ],
        ),
        plan_reply("response"),
    ]
    retry = ToolRetry(max_attempts=3, initial_delay_s=0.01, jitter=False)
    return create_tool_loop(
        ScriptedChatModel(plans),
        tools,
        models=ModelOptions(answer_model=ScriptedChatModel(["done"])),
        governance=GovernanceOptions(
            policies={"get_rate": ToolPolicy(retry=retry, rate_limit_per_s=50)}
        ),
        middleware=[middleware],
    )


async def test_sync_tools_run_without_an_event_loop_under_invoke(run_loop: Any) -> None:
    tools, attempts = flaky_tools()
    watch = LoopWatch()
    out = await run_loop(loop(tools, watch), {"user_input": "rate and item"})
    rate, item = out["round_state"]["done_plans"]
    assert rate["result"] == "EUR: 1.08" and rate["attempts"] == 3  # retried, waits included
    assert item["result"] == "item 1"
    assert attempts["get_rate"] == 3
    assert watch.loops == [run_loop.entry == "ainvoke"] * 2


async def test_an_async_only_middleware_gets_an_event_loop_under_invoke(run_loop: Any) -> None:
    tools, _ = flaky_tools()
    middleware = AppMiddleware()
    out = await run_loop(loop(tools, middleware), {"user_input": "rate and item"})
    assert [record["success"] for record in out["round_state"]["done_plans"]] == [True, True]
    assert middleware.loops == [True, True]
