"""Progress events: declared once, emitted only as declared, documented as declared."""

from __future__ import annotations

import dataclasses
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool

from agentloop import EVENT_TYPES, ModelOptions, as_tool, create_tool_loop
from agentloop.observability._event_base import is_optional
from agentloop.observability.events import (
    EVENTS,
    DurabilityWarning,
    LoopEvent,
    ToolCompleted,
    ToolFailed,
    make_emitter,
    null_emit,
)
from agentloop.testing import ScriptedChatModel, plan_reply

EVENTS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "events.md"
ENVELOPE = {"type", "loop", "ts"}
AGENT_ENVELOPE = {"type", "agent", "ts"}


def _fields(event: type[LoopEvent]) -> list[tuple[str, bool]]:
    """Each payload field of an event and whether it is left out when unset."""
    return [(field.name, is_optional(field)) for field in dataclasses.fields(event)]


def _table() -> str:
    """The documented event table, as the declarations give it."""
    rows = ["| `type` | when | payload fields |", "| --- | --- | --- |"]
    for name, event in EVENTS.items():
        when = (event.__doc__ or "").strip().splitlines()[0]
        fields = ", ".join(
            f"`{field}`{'?' if optional else ''}" for field, optional in _fields(event)
        )
        rows.append(f"| `{name}` | {when} | {fields} |")
    return "\n".join(rows)


def test_event_types_are_the_declared_events() -> None:
    assert tuple(EVENTS) == EVENT_TYPES
    assert {"tool_dispatched", "answer_speculated"} <= set(EVENT_TYPES)
    assert all(event.type == name for name, event in EVENTS.items())
    assert len(set(EVENTS.values())) == len(EVENTS)


def test_the_documented_table_is_the_declarations() -> None:
    page = EVENTS_PAGE.read_text(encoding="utf-8")
    section = page.split("\n## Progress events\n", 1)[1].split("\n## ", 1)[0]
    documented = "\n".join(line for line in section.splitlines() if line.startswith("|"))
    assert documented == _table(), f"docs/reference/events.md's table should read:\n{_table()}"


def test_an_undeclared_event_is_refused() -> None:
    written: list[Any] = []
    emit = make_emitter(written.append, loop_name="loop")
    for undeclared in ("plan_decided", {"type": "plan_decided"}, LoopEvent()):
        with pytest.raises(TypeError, match="not a declared event"):
            emit(undeclared)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="not a declared event"):
            null_emit(undeclared)  # type: ignore[arg-type]
    assert written == []
    with pytest.raises(TypeError, match="declared once"):

        class Invented(LoopEvent):  # pragma: no cover - refused at definition
            type = "invented"

    with pytest.raises(TypeError, match="declared once"):

        class Twice(LoopEvent):  # pragma: no cover - refused at definition
            type = "tool_completed"

    assert "invented" not in EVENTS and EVENTS["tool_completed"] is ToolCompleted


def test_the_stream_payload_is_the_envelope_and_the_declared_fields() -> None:
    written: list[dict[str, Any]] = []
    emit = make_emitter(written.append, loop_name="shop", redact=lambda s: s.replace("pw", "**"))
    completed = ToolCompleted(
        call_id="r:1", tool_name="lookup", index=0, duration_ms=1.5, success=False, attempts=2
    )
    emit(ToolFailed.of(completed, error="bad pw", error_type="tool_error"))
    emit(completed)
    emit(DurabilityWarning(ledger="MemoryLedger", message="not durable"))
    failed, done, warning = written
    assert {k: v for k, v in failed.items() if k != "ts"} == {
        "type": "tool_error",
        "loop": "shop",
        "call_id": "r:1",
        "tool_name": "lookup",
        "index": 0,
        "error": "bad **",
        "error_type": "tool_error",
        "success": False,
        "duration_ms": 1.5,
        "attempts": 2,
    }
    assert set(done) == ENVELOPE | {"call_id", "tool_name", "index", "duration_ms", "success"} | {
        "attempts"
    }
    assert set(warning) == ENVELOPE | {"ledger", "message"}


def test_a_failing_writer_drops_the_event() -> None:
    def broken(_: Any) -> None:
        raise RuntimeError("closed")

    make_emitter(broken, loop_name="x")(DurabilityWarning(durability="exit", message="m"))


def test_every_writer_that_does_something_is_written_to() -> None:
    written: list[Any] = []

    def keep(event: Any) -> None:
        written.append(event)

    class Sink:
        def __call__(self, event: Any) -> None:
            written.append(event)

    def silent(_: Any) -> None:
        pass

    event = DurabilityWarning(durability="exit", message="m")
    for writer in (written.append, keep, lambda e: written.append(e), partial(keep), Sink()):
        make_emitter(writer, loop_name="x")(event)
    make_emitter(silent, loop_name="x")(event)  # a writer that does nothing: not built
    assert [e["type"] for e in written] == ["durability_warning"] * 5
    with pytest.raises(TypeError, match="not a declared event"):
        make_emitter(silent, loop_name="x")("plan_decided")  # type: ignore[arg-type]


async def test_events_reach_a_custom_stream_and_a_plain_run_needs_none() -> None:
    plans = [plan_reply("execute", [_cmd("search_notes", query="q")]), plan_reply("response")]

    def build() -> Any:
        return create_tool_loop(
            ScriptedChatModel(plans),
            [search_notes],
            models=ModelOptions(answer_model=ScriptedChatModel(replies=["done"])),
        )

    streamed = [c async for c in build().astream({"user_input": "q"}, stream_mode="custom")]
    assert {"plan_decided", "tool_completed", "round_completed"} <= {c["type"] for c in streamed}
    out = await build().ainvoke({"user_input": "q"})
    assert out["round_state"]["done_plans"][0]["success"] is True
    assert build().invoke({"user_input": "q"})["round_state"]["done_plans"][0]["success"]


@tool
def search_notes(query: str) -> str:
    """Search notes."""
    return f"note about {query}"


@tool
def flaky_lookup(key: str) -> str:
    """Look a key up (always fails)."""
    raise ValueError(f"no such key: {key}")


def _cmd(tool_name: str, **kwargs: Any) -> dict[str, Any]:
    return {"purpose": "p", "tool_name": tool_name, "tool_kwargs": kwargs}


def _assert_declared(event: dict[str, Any], envelope: set[str]) -> None:
    declared = _fields(EVENTS[event["type"]])
    required = {name for name, optional in declared if not optional}
    assert required | envelope <= set(event) <= {name for name, _ in declared} | envelope, event


@pytest.mark.parametrize("entry", ["stream", "astream"])
async def test_every_streamed_event_is_as_declared(entry: str) -> None:
    child = create_tool_loop(
        ScriptedChatModel(
            [plan_reply("execute", [_cmd("search_notes", query="a")]), plan_reply("response")]
        ),
        [search_notes],
        models=ModelOptions(answer_model=ScriptedChatModel(["child answer"])),
        name="child",
    )
    helper = as_tool(child, name="ask_child", description="Asks the child.")
    commands = [
        _cmd("search_notes", query="tides"),
        _cmd("flaky_lookup", key="k"),
        _cmd("ask_child", user_input="tides?"),
    ]
    loop = create_tool_loop(
        ScriptedChatModel([plan_reply("execute", commands), plan_reply("response")]),
        [search_notes, flaky_lookup, helper],
        models=ModelOptions(answer_model=ScriptedChatModel(["the answer"])),
        name="parent",
    )
    payload = {"user_input": "tides?"}
    if entry == "stream":
        events = list(loop.stream(payload, stream_mode="custom"))
    else:
        events = [event async for event in loop.astream(payload, stream_mode="custom")]
    seen = {event["type"] for event in events}
    assert {"round_started", "plan_decided", "tool_queued", "tool_started", "tool_error"} <= seen
    assert {"tool_completed", "queue_drained", "round_completed", "answer_completed"} <= seen
    assert {"agent_started", "agent_progress", "agent_completed"} <= seen
    for event in events:
        _assert_declared(event, AGENT_ENVELOPE if "agent" in event else ENVELOPE)
        if event["type"] == "agent_progress":
            _assert_declared(event["event"], ENVELOPE)
