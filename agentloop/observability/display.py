"""A loop at a glance: its graph as a diagram, a finished run as a table.

`RunReport(out)` (or `report(out)`) takes the final state a tool loop returns and shows
its rounds and calls: in Jupyter through `_repr_html_`, in IPython and terminals through
`_repr_pretty_` / `str()`, and as plain data through `rows()` (one dict per call, ready
for `pandas.DataFrame`). Every piece of tool output is escaped in the HTML.

`show_graph(loop)` draws a compiled graph as a picture, offline (see
`agentloop.observability.diagram`), with the Mermaid source as its text form.

Example:
    ```python
    show_graph(loop)  # the last expression of a notebook cell renders as a diagram
    out = await loop.ainvoke({"user_input": "How long is the tram network?"})
    report(out)  # and this one as a table
    ```
"""

from __future__ import annotations

import html
import io
import json
from collections.abc import Mapping
from typing import Any

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.markdown import Markdown
from rich.table import Table
from rich.text import Text

from agentloop.base.call_shapes import call_status
from agentloop.observability.diagram import MermaidDiagram, show_graph

__all__ = ["MermaidDiagram", "RunReport", "compact_json", "report", "shorten", "show_graph"]

_ARGUMENTS_CHARS = 80
_RESULT_CHARS = 120
_ERROR_CHARS = 120
_TITLE_CHARS = 1_000
_TEXT_ARGUMENTS_CHARS = 40
_TEXT_DETAIL_CHARS = 60

_COLUMNS = ("round", "#", "tool", "arguments", "ok", "ms", "attempts", "flags", "result / error")
_NUMERIC_COLUMNS = {0, 1, 5, 6}
_SHRINKING_COLUMNS = {3: 2, 7: 1, 8: 3}
"""The columns cut to fit a terminal (arguments, flags, result), with their shares of it."""
_QUIET_COLUMNS = {6: "1", 7: ""}
"""Columns a terminal leaves out when every row holds this (one attempt, no flags)."""


def _says_something(column: int, cells: list[list[str]]) -> bool:
    return any(line[column] != _QUIET_COLUMNS[column] for line in cells)


_STYLE = (
    "<style>"
    ".agentloop-report table{border-collapse:collapse;font-size:12px}"
    ".agentloop-report th,.agentloop-report td{border:1px solid #ccc;padding:2px 6px;"
    "text-align:left;vertical-align:top}"
    ".agentloop-report td.num{text-align:right}"
    ".agentloop-report .ok{color:#1a7f37}.agentloop-report .err{color:#cf222e}"
    ".agentloop-report pre{white-space:pre-wrap;margin:4px 0}"
    "</style>"
)


def compact_json(value: Any) -> str:
    """Render a value as compact one-line JSON (anything JSON cannot hold becomes `str`)."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    except ValueError:  # a circular structure
        return str(value)


def shorten(text: str, limit: int, ellipsis: str = "...") -> str:
    """Put a text on one line and cut it to at most `limit` characters."""
    line = " ".join(text.split())
    if len(line) <= limit:
        return line
    return line[: max(limit - len(ellipsis), 0)] + ellipsis


def _flags(record: Mapping[str, Any], rolled_back: bool) -> list[str]:
    flags: list[str] = []
    if record.get("from_cache"):
        flags.append("from_cache")
    if record.get("fallback"):
        flags.append(f"fallback:{record['fallback']}")
    for name in ("duplicate", "truncated", "flagged"):
        if record.get(name):
            flags.append(name)
    if rolled_back:
        flags.append("rolled_back")
    return flags


class RunReport:
    """The rounds and calls of one finished run of a tool loop.

    Args:
        state: The final state (`loop.invoke(...)` / `ainvoke` output, or the last
            `values` chunk of a stream).
    """

    def __init__(self, state: Mapping[str, Any]) -> None:
        self.state = state
        round_state: Mapping[str, Any] = state.get("round_state") or {}
        logs = state.get("tool_logs")
        self.records: list[Mapping[str, Any]] = list(
            logs if logs is not None else round_state.get("done_plans") or []
        )
        """Every execution record of the run, rolled-back rounds included."""
        self.rounds: int = int(round_state.get("round_index", 0))
        """How many rounds were executed and accepted."""
        self.answer: str = str(state.get("answer") or "")
        """The final reply."""
        self.question: str = str(state.get("user_input") or "")
        """The request the run answered."""
        self.rollbacks: list[Mapping[str, Any]] = list(state.get("rollbacks") or [])
        """Rounds rolled back because every call was flagged."""

    # -- data ----------------------------------------------------------------------------

    def rows(self) -> list[dict[str, Any]]:
        """Return one dict per call, in execution order.

        Keys: `round` (1-based), `index` (1-based position in its round), `call_id`, `tool`,
        `purpose`, `arguments`, `success`, `status` (`CallStatus`), `duration_ms`,
        `attempts`, `flags` (a list of `from_cache`, `fallback:<kind>`, `duplicate`,
        `truncated`, `flagged`, `rolled_back`), `error`, `error_type`, `result`.
        """
        rolled_back = {
            str(record.get("call_id"))
            for rollback in self.rollbacks
            for record in rollback.get("records") or []
            if record.get("call_id")
        }
        return [
            {
                "round": int(record.get("round_index", 0)) + 1,
                "index": int(record.get("index", 0)) + 1,
                "call_id": str(record.get("call_id", "")),
                "tool": str(record.get("tool_name", "")),
                "purpose": str(record.get("purpose", "")),
                "arguments": record.get("kwargs") or {},
                "success": bool(record.get("success")),
                "status": record.get("status") or call_status(record),
                "duration_ms": float(record.get("duration_ms") or 0.0),
                "attempts": int(record.get("attempts", 0) or 0),
                "flags": _flags(record, str(record.get("call_id", "")) in rolled_back),
                "error": str(record.get("error") or ""),
                "error_type": str(record.get("error_type") or ""),
                "result": record.get("result"),
            }
            for record in self.records
        ]

    @property
    def failures(self) -> int:
        """How many calls failed."""
        return sum(1 for record in self.records if not record.get("success"))

    @property
    def tool_time_ms(self) -> float:
        """The summed duration of every call, in milliseconds."""
        return sum(float(record.get("duration_ms") or 0.0) for record in self.records)

    def summary(self) -> str:
        """Return the one-line header: rounds, calls, failures and total tool time."""
        calls = len(self.records)
        parts = [
            f"{self.rounds} round{'s' if self.rounds != 1 else ''}",
            f"{calls} call{'s' if calls != 1 else ''}",
            f"{self.failures} failed",
            f"{self.tool_time_ms:.0f} ms tool time",
        ]
        if self.rollbacks:
            parts.append(f"{len(self.rollbacks)} rolled back")
        return ", ".join(parts)

    # -- text ----------------------------------------------------------------------------

    def _text_cells(self, row: Mapping[str, Any]) -> list[str]:
        detail = row["error"] if not row["success"] else compact_json(row["result"])
        return [
            str(row["round"]),
            str(row["index"]),
            row["tool"],
            shorten(compact_json(row["arguments"]), _TEXT_ARGUMENTS_CHARS),
            "ok" if row["success"] else "ERR",
            f"{row['duration_ms']:.0f}",
            str(row["attempts"]),
            ",".join(row["flags"]),
            shorten(detail, _TEXT_DETAIL_CHARS),
        ]

    def table(self, width: int | None = None) -> Table | None:
        """Return the calls as a `rich` table (None when no call ran).

        Args:
            width: The width to fit (a terminal's); the arguments and results are cut
                to fit it, the other columns keep their width. None: no limit.
        """
        rows = self.rows()
        if not rows:
            return None
        cells = [self._text_cells(row) for row in rows]
        widths = [
            max(len(name), *(len(line[column]) for line in cells))
            for column, name in enumerate(_COLUMNS)
        ]
        shown = list(range(len(_COLUMNS)))
        if width is not None:  # a terminal: leave out what says nothing, fit the rest
            shown = [c for c in shown if c not in _QUIET_COLUMNS or _says_something(c, cells)]
            # each column has a space of padding either side, and a one-space divider
            shrinking = [c for c in shown if c in _SHRINKING_COLUMNS]
            fixed = sum(widths[c] + 3 for c in shown if c not in _SHRINKING_COLUMNS)
            room = width - fixed - 3 * len(shrinking)
            weights = sum(_SHRINKING_COLUMNS[column] for column in shrinking)
            for column in shrinking:  # each takes its share of the room, at least 6
                share = max(room * _SHRINKING_COLUMNS[column] // max(weights, 1), 6)
                widths[column] = min(widths[column], share)
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
        for column in shown:
            table.add_column(
                _COLUMNS[column],
                justify="right" if column in _NUMERIC_COLUMNS else "left",
                no_wrap=True,
                overflow="ellipsis",
                width=widths[column],
            )
        for row, line in zip(rows, cells, strict=True):
            styled: list[str | Text] = list(line)
            styled[4] = Text(line[4], style="green" if row["success"] else "bold red")
            table.add_row(*(styled[column] for column in shown))
        return table

    def table_text(self) -> str:
        """Return the calls as an aligned plain-text table ("" when no call ran)."""
        table = self.table()
        return "" if table is None else _plain(table)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        """Show the run with `rich` (`rich.print(report(out))`), fitted to the console."""
        yield self.rich_view(width=options.max_width)

    def rich_view(self, *, include_answer: bool = True, width: int | None = None) -> Group:
        """Return the header, the table of calls, rollbacks and the answer as Markdown."""
        parts: list[Any] = [Text(self.summary(), style="bold")]
        table = self.table(width)
        if table is not None:
            parts.append(table)
        parts.extend(Text(self._rollback_line(r), style="yellow") for r in self.rollbacks)
        if include_answer:
            parts.append(Markdown(self.answer))
        return Group(*parts)

    def to_text(self, *, include_answer: bool = True) -> str:
        """Return the header, the table of calls, rollbacks and (optionally) the answer."""
        parts = [self.summary()]
        table = self.table_text()
        if table:
            parts.append(table)
        for rollback in self.rollbacks:
            parts.append(self._rollback_line(rollback))
        if include_answer:
            parts.append("answer:\n" + self.answer)
        return "\n\n".join(parts)

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        return f"<RunReport {self.summary()}>"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """Show the text table in IPython."""
        printer.text(repr(self) if cycle else self.to_text())

    @staticmethod
    def _rollback_line(rollback: Mapping[str, Any]) -> str:
        reasons = "; ".join(
            f"{record.get('tool_name', '')}: {record.get('error', '')}"
            for record in rollback.get("records") or []
        )
        return (
            f"round {int(rollback.get('round_index', 0)) + 1} rolled back "
            f"(#{rollback.get('consecutive', 1)} in a row): {shorten(reasons, 200)}"
        )

    # -- HTML ----------------------------------------------------------------------------

    def _repr_html_(self) -> str:
        """Render the run as HTML (header, table of calls, rollbacks, answer)."""
        parts = ['<div class="agentloop-report">', _STYLE]
        if self.question:
            parts.append(f"<div><b>Question:</b> {html.escape(self.question)}</div>")
        parts.append(f"<div><b>Run:</b> {html.escape(self.summary())}</div>")
        rows = self.rows()
        if rows:
            header = "".join(
                f"<th>{html.escape(name)}</th>"
                for name in (
                    "round",
                    "#",
                    "tool",
                    "arguments",
                    "success",
                    "duration ms",
                    "attempts",
                    "flags",
                    "result",
                    "error",
                )
            )
            body = "".join(_html_row(row) for row in rows)
            parts.append(f"<table><thead><tr>{header}</tr></thead><tbody>{body}</tbody></table>")
        if self.rollbacks:
            items = "".join(
                f"<li>{html.escape(self._rollback_line(rollback))}</li>"
                for rollback in self.rollbacks
            )
            parts.append(f"<div><b>Rollbacks:</b><ul>{items}</ul></div>")
        parts.append(f"<div><b>Answer:</b><pre>{html.escape(self.answer)}</pre></div>")
        parts.append("</div>")
        return "".join(parts)


def _plain(renderable: RenderableType) -> str:
    """Render for a log or a pipe: no colour, no wrapping, no trailing spaces."""
    buffer = io.StringIO()
    Console(
        file=buffer, width=10_000, color_system=None, legacy_windows=False, force_jupyter=False
    ).print(renderable)
    lines = [line.rstrip() for line in buffer.getvalue().splitlines()]
    return "\n".join(lines).strip("\n")


def _html_cell(text: str, limit: int) -> str:
    shown = html.escape(shorten(text, limit, "…"))
    if len(text) <= limit:
        return f"<td>{shown}</td>"
    title = html.escape(shorten(text, _TITLE_CHARS, "…"), quote=True)
    return f'<td title="{title}">{shown}</td>'


def _html_row(row: Mapping[str, Any]) -> str:
    mark = '<span class="ok">✓</span>' if row["success"] else '<span class="err">✗</span>'
    result = compact_json(row["result"]) if row["success"] else ""
    cells = [
        f'<td class="num">{row["round"]}</td>',
        f'<td class="num">{row["index"]}</td>',
        f"<td>{html.escape(row['tool'])}</td>",
        _html_cell(compact_json(row["arguments"]), _ARGUMENTS_CHARS),
        f"<td>{mark}</td>",
        f'<td class="num">{row["duration_ms"]:.0f}</td>',
        f'<td class="num">{row["attempts"]}</td>',
        f"<td>{html.escape(', '.join(row['flags']))}</td>",
        _html_cell(result, _RESULT_CHARS),
        _html_cell(row["error"], _ERROR_CHARS),
    ]
    return "<tr>" + "".join(cells) + "</tr>"


def report(state: Mapping[str, Any]) -> RunReport:
    """Return the `RunReport` of a finished run's final state."""
    return RunReport(state)
