"""`RunReport`: rows, HTML (escaped) and text views of a finished run."""

from __future__ import annotations

import asyncio
import io
import re
from typing import Any

import pytest
from langchain_core.tools import tool

from agentloop import GovernanceOptions, ModelOptions, ToolPolicy, create_tool_loop
from agentloop.observability.display import RunReport, compact_json, report, shorten
from agentloop.testing import ScriptedChatModel, plan_reply

SCRIPT = "<script>alert('x')</script>"


def cmd(tool_name: str, purpose: str = "", **kwargs: Any) -> dict[str, Any]:
    return {"purpose": purpose, "tool_name": tool_name, "tool_kwargs": kwargs}


@tool
def render_page(name: str) -> str:
    """Return a page that contains markup."""
    return f"{SCRIPT} page {name}"


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def explode(reason: str) -> str:
    """Always fail."""
    raise RuntimeError(f"boom <b>{reason}</b>")


@tool
def get_long_text(size: int) -> str:
    """Return a long text."""
    return "word " * size


@tool
def get_rate(currency: str) -> float:
    """Return an exchange rate."""
    return {"eur": 1.1}.get(currency, 1.0)


def run(graph: Any, question: str) -> dict[str, Any]:
    return asyncio.run(graph.ainvoke({"user_input": question}))


@pytest.fixture(scope="module")
def state() -> dict[str, Any]:
    planner = ScriptedChatModel(
        [
            plan_reply(
                "execute",
                [
                    cmd("render_page", "page", name="home"),
                    cmd("add", "sum", a=1, b=2),
                    cmd("explode", "fail", reason="test"),
                ],
            ),
            # every call of this round repeats a query: flagged, then rolled back
            plan_reply("execute", [cmd("add", "sum again", a=1, b=2)]),
            plan_reply("execute", [cmd("get_long_text", "long", size=400)]),
            plan_reply("response"),
        ]
    )
    graph = create_tool_loop(
        planner,
        [render_page, add, explode, get_long_text],
        models=ModelOptions(answer_model=ScriptedChatModel(["The page says <i>hi</i> & 1+2=3."])),
        governance=GovernanceOptions(
            policies={
                "get_long_text": ToolPolicy(max_result_chars=500),
                "add": ToolPolicy(read_only=True),
                "explode": ToolPolicy(read_only=True),
            }
        ),
    )
    return run(graph, "What is on the <home> page?")


def test_rows_describe_every_call(state: dict[str, Any]) -> None:
    rows = RunReport(state).rows()
    assert [(r["round"], r["index"], r["tool"]) for r in rows] == [
        (1, 1, "render_page"),
        (1, 2, "add"),
        (1, 3, "explode"),
        (2, 1, "add"),
        (2, 1, "get_long_text"),
    ]
    page, total, failed, repeated, long = rows
    assert page["success"] and page["result"].startswith(SCRIPT)
    assert page["arguments"] == {"name": "home"}
    assert page["purpose"] == "page"
    assert total["result"] == 3 and total["flags"] == []
    assert total["attempts"] == 1
    assert not failed["success"]
    assert "boom" in failed["error"]
    assert failed["error_type"]
    assert {"duplicate", "flagged", "rolled_back"} <= set(repeated["flags"])
    assert "truncated" in long["flags"]
    statuses = [row["status"] for row in rows]
    assert statuses == ["succeeded", "succeeded", "failed", "skipped", "succeeded"]
    assert all(isinstance(r["duration_ms"], float) for r in rows)
    assert all(r["call_id"] for r in rows)


def test_summary_counts_rounds_calls_failures(state: dict[str, Any]) -> None:
    view = report(state)
    assert view.rounds == 2
    assert view.failures == 2  # the exploding call and the duplicate
    assert view.tool_time_ms >= 0
    summary = view.summary()
    assert summary.startswith("2 rounds, 5 calls, 2 failed, ")
    assert summary.endswith("1 rolled back")


def test_html_escapes_tool_output_and_answer(state: dict[str, Any]) -> None:
    page = RunReport(state)._repr_html_()
    assert "<script>" not in page
    assert "&lt;script&gt;" in page
    assert "boom &lt;b&gt;test&lt;/b&gt;" in page
    assert "<i>hi</i>" not in page
    assert "The page says &lt;i&gt;hi&lt;/i&gt; &amp; 1+2=3." in page
    assert "What is on the &lt;home&gt; page?" in page
    assert page.count("<tr>") == 6  # header and five calls
    assert "✓" in page and "✗" in page
    assert "duplicate, flagged, rolled_back" in page
    assert "Rollbacks:" in page
    assert "truncated" in page


def test_html_truncates_long_cells_with_a_title(state: dict[str, Any]) -> None:
    page = RunReport(state)._repr_html_()
    assert 'title="&quot;word word' in page
    cell = page[page.index('title="&quot;word word') :]
    shown = cell[cell.index(">") + 1 : cell.index("</td>")]
    assert shown.endswith("…")
    assert len(shown) < 200


def test_text_table(state: dict[str, Any]) -> None:
    view = RunReport(state)
    text = view.to_text()
    lines = text.splitlines()
    assert lines[0] == view.summary()
    header = next(line for line in lines if line.startswith("round"))
    for column in ("tool", "arguments", "ok", "ms", "attempts", "flags", "result / error"):
        assert column in header
    assert any("render_page" in line and " ok " in line for line in lines)
    assert any("explode" in line and "ERR" in line and "boom" in line for line in lines)
    assert "round 2 rolled back (#1 in a row): add: Duplicate query" in text
    assert text.endswith("answer:\nThe page says <i>hi</i> & 1+2=3.")
    assert "answer:" not in view.to_text(include_answer=False)
    assert str(view) == text
    assert repr(view).startswith("<RunReport 2 rounds")


def test_repr_pretty_prints_the_text() -> None:
    class Printer:
        def __init__(self) -> None:
            self.parts: list[str] = []

        def text(self, value: str) -> None:
            self.parts.append(value)

    view = RunReport({"answer": "done"})
    printer = Printer()
    view._repr_pretty_(printer, cycle=False)
    assert printer.parts == [view.to_text()]


def test_cache_hits_are_flagged() -> None:
    planner = ScriptedChatModel(
        [
            plan_reply("execute", [cmd("get_rate", "rate", currency="eur")]),
            plan_reply("response"),
        ]
        * 2
    )
    graph = create_tool_loop(
        planner,
        [get_rate],
        models=ModelOptions(answer_model=ScriptedChatModel(["1.1"], repeat_last=True)),
        governance=GovernanceOptions(policies={"get_rate": ToolPolicy(cache_ttl_s=60)}),
    )
    first = RunReport(run(graph, "rate?")).rows()
    second = RunReport(run(graph, "rate again?")).rows()
    assert first[0]["flags"] == []
    assert second[0]["flags"] == ["from_cache"]
    assert [first[0]["status"], second[0]["status"]] == ["succeeded", "cached"]
    assert second[0]["result"] == 1.1


def test_a_run_without_tools() -> None:
    view = RunReport({"answer": "hello", "round_state": {"round_index": 0}, "tool_logs": []})
    assert view.rows() == []
    assert view.table_text() == ""
    assert view.summary() == "0 rounds, 0 calls, 0 failed, 0 ms tool time"
    assert "<table>" not in view._repr_html_()
    assert view.to_text() == "0 rounds, 0 calls, 0 failed, 0 ms tool time\n\nanswer:\nhello"


def test_records_fall_back_to_done_plans() -> None:
    record = {"tool_name": "add", "kwargs": {"a": 1}, "success": True, "result": 2, "error": ""}
    view = RunReport({"round_state": {"round_index": 1, "done_plans": [record]}})
    assert [row["tool"] for row in view.rows()] == ["add"]


def test_helpers() -> None:
    assert compact_json({"a": [1, 2], "b": "é"}) == '{"a":[1,2],"b":"é"}'
    assert compact_json({"when": object}).startswith('{"when":"<class')
    assert shorten("a\n  b", 10) == "a b"
    assert shorten("abcdefghij", 5) == "ab..."
    assert shorten("abcdefghij", 5, "…") == "abcd…"


def test_on_a_terminal_the_table_fits_its_width_and_colours_the_outcome(
    state: dict[str, Any],
) -> None:
    from rich.console import Console

    for width in (80, 120):
        console = Console(file=io.StringIO(), width=width, force_terminal=True)
        console.print(RunReport(state))
        screen = console.file.getvalue()
        assert "\x1b[32mok" in screen and "\x1b[1;31mERR" in screen
        text = re.sub(r"\x1b\[[0-9;]*m", "", screen)
        assert max(len(line) for line in text.splitlines()) <= width
        header = next(line for line in text.splitlines() if line.startswith("round"))
        columns = ("#", "tool", "arguments", "ok", "ms", "flags", "result / error")
        assert all(column in header for column in columns) == (width == 120), header
        assert "render_page" in text
        assert "The page says hi & 1+2=3." in text  # the answer, as Markdown
