"""Judging records: useless results, duplicates, and the compact form of flagged records."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from agentloop.governance.outcome import ToolOutcome
from agentloop.state import ToolExecutionRecord

__all__ = ["ERROR_PREFIXES", "compact_record", "executed_queries", "judge_result"]

ERROR_PREFIXES = ("Unknown tool:", "Error executing tool")
"""A successful result that starts with one of these is an error in disguise."""


_NOT_A_PREFIX_START = frozenset(
    chr(code)
    for code in range(128)
    if not chr(code).isspace() and chr(code) not in {prefix[0] for prefix in ERROR_PREFIXES}
)
"""ASCII characters a text starting with one of `ERROR_PREFIXES` (after white space) cannot
start with: neither white space nor a prefix's first letter ("" is not among them)."""


def judge_result(outcome: ToolOutcome, check: Callable[[Any], bool | str] | None) -> str:
    """Return why a successful result is useless, or "" when it is fine.

    Args:
        outcome: A successful outcome.
        check: The tool's `check_result`: False or a reason string flags the result.

    Returns:
        The reason, or "".
    """
    value = outcome.value
    if (
        isinstance(value, str)
        and value[:1] not in _NOT_A_PREFIX_START  # most text: no `lstrip` copy to look at
        and value.lstrip().startswith(ERROR_PREFIXES)
    ):
        return value.strip()[:500]
    if check is None:
        return ""
    try:
        verdict = check(value)
    except Exception as error:
        return f"check_result failed: {error}"
    if isinstance(verdict, str):
        return verdict
    return "" if verdict else "result judged useless by check_result"


def executed_queries(records: Iterable[ToolExecutionRecord]) -> dict[str, int]:
    """Map each query that ran successfully to the round that ran it first.

    Args:
        records: `done_plans`.

    Returns:
        `{query_key: round_index}`.
    """
    seen: dict[str, int] = {}
    for record in records:
        key = record.get("query_key")
        if isinstance(key, str) and record["success"] and not record.get("flagged"):
            seen.setdefault(key, int(record.get("round_index", 0)))
    return seen


def compact_record(record: Mapping[str, Any]) -> ToolExecutionRecord:
    """Return the compact form of a flagged record: no bulky output, a clear error."""
    compact: dict[str, Any] = {
        key: record[key]
        for key in (
            "purpose",
            "tool_name",
            "kwargs",
            "todo_suggestion",
            "next",
            "call_id",
            "call_key",
            "position_key",
            "replayed",
            "round_index",
            "index",
            "error_type",
            "status",
            "duplicate",
            "query_key",
            "after_write",
            "duration_ms",
            "attempts",
        )
        if key in record
    }
    compact.update(success=False, result=None, error=record.get("error") or "", flagged=True)
    return compact  # type: ignore[return-value]
