"""`"$N"` hands the next tool the whole result, never a cut copy (the record keeps a cut one)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from agentloop import ModelOptions, create_tool_loop
from agentloop.testing import ScriptedChatModel, plan_reply

pytestmark = pytest.mark.parametrize("run_loop", ["invoke", "ainvoke"], indirect=True)

ROWS = 100_000
TEXT_CHARS = 300_000


def _loop(
    commands: list[dict[str, Any]], received: dict[str, Any], *, first: int = 0, **options: Any
) -> Any:
    @tool
    def read_rows() -> list[dict[str, int]]:
        """Read every row."""
        return [{"n": n} for n in range(ROWS)]

    @tool
    async def read_text() -> str:
        """Read a long text."""
        return "x" * (TEXT_CHARS - 1) + "!"

    @tool
    def read_huge_text() -> str:
        """Read a text too long to be kept whole."""
        return "y" * 3_000_000

    @tool
    def save_rows(rows: list[Any]) -> int:
        """Store rows (a write: nothing declares it read-only)."""
        received["save_rows"] = rows
        return len(rows)

    @tool
    def send_note(text: str) -> int:
        """Send a note (a write)."""
        received["send_note"] = text
        return len(text)

    @tool
    def count_chars(text: str) -> int:
        """Count characters (only reads)."""
        received["count_chars"] = text
        return len(text)

    count_chars.metadata = {"agentloop": {"read_only": True}}
    replies = [plan_reply("execute", commands), plan_reply("response")]
    planner = ScriptedChatModel(replies[first:])
    tools = [read_rows, read_text, read_huge_text, save_rows, send_note, count_chars]
    return create_tool_loop(
        planner,
        tools,
        models=ModelOptions(answer_model=ScriptedChatModel(["done"], repeat_last=True)),
        **{"checkpointer": InMemorySaver(), **options},
    )


def _step(tool_name: str, **kwargs: Any) -> dict[str, Any]:
    return {"tool_name": tool_name, "tool_kwargs": kwargs}


async def _records(run_loop: Any, graph: Any, thread: str) -> list[dict[str, Any]]:
    config = {"configurable": {"thread_id": f"{thread}-{run_loop.entry}"}}
    out = await run_loop(graph, {"user_input": "copy it"}, config)
    return list(out["round_state"]["done_plans"])


async def test_a_write_gets_every_row_of_a_cut_result(run_loop: Any) -> None:
    received: dict[str, Any] = {}
    graph = _loop([_step("read_rows"), _step("save_rows", rows="$1")], received)
    read, save = await _records(run_loop, graph, "rows")
    assert read["truncated"] is True  # the record (what the planner sees) is cut...
    assert len(received["save_rows"]) == ROWS  # ...the write got every row, with its type
    assert received["save_rows"][-1] == {"n": ROWS - 1}
    assert save["success"] and save["result"] == ROWS and save["truncated"] is False
    assert len(str(save["kwargs"])) < 50_000  # its record keeps the arguments cut


async def test_a_write_gets_the_whole_text_through_both_reference_forms(run_loop: Any) -> None:
    received: dict[str, Any] = {}
    graph = _loop(
        [_step("read_text"), _step("send_note", text="$1"), _step("count_chars", text="<${1}>")],
        received,
    )
    read, send, count = await _records(run_loop, graph, "text")
    assert read["truncated"] is True
    assert len(received["send_note"]) == TEXT_CHARS and received["send_note"].endswith("!")
    assert received["count_chars"] == "<" + "x" * (TEXT_CHARS - 1) + "!>"
    assert send["result"] == TEXT_CHARS and count["result"] == TEXT_CHARS + 2


async def test_a_result_not_kept_whole_is_never_handed_in_part_to_a_write(run_loop: Any) -> None:
    received: dict[str, Any] = {}
    graph = _loop(
        [_step("read_huge_text"), _step("send_note", text="$1"), _step("count_chars", text="$1")],
        received,
    )
    read, send, count = await _records(run_loop, graph, "huge")
    assert read["truncated"] is True
    assert "send_note" not in received  # not called at all
    assert not send["success"] and send["error_type"] == "reference_unavailable"
    assert "$1 (read_huge_text)" in send["error"]
    # a read may get the cut copy, and its record says so
    assert count["success"] and count["truncated"] is True
    assert any("cut to the size budget" in note for note in count["notes"])
    assert len(received["count_chars"]) < 3_000_000


async def test_after_a_resume_in_a_new_loop_a_write_is_not_given_part_of_a_result(
    run_loop: Any,
) -> None:
    """A new loop (a restarted process) resumes a thread whose cut result it never saw whole."""
    received: dict[str, Any] = {}
    commands = [_step("read_rows"), _step("save_rows", rows="$1")]
    saver = InMemorySaver()
    first = _loop(commands, received, checkpointer=saver, interrupt_before=["call_tool"])
    config = {"configurable": {"thread_id": f"resumed-{run_loop.entry}"}}
    await run_loop(first, {"user_input": "copy it"}, config)
    await run_loop(first, None, config)  # the read ran; stopped before the write's batch
    assert "save_rows" not in received
    # a new process (its planner already past the plan): nothing kept whole
    second = _loop(commands, received, first=1, checkpointer=saver)
    out = await run_loop(second, None, config)
    read, save = out["round_state"]["done_plans"]
    assert read["truncated"] is True
    assert "save_rows" not in received
    assert save["error_type"] == "reference_unavailable"
    assert out["status"] == "ok"
