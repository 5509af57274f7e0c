"""Tool-call governance through the public API: policies, pipeline stages, rollback."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from langchain.agents.middleware import wrap_tool_call
from langchain_core.messages import ToolMessage
from langchain_core.tools import StructuredTool, tool

from agentloop import (
    AuditLog,
    ConfigurationError,
    GovernanceOptions,
    ModelOptions,
    ResultCache,
    ToolPolicy,
    ToolRetry,
    call_status,
    create_tool_loop,
)
from agentloop.errors import is_transient_error
from agentloop.governance.freshness import StateTouch
from agentloop.governance.policy import resolve_policy
from agentloop.planning.prompt import OMITTED
from agentloop.testing import ScriptedChatModel, plan_reply, planning_round

FAST_RETRY = ToolRetry(max_attempts=3, initial_delay_s=0.01, max_delay_s=0.05)


def cmd(tool_name: str, purpose: str = "", **kwargs: Any) -> dict[str, Any]:
    return {"purpose": purpose, "tool_name": tool_name, "tool_kwargs": kwargs}


def one_round(*commands: dict[str, Any]) -> list[Any]:
    return [plan_reply("execute", list(commands)), plan_reply("response")]


Builder = Callable[..., tuple[Any, ScriptedChatModel]]


@pytest.fixture
def build(planning_for: Callable[..., dict[str, Any]]) -> Builder:
    """A loop of scripted models in the test's plan mode (options given override it)."""

    def loop(plans: list[Any], tools: list[Any], **options: Any) -> tuple[Any, ScriptedChatModel]:
        planner = ScriptedChatModel(plans)
        answerer = ScriptedChatModel(["ok"], repeat_last=True)
        options = {**planning_for(), **options}
        return create_tool_loop(
            planner, tools, models=ModelOptions(answer_model=answerer), **options
        ), planner

    return loop


async def events_and_state(graph: Any, text: str = "go") -> tuple[list[dict[str, Any]], Any]:
    events: list[dict[str, Any]] = []
    state: Any = None
    async for mode, chunk in graph.astream({"user_input": text}, stream_mode=["custom", "values"]):
        if mode == "custom":
            events.append(chunk)
        else:
            state = chunk
    return events, state


# -- timeouts and retries -------------------------------------------------------------------


async def test_non_idempotent_timeout_runs_exactly_once(run_loop: Any, build: Builder) -> None:
    calls = 0

    @tool
    async def send_email(to: str) -> str:
        """Send an email."""
        nonlocal calls
        calls += 1
        await asyncio.sleep(3600)  # it ends only at its timeout
        return "sent"

    graph, _ = build(
        one_round(cmd("send_email", to="a@b.c")),
        [send_email],
        governance=GovernanceOptions(
            policies={"send_email": ToolPolicy(timeout_s=0.1, retry=FAST_RETRY)}
        ),
    )
    out = await run_loop(graph, {"user_input": "mail"})
    record = out["tool_logs"][0]
    assert calls == 1
    assert record["success"] is False
    # cancelled at its timeout, it may have taken effect: never a plain timeout
    assert record["error_type"] == "unknown_outcome" and record["status"] == "unknown"
    assert record["attempts"] == 1
    assert record["result"]["error"] == "unknown_outcome"
    assert record["result"]["suggestion"]


async def test_idempotent_flaky_tool_succeeds_on_third_attempt(build: Builder) -> None:
    attempts = 0

    @tool
    async def get_quote(symbol: str) -> float:
        """Get a stock quote."""
        nonlocal attempts
        attempts += 1
        if attempts < 3:
            raise ConnectionError("connection reset by peer")
        return 101.5

    graph, _ = build(
        one_round(cmd("get_quote", symbol="ACME")),
        [get_quote],
        governance=GovernanceOptions(policies={"get_quote": ToolPolicy(retry=FAST_RETRY)}),
    )
    events, out = await events_and_state(graph)
    record = out["tool_logs"][0]
    assert record["success"] is True
    assert record["result"] == 101.5
    assert record["attempts"] == 3
    retries = [e for e in events if e["type"] == "tool_retry"]
    assert [e["attempt"] for e in retries] == [1, 2]


async def test_non_transient_errors_are_not_retried(run_loop: Any, build: Builder) -> None:
    attempts = 0

    @tool
    def get_thing(name: str) -> str:
        """Fails with a bug."""
        nonlocal attempts
        attempts += 1
        raise KeyError(name)

    graph, _ = build(
        one_round(cmd("get_thing", name="x")),
        [get_thing],
        governance=GovernanceOptions(policies={"get_thing": ToolPolicy(retry=FAST_RETRY)}),
    )
    out = await run_loop(graph, {"user_input": "go"})
    assert attempts == 1
    assert out["tool_logs"][0]["error_type"] == "internal_error"


async def test_sync_tool_timeout_is_abandoned_with_clear_error(
    run_loop: Any, build: Builder
) -> None:
    release = threading.Event()
    returned: list[str] = []

    @tool
    def read_slow(path: str) -> str:
        """Blocks."""
        release.wait(120)  # until the test ends (a run that waited for it would wait this)
        returned.append(path)
        return "late"

    graph, _ = build(
        one_round(cmd("read_slow", path="/x")),
        [read_slow],
        governance=GovernanceOptions(
            policies={"read_slow": ToolPolicy(timeout_s=0.1, retry=ToolRetry(max_attempts=1))}
        ),
    )
    try:
        out = await run_loop(graph, {"user_input": "go"})
        assert returned == [], "the run waited for the call it abandoned"
    finally:
        release.set()
    record = out["tool_logs"][0]
    assert record["error_type"] == "timeout"
    assert "did not finish within 0.1s" in record["error"]


async def test_timeout_resolution_order() -> None:
    @tool
    def search_x(q: str) -> str:
        """Search."""
        return q

    @tool
    def other(q: str) -> str:
        """Other."""
        return q

    by_prefix = {"search_": 7.0}
    assert resolve_policy(search_x, timeout_by_prefix=by_prefix).timeout_s == 7.0
    assert (
        resolve_policy(search_x, ToolPolicy(timeout_s=2), timeout_by_prefix=by_prefix).timeout_s
        == 2
    )
    assert resolve_policy(other, timeout_by_prefix=by_prefix, default_timeout_s=9).timeout_s == 9
    assert resolve_policy(other).timeout_s == 30.0


# -- validation and repair ------------------------------------------------------------------


async def test_invalid_arguments_never_reach_the_tool(run_loop: Any, build: Builder) -> None:
    seen: list[Any] = []

    @tool
    def get_page(number: int, strict: bool = False) -> str:
        """Fetch a page."""
        seen.append((number, strict))
        return f"page {number}"

    graph, _ = build(
        one_round(
            cmd("get_page", number="abc"),
            cmd("get_page", purpose="coerced", number="3", strict="true"),
            cmd("get_page", purpose="missing"),
        ),
        [get_page],
    )
    out = await run_loop(graph, {"user_input": "go"})
    bad, good, missing = out["tool_logs"]
    assert bad["error_type"] == "invalid_arguments"
    assert "number" in bad["error"]
    assert bad["attempts"] == 0
    assert missing["error_type"] == "invalid_arguments"
    assert good["success"] is True and good["result"] == "page 3"
    assert good["kwargs"] == {"number": 3, "strict": True}
    assert seen == [(3, True)]


async def test_raw_json_schema_tools_are_validated_and_coerced(
    run_loop: Any, build: Builder
) -> None:
    received: list[dict[str, Any]] = []

    async def lookup(**kwargs: Any) -> str:
        received.append(kwargs)
        return "found"

    raw_tool = StructuredTool.from_function(
        coroutine=lookup,
        name="lookup",
        description="An MCP-style tool with a raw JSON schema.",
        args_schema={
            "type": "object",
            "properties": {
                "limit": {"type": "integer", "default": 5},
                "query": {"type": "string"},
            },
            "required": ["query"],
        },
    )
    graph, _ = build(
        one_round(cmd("lookup", query=42), cmd("lookup", purpose="bad", limit=3)),
        [raw_tool],
    )
    out = await run_loop(graph, {"user_input": "go"})
    good, bad = out["tool_logs"]
    assert good["success"] is True
    assert received == [{"query": "42", "limit": 5}]
    assert bad["error_type"] == "invalid_arguments" and "query" in bad["error"]


async def test_argument_aliases_repair_without_mutating(run_loop: Any, build: Builder) -> None:
    @tool
    def get_profile(info_to_extract: str) -> str:
        """Extract info."""
        return info_to_extract.upper()

    kwargs = {"description": "founders"}
    graph, _ = build(
        one_round(cmd("get_profile", **kwargs)),
        [get_profile],
        governance=GovernanceOptions(
            policies={"get_profile": ToolPolicy(arg_aliases={"info_to_extract": ["description"]})}
        ),
    )
    out = await run_loop(graph, {"user_input": "go"})
    assert out["tool_logs"][0]["result"] == "FOUNDERS"
    assert out["tool_logs"][0]["kwargs"] == {"info_to_extract": "founders"}
    assert kwargs == {"description": "founders"}


# -- middleware and cache -------------------------------------------------------------------


async def test_cache_hit_skips_the_tool_across_runs(
    run_loop: Any, planning_for: Callable[..., dict[str, Any]]
) -> None:
    calls = 0

    @tool
    def search_docs(query: str) -> str:
        """Search documents."""
        nonlocal calls
        calls += 1
        return f"docs about {query}"

    planner = ScriptedChatModel(
        responder=lambda messages: str(
            plan_reply("execute", [cmd("search_docs", query="tides")])
            if planning_round(messages) == 0
            else plan_reply("response")
        )
    )
    graph = create_tool_loop(
        planner,
        [search_docs],
        models=ModelOptions(answer_model=ScriptedChatModel(["ok"], repeat_last=True)),
        governance=GovernanceOptions(policies={"search_docs": ToolPolicy(cache_ttl_s=60)}),
        **planning_for(),
    )
    first = await run_loop(graph, {"user_input": "user one"})
    second = await run_loop(graph, {"user_input": "user two"})
    assert calls == 1
    assert first["tool_logs"][0]["from_cache"] is False
    assert first["tool_logs"][0]["status"] == "succeeded"
    assert second["tool_logs"][0]["from_cache"] is True
    assert second["tool_logs"][0]["status"] == "cached"
    assert second["tool_logs"][0]["result"] == "docs about tides"


async def test_short_circuiting_middleware_keeps_the_audit_trace(
    run_loop: Any, build: Builder
) -> None:
    calls = 0

    @tool
    def get_price(item: str) -> int:
        """Price of an item."""
        nonlocal calls
        calls += 1
        return 10

    @wrap_tool_call
    def canned(request: Any, handler: Any) -> Any:
        if request.tool_call["name"] == "get_price":
            canned = json.dumps({"price": 0, "source": "canned"})
            return ToolMessage(canned, tool_call_id=request.tool_call["id"])
        return handler(request)

    audit = AuditLog()
    graph, _ = build(
        one_round(cmd("get_price", item="tea")), [get_price], middleware=[audit, canned]
    )
    out = await run_loop(graph, {"user_input": "go"})
    assert calls == 0
    assert json.loads(out["tool_logs"][0]["result"]) == {"price": 0, "source": "canned"}
    [entry] = audit.entries
    assert entry.tool_name == "get_price"
    assert entry.arguments == {"item": "tea"}
    assert entry.success is True


async def test_middleware_can_change_the_call(run_loop: Any, build: Builder) -> None:
    @tool
    def get_echo(text: str) -> str:
        """Echo."""
        return text

    @wrap_tool_call
    async def shout(request: Any, handler: Any) -> Any:
        args = request.tool_call["args"]
        changed = {**request.tool_call, "args": {**args, "text": args["text"] + "!"}}
        return await handler(request.override(tool_call=changed))

    graph, _ = build(one_round(cmd("get_echo", text="hi")), [get_echo], middleware=[shout])
    out = await run_loop(graph, {"user_input": "go"})
    assert out["tool_logs"][0]["result"] == "hi!"


async def test_failing_middleware_gives_a_failed_record(run_loop: Any, build: Builder) -> None:
    @tool
    def get_x(q: str) -> str:
        """X."""
        return q

    @wrap_tool_call
    def broken(request: Any, handler: Any) -> Any:
        raise ValueError("middleware bug")

    graph, _ = build(one_round(cmd("get_x", q="a")), [get_x], middleware=[broken])
    out = await run_loop(graph, {"user_input": "go"})
    assert out["tool_logs"][0]["success"] is False
    assert "middleware bug" in out["tool_logs"][0]["error"]


async def test_rate_limit_spaces_calls(run_loop: Any, build: Builder) -> None:
    @tool
    async def get_tick(n: int) -> int:
        """Tick."""
        return n

    graph, _ = build(
        one_round(*[cmd("get_tick", n=i) for i in range(4)]),
        [get_tick],
        governance=GovernanceOptions(policies={"get_tick": ToolPolicy(rate_limit_per_s=10)}),
    )
    out = await run_loop(graph, {"user_input": "go"})
    assert [r["result"] for r in out["tool_logs"]] == [0, 1, 2, 3]


async def test_rate_limit_holds_a_call_until_its_slot(build: Builder) -> None:
    started: list[int] = []

    @tool
    async def get_tick(n: int) -> int:
        """Tick."""
        started.append(n)
        return n

    graph, _ = build(
        one_round(*[cmd("get_tick", n=i) for i in range(2)]),
        [get_tick],
        # one call an hour: the second call's slot is an hour after the first's
        governance=GovernanceOptions(policies={"get_tick": ToolPolicy(rate_limit_per_s=1 / 3600)}),
    )
    run = asyncio.create_task(graph.ainvoke({"user_input": "go"}))
    try:
        for _ in range(3000):  # the first call runs at once (30 s only bound a hang)
            if started:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)  # room for a second call the limit failed to hold to show
        assert started == [0]
        assert not run.done()
    finally:
        run.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await run


# -- fallbacks ------------------------------------------------------------------------------


async def test_app_middleware_sees_the_tool_before_the_fallback_and_the_bound(
    run_loop: Any, build: Builder
) -> None:
    seen: list[str] = []

    @tool
    def get_report(name: str) -> str:
        """A long report."""
        if name == "down":
            raise ConnectionError("report service down")
        return "r" * 5_000

    @wrap_tool_call
    def watch(request: Any, handler: Any) -> Any:
        try:
            message = handler(request)
        except ConnectionError as error:
            seen.append(f"raised {error}")
            raise
        seen.append(f"{len(message.content)} characters")
        return message

    policy = ToolPolicy(
        max_result_chars=1_000, stub_result="no report today", retry=ToolRetry(max_attempts=1)
    )
    graph, _ = build(
        one_round(cmd("get_report", name="up"), cmd("get_report", name="down")),
        [get_report],
        middleware=[watch],
        governance=GovernanceOptions(policies={"get_report": policy}),
    )
    out = await run_loop(graph, {"user_input": "go"})
    # the two calls run together: the middleware sees them in the order they end
    assert sorted(seen) == ["5000 characters", "raised report service down"]
    whole, stub = out["tool_logs"]
    assert whole["success"] and whole["truncated"] and len(whole["result"]) <= 1_000
    assert stub["success"] and stub["fallback"] == "stub" and stub["result"] == "no report today"


async def test_a_stub_that_cannot_be_converted_leaves_a_bounded_graceful_error(
    run_loop: Any, build: Builder
) -> None:
    class Unreadable(dict):  # type: ignore[type-arg]
        def items(self) -> Any:
            raise RuntimeError("unreadable stub")

    @tool
    def get_quote(symbol: str) -> str:
        """A quote."""
        raise RuntimeError("quote feed failed: " + "x" * 50_000)

    policy = ToolPolicy(
        stub_result=Unreadable(price=0), max_result_chars=600, retry=ToolRetry(max_attempts=1)
    )
    graph, _ = build(
        one_round(cmd("get_quote", symbol="ACME")),
        [get_quote],
        governance=GovernanceOptions(policies={"get_quote": policy}),
    )
    out = await run_loop(graph, {"user_input": "go"})
    [quote] = out["tool_logs"]
    assert not quote["success"] and quote["fallback"] == "" and quote["truncated"]
    assert quote["error_type"] == "internal_error" and "unreadable stub" in quote["error"]
    assert quote["result"]["error"] == "internal_error"
    assert len(json.dumps(quote["result"])) <= 600
    assert out["answer"] == "ok"


async def test_stale_cache_then_stub_then_graceful_error(
    run_loop: Any, planning_for: Callable[..., dict[str, Any]]
) -> None:
    healthy = True

    @tool
    def get_rate(currency: str) -> float:
        """Exchange rate."""
        if not healthy:
            raise ConnectionError("service unavailable")
        return 1.25

    @tool
    def get_forecast(city: str) -> str:
        """Weather forecast."""
        raise ConnectionError("service unavailable")

    @tool
    def get_news(topic: str) -> str:
        """News."""
        raise RuntimeError("parser crashed")

    policies = {
        "get_rate": ToolPolicy(retry=ToolRetry(max_attempts=1), stale_fallback_s=3600),
        "get_forecast": ToolPolicy(
            stub_result="forecast unavailable", retry=ToolRetry(max_attempts=1)
        ),
    }
    planner = ScriptedChatModel(
        responder=lambda messages: str(
            plan_reply(
                "execute",
                [
                    cmd("get_rate", currency="EUR"),
                    cmd("get_forecast", city="Oslo"),
                    cmd("get_news", topic="x"),
                ],
            )
            if planning_round(messages) == 0
            else plan_reply("response")
        )
    )
    graph = create_tool_loop(
        planner,
        [get_rate, get_forecast, get_news],
        models=ModelOptions(answer_model=ScriptedChatModel(["ok"], repeat_last=True)),
        governance=GovernanceOptions(policies=policies),
        **planning_for(),
    )
    await run_loop(graph, {"user_input": "one"})
    healthy = False
    out = await run_loop(graph, {"user_input": "two"})
    rate, forecast, news = out["tool_logs"]
    assert rate["success"] is False and "service unavailable" in rate["error"]
    assert rate["fallback"] == "stale_cache" and rate["stale"] is True and rate["result"] == 1.25
    assert 0 <= rate["stale_age_s"] < 60
    assert forecast["fallback"] == "stub" and forecast["result"] == "forecast unavailable"
    assert news["success"] is False and news["fallback"] == ""
    assert [rate["status"], forecast["status"], news["status"]] == ["stale", "stub", "failed"]
    assert news["result"] == {
        "error": "internal_error",
        "tool": "get_news",
        "message": "parser crashed",
        "suggestion": news["result"]["suggestion"],
    }
    assert out["action_results"]["Use get_rate"] == {
        "error": rate["error"],
        "stale_result": 1.25,
        "stale_age_s": rate["stale_age_s"],
    }


async def test_no_stale_result_without_opting_in(
    run_loop: Any, planning_for: Callable[..., dict[str, Any]]
) -> None:
    healthy = True

    @tool
    def get_rate(currency: str) -> float:
        """Exchange rate."""
        if not healthy:
            raise ConnectionError("service unavailable")
        return 1.25

    planner = ScriptedChatModel(
        responder=lambda messages: str(
            plan_reply("execute", [cmd("get_rate", currency="EUR")])
            if planning_round(messages) == 0
            else plan_reply("response")
        )
    )
    graph = create_tool_loop(
        planner,
        [get_rate],
        models=ModelOptions(answer_model=ScriptedChatModel(["ok"], repeat_last=True)),
        governance=GovernanceOptions(
            policies={"get_rate": ToolPolicy(retry=ToolRetry(max_attempts=1))}
        ),
        **planning_for(),
    )
    await run_loop(graph, {"user_input": "one"})
    healthy = False
    out = await run_loop(graph, {"user_input": "two"})
    [rate] = out["tool_logs"]
    assert rate["success"] is False and rate["fallback"] == "" and "stale" not in rate
    assert rate["result"]["error"] == "network_error"


# -- results ---------------------------------------------------------------------------------


async def test_huge_json_result_stays_valid_json(run_loop: Any, build: Builder) -> None:
    @tool
    def get_dump(n: int) -> str:
        """A 2 MB JSON document."""
        return json.dumps({"items": [{"id": i, "text": "x" * 2000} for i in range(1000)]})

    graph, _ = build(one_round(cmd("get_dump", n=1)), [get_dump])
    out = await run_loop(graph, {"user_input": "go"})
    record = out["tool_logs"][0]
    assert record["truncated"] is True
    text = record["result"]
    assert len(text) <= 21_000
    parsed = json.loads(text)
    assert "items" in parsed
    assert "truncated" in text


async def test_non_serializable_result_becomes_data(run_loop: Any, build: Builder) -> None:
    class Thing:
        def __repr__(self) -> str:
            return "<Thing>"

    @tool
    def get_thing(n: int) -> Any:
        """Returns an object."""
        return {"thing": Thing(), "when": time.time()}

    graph, _ = build(one_round(cmd("get_thing", n=1)), [get_thing])
    out = await run_loop(graph, {"user_input": "go"})
    json.dumps(out["tool_logs"][0]["result"])


# -- judging, duplicates, rollback ----------------------------------------------------------


async def test_useless_result_is_flagged_and_compact(run_loop: Any, build: Builder) -> None:
    @tool
    def search_hits(query: str) -> list[str]:
        """Search."""
        return []

    @tool
    def get_ok(q: str) -> str:
        """Fine."""
        return "fine"

    graph, _ = build(
        one_round(cmd("search_hits", query="zzz"), cmd("get_ok", q="a")),
        [search_hits, get_ok],
        governance=GovernanceOptions(
            policies={"search_hits": ToolPolicy(check_result=lambda r: bool(r) or "no hits")}
        ),
    )
    out = await run_loop(graph, {"user_input": "go"})
    flagged, good = out["round_state"]["done_plans"]
    assert flagged["flagged"] is True and flagged["success"] is False
    assert flagged["error"] == "no hits" and flagged["result"] is None
    assert good["result"] == "fine"
    assert out["round_state"]["round_index"] == 1


async def test_duplicate_rollback_stops_after_the_cap(
    planning_for: Callable[..., dict[str, Any]],
) -> None:
    calls = 0

    @tool
    def search_same(query: str) -> str:
        """Search."""
        nonlocal calls
        calls += 1
        return "same result"

    planner = ScriptedChatModel(
        responder=lambda messages: str(plan_reply("execute", [cmd("search_same", query="q")]))
    )
    graph = create_tool_loop(
        planner,
        [search_same],
        models=ModelOptions(answer_model=ScriptedChatModel(["ok"], repeat_last=True)),
        max_rounds=2,
        **planning_for(max_consecutive_rollbacks=3),
    )
    events, out = await events_and_state(graph)
    rolled = [e for e in events if e["type"] == "tool_rolled_back"]
    assert len(rolled) == 3
    assert len(out["rollbacks"]) == 3
    # round 1 ran it, 3 rollbacks, then the repeat was allowed to run as round 2
    assert calls == 2
    assert out["round_state"]["round_index"] == 2
    assert len(planner.requests) == 5
    request = "\n".join(str(message.content) for message in planner.requests[2])
    assert "Duplicate query" in request  # the rolled-back round, in the transcript
    native = planning_for()["plan_mode"] == "native"
    assert ("rolled back" in str(planner.requests[2][-1].content)) is not native  # JSON's note
    assert out["answer"] == "ok"


async def test_duplicate_in_mixed_round_is_compact_and_round_advances(
    run_loop: Any, planning_for: Callable[..., dict[str, Any]]
) -> None:
    @tool
    def search_a(query: str) -> str:
        """Search."""
        return "A" * 500

    planner = ScriptedChatModel(
        [
            plan_reply("execute", [cmd("search_a", query="x")]),
            plan_reply("execute", [cmd("search_a", query="x"), cmd("search_a", query="y")]),
            plan_reply("response"),
        ]
    )
    graph = create_tool_loop(
        planner,
        [search_a],
        models=ModelOptions(answer_model=ScriptedChatModel(["ok"], repeat_last=True)),
        **planning_for(),
    )
    out = await run_loop(graph, {"user_input": "go"})
    duplicate, fresh = out["round_state"]["last_round_records"]
    assert duplicate["duplicate"] is True and duplicate["flagged"] is True
    assert duplicate["status"] == "skipped"
    assert duplicate["result"] is None
    assert "round 0" in duplicate["error"]
    assert fresh["success"] is True
    assert out["round_state"]["round_index"] == 2
    assert out["rollbacks"] == []


async def test_planner_sees_only_recent_results_in_full(
    run_loop: Any, build: Builder, planning_for: Callable[..., dict[str, Any]]
) -> None:
    @tool
    def get_n(n: int) -> str:
        """Numbered result."""
        return f"RESULT-{n} " + "long text " * 20  # long enough to be omitted

    plans = [plan_reply("execute", [cmd("get_n", n=i)]) for i in range(5)] + [
        plan_reply("response")
    ]
    graph, planner = build(plans, [get_n], max_rounds=6, **planning_for(keep_tool_results=2))
    await run_loop(graph, {"user_input": "go"})
    prompts = ["\n".join(str(m.content) for m in request) for request in planner.requests]
    # 4 results shown before: a block of 2 omitted at once, the 2 latest and the new one kept
    assert all(f"RESULT-{n}" in prompts[5] for n in (2, 3, 4))
    assert "RESULT-0" not in prompts[5] and "RESULT-1" not in prompts[5]
    assert prompts[5].count(OMITTED) == 2
    # before that (3 shown before), the history only grew at its end
    assert all(f"RESULT-{n}" in prompts[4] for n in (0, 1, 2, 3))
    assert OMITTED not in prompts[4]


async def test_keep_tool_results_never_hides_a_result_not_shown_yet(
    run_loop: Any, build: Builder, planning_for: Callable[..., dict[str, Any]]
) -> None:
    @tool
    def get_n(n: int) -> str:
        """Numbered result."""
        return f"RESULT-{n} " + "long text " * 20  # long enough to be omitted

    plans = [
        plan_reply("execute", [cmd("get_n", n=i) for i in range(8)]),
        plan_reply("execute", [cmd("get_n", n=8)]),
        plan_reply("response"),
    ]
    graph, planner = build(plans, [get_n], **planning_for(keep_tool_results=5))
    await run_loop(graph, {"user_input": "go"})
    after_big_round = "\n".join(str(m.content) for m in planner.requests[1])
    assert all(f"RESULT-{n}" in after_big_round for n in range(8))
    assert OMITTED not in after_big_round
    after_next = "\n".join(str(m.content) for m in planner.requests[2])
    # 8 results shown before, fewer than 2 blocks of 5: none omitted yet
    assert all(f"RESULT-{n}" in after_next for n in range(9))
    assert OMITTED not in after_next


# -- policies --------------------------------------------------------------------------------


def test_name_rules_annotations_and_metadata() -> None:
    @tool
    def send_sms(to: str) -> str:
        """Send."""
        return to

    @tool
    def search_x(q: str) -> str:
        """Search."""
        return q

    @tool
    def lookup(q: str) -> str:
        """Lookup."""
        return q

    assert not resolve_policy(send_sms).concurrency_safe
    assert not resolve_policy(send_sms).idempotent
    assert resolve_policy(search_x).concurrency_safe and resolve_policy(search_x).idempotent
    lookup.metadata = {"destructiveHint": True}
    assert not resolve_policy(lookup).concurrency_safe
    lookup.metadata = {"readOnlyHint": True, "agentloop": {"timeout_s": 3}}
    policy = resolve_policy(lookup)
    assert policy.concurrency_safe and policy.timeout_s == 3
    explicit = resolve_policy(lookup, ToolPolicy(concurrency_safe=False))
    assert not explicit.concurrency_safe
    assert not resolve_policy(send_sms, ToolPolicy(retry=FAST_RETRY)).retryable


def test_bad_configuration_is_rejected_clearly() -> None:
    @tool
    def get_a(q: str) -> str:
        """A."""
        return q

    model = ScriptedChatModel([])
    with pytest.raises(ConfigurationError, match="unknown tools"):
        create_tool_loop(
            model, [get_a], governance=GovernanceOptions(policies={"nope": ToolPolicy()})
        )
    with pytest.raises(ConfigurationError, match="max_rounds"):
        create_tool_loop(model, [get_a], max_rounds=-1)
    with pytest.raises(ConfigurationError, match="plan_mode"):
        create_tool_loop(model, [get_a], plan_mode="xml")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="unique"):
        create_tool_loop(model, [get_a, get_a])
    with pytest.raises(ValueError):
        ToolPolicy(timeout_s=-1)


def test_transient_error_classification() -> None:
    class RateLimitError(Exception):
        status_code = 429

    assert is_transient_error(ConnectionError())
    assert is_transient_error(TimeoutError())
    assert is_transient_error(RateLimitError("slow down"))
    assert is_transient_error(RuntimeError("503 Service Unavailable"))
    assert not is_transient_error(ValueError("bad input"))
    assert not is_transient_error(KeyError("x"))


async def test_idempotency_key_is_the_stable_call_key(run_loop: Any, build: Builder) -> None:
    keys: list[str] = []

    @tool
    def save_order(item: str, idempotency_key: str = "") -> str:
        """Save an order."""
        keys.append(idempotency_key)
        return "saved"

    graph, _ = build(one_round(cmd("save_order", item="tea")), [save_order])
    out = await run_loop(graph, {"user_input": "go"})
    assert keys == [out["tool_logs"][0]["call_key"]]
    assert len(keys[0]) == 24


def test_result_cache_is_bounded_in_entries_bytes_and_time() -> None:
    now = [0.0]
    cache = ResultCache(max_entries=3, max_bytes=1_000, clock=lambda: now[0])
    for n in range(5):
        cache.put(f"k{n}", n, ttl_s=10)
    assert [cache.get(f"k{n}") is not None for n in range(5)] == [False, False, True, True, True]
    cache.remember("big", "x" * 600, keep_s=10)
    cache.remember("bigger", "y" * 600, keep_s=10)  # both do not fit in 1,000 characters
    assert cache.last_good("big") is None and cache.last_good("bigger") is not None
    cache.remember("huge", "z" * 5_000, keep_s=10)  # larger than the bound: not kept
    assert cache.last_good("huge") is None
    now[0] = 11.0
    assert cache.get("k4") is None and cache.last_good("bigger") is None
    assert cache.size_bytes <= 1_000


def test_result_cache_entries_live_their_own_time_and_leave_least_recently_used_first() -> None:
    now = [0.0]
    cache = ResultCache(max_entries=2, max_bytes=1_000, clock=lambda: now[0])
    cache.put("short", "s", ttl_s=1)
    cache.put("long", "l", ttl_s=100)
    now[0] = 2.0
    assert cache.get("short") is None
    assert len(cache) == 1 and cache.size_bytes == len('"l"')  # expired: neither counted
    hit = cache.get("long")
    assert hit is not None and hit.age_s == 2.0
    cache.put("a", 1, ttl_s=100, touch=StateTouch("files", (("path", '"a"'),)))
    assert cache.invalidate(StateTouch("files", (("path", '"b"'),))) == 1  # "long" read all
    cache.put("c", 3, ttl_s=100, touch=StateTouch("files", (("path", '"c"'),)))
    assert cache.get("a") is not None  # "c" is now the least recently used
    assert cache.invalidate(StateTouch("files", (("path", '"b"'),))) == 0
    cache.put("b", 2, ttl_s=100)  # over two entries: "c" goes, as invalidate kept the order
    assert [cache.get(key) is not None for key in "abc"] == [True, True, False]
    with pytest.raises(ValueError, match="bounds must be >= 0"):
        ResultCache(max_bytes=-1)


@pytest.mark.parametrize(
    ("record", "status"),
    [
        ({"success": True, "error_type": ""}, "succeeded"),
        ({"success": True, "from_cache": True}, "cached"),
        ({"success": True, "fallback": "stub", "error_type": "timeout"}, "stub"),
        ({"success": False, "fallback": "stale_cache", "error_type": "timeout"}, "stale"),
        ({"success": False, "stale": True, "error_type": "network_error"}, "stale"),
        ({"success": False, "error_type": "useless_result", "flagged": True}, "failed"),
        ({"success": False, "error_type": "unknown_outcome"}, "unknown"),
        ({"success": False, "error_type": "duplicate", "duplicate": True}, "skipped"),
        ({"success": False, "error_type": "invalid_arguments"}, "skipped"),
        ({"success": False, "error_type": ""}, "failed"),
    ],
)
def test_call_status_reads_a_record_written_without_one(
    record: dict[str, Any], status: str
) -> None:
    assert call_status(record) == status
