"""`AuditLog` as a `wrap_tool_call` middleware: what it records, under invoke and ainvoke."""

from __future__ import annotations

from typing import Any

from langchain.agents.middleware import wrap_tool_call
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool

from agentloop import AuditLog, GovernanceOptions, ModelOptions, ToolPolicy, create_tool_loop
from agentloop.testing import ScriptedChatModel, plan_reply

calls = {"get_note": 0}


@tool
def get_note(title: str) -> str:
    """Read a note."""
    calls["get_note"] += 1
    return f"note {title}"


@tool
def get_weather(city: str) -> str:
    """Read the weather."""
    raise ConnectionError("the weather service is down")


@tool
def delete_note(title: str) -> str:
    """Delete a note."""
    raise AssertionError("never called: the middleware refuses it")


@wrap_tool_call
def no_deletes(request: Any, handler: Any) -> Any:
    """Refuse deletions without running the tool."""
    if request.tool_call["name"].startswith("delete_"):
        return ToolMessage("deleting is off", tool_call_id=request.tool_call["id"], status="error")
    return handler(request)


def _command(name: str, **kwargs: Any) -> dict[str, Any]:
    return {"tool_name": name, "tool_kwargs": kwargs}


ALL = [
    _command("get_note", title="tides"),
    _command("get_weather", city="Oslo"),
    _command("delete_note", title="tides"),
]


def _loop(audit: AuditLog, commands: list[dict[str, Any]] = ALL, rounds: int = 1) -> Any:
    plans = [plan_reply("execute", commands), plan_reply("response")] * rounds
    return create_tool_loop(
        ScriptedChatModel(plans),
        [get_note, get_weather, delete_note],
        models=ModelOptions(answer_model=ScriptedChatModel(["done"], repeat_last=True)),
        middleware=[audit, no_deletes],
        governance=GovernanceOptions(
            policies={"get_note": ToolPolicy(cache_ttl_s=60)}, default_retry=None
        ),
    )


async def test_the_audit_log_records_each_call_and_how_it_ended(run_loop: Any) -> None:
    audit = AuditLog()
    out = await run_loop(_loop(audit), {"user_input": "go"})
    by_name = {entry.tool_name: entry for entry in audit.entries}
    note, weather, delete = by_name["get_note"], by_name["get_weather"], by_name["delete_note"]
    records = {record["tool_name"]: record for record in out["round_state"]["done_plans"]}
    assert note.success and note.error_type == "" and note.arguments == {"title": "tides"}
    assert note.call_id == records["get_note"]["tool_call_id"]
    assert not note.from_cache and note.duration_ms >= 0
    assert not weather.success and weather.error_type == "network_error"
    assert weather.error == "the weather service is down"
    assert records["get_weather"]["error_type"] == "network_error"
    assert not delete.success and delete.error_type == "refused"
    assert delete.error == "deleting is off"
    assert records["delete_note"]["error_type"] == "refused"


async def test_the_audit_log_sees_a_result_the_loops_cache_gave(run_loop: Any) -> None:
    audit = AuditLog(max_entries=4)
    graph = _loop(audit, ALL[:2], rounds=2)  # no write: nothing invalidates the cache
    before = calls["get_note"]
    await run_loop(graph, {"user_input": "first"})
    await run_loop(graph, {"user_input": "second"})
    assert calls["get_note"] == before + 1
    notes = [entry for entry in audit.entries if entry.tool_name == "get_note"]
    assert [entry.from_cache for entry in notes] == [False, True]
    assert len(audit.entries) == 4
    graph = _loop(audit, [_command("get_weather", city="Rome")])
    await run_loop(graph, {"user_input": "third"})
    assert len(audit.entries) == 4  # the oldest was dropped
    assert audit.entries[-1].arguments == {"city": "Rome"}
