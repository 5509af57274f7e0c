"""The planner's prompt: tools, round state and limits, with tool results kept bounded."""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from agentloop.planning.normalize import default_purpose
from agentloop.planning.references import GENERIC_REFERENCE_EXAMPLE
from agentloop.prompts import PromptSet, quote_user_text, tagged_section, to_prompt_json
from agentloop.state import RoundState, ToolExecutionRecord

__all__ = [
    "OMITTED",
    "PLAN_TOOL",
    "PLAN_TOOL_STRICT",
    "SHORT_RESULT_CHARS",
    "HistoryLines",
    "build_plan_messages",
    "conversation_text",
    "default_prompts",
    "history_text",
    "omitted_results",
    "omits_results",
    "planner_view",
    "to_prompt_json",
]

OMITTED = "[omitted: seen in an earlier round]"

SHORT_RESULT_CHARS = 100
"""A result this short (an id, a name, a number) is never omitted: leaving it out would
save little and could cost the planner a value a later call needs."""


def _short(result: Any) -> bool:
    """Whether a result is short enough to show in every prompt (`SHORT_RESULT_CHARS`)."""
    if result is None or isinstance(result, bool | int | float):
        return True
    if isinstance(result, str):
        return len(result) <= SHORT_RESULT_CHARS
    return len(to_prompt_json(result)) <= SHORT_RESULT_CHARS


def _omits(record: ToolExecutionRecord) -> bool:
    """Whether `planner_view` leaves out a record's result when it is not among the latest."""
    if record.get("error_type") == "too_many_commands":
        return False
    shows_error = record.get("flagged") or not record["success"]
    return not shows_error and not _short(record["result"])


def _plan_tool(*, strict: bool) -> dict[str, Any]:
    """The plan's tool schema; `strict` closes every object and sends arguments as text."""
    closed: dict[str, Any] = {"additionalProperties": False} if strict else {}
    kwargs: dict[str, Any] = (
        {"type": "string", "description": "The tool's arguments as a JSON object text."}
        if strict
        else {"type": "object"}
    )
    command_fields = ["purpose", "tool_name", "tool_kwargs"]
    return {
        "type": "function",
        "function": {
            "name": "PlanDecision",
            "description": "Decide this round's action and the tool calls to execute.",
            **({"strict": True} if strict else {}),
            "parameters": {
                "type": "object",
                **closed,
                "properties": {
                    "next_action": {
                        "type": "string",
                        "enum": ["execute", "response"],
                        "description": "Decide first: 'execute' tools, or 'response' to answer.",
                    },
                    "execution_commands": {
                        "type": "array",
                        "description": "Calls to run in parallel this round (empty for response).",
                        "items": {
                            "type": "object",
                            **closed,
                            "properties": {
                                "purpose": {"type": "string"},
                                "tool_name": {"type": "string"},
                                "tool_kwargs": kwargs,
                                "todo_suggestion": {"type": "string"},
                            },
                            "required": [*command_fields, "todo_suggestion"]
                            if strict
                            else command_fields,
                        },
                    },
                },
                "required": ["next_action", "execution_commands"],
            },
        },
    }


PLAN_TOOL = _plan_tool(strict=False)
"""The structured-output schema of `plan_mode="tool"` (`next_action` first, so it streams first)."""
PLAN_TOOL_STRICT = _plan_tool(strict=True)
"""`PLAN_TOOL` for providers' strict structured output, where every object is closed: the
arguments travel as JSON text (decoded when the plan is normalized)."""


def planner_view(records: Sequence[ToolExecutionRecord], *, keep_full: int) -> list[dict[str, Any]]:
    """Return what the planner sees of some records: results only for the latest ones.

    Args:
        records: Records, oldest first.
        keep_full: Only the last `keep_full` records of `records` keep their result.

    Returns:
        Slim records: round, purpose (unless the default one), tool, arguments,
        `"success": false` and the error for a failed call, else the result (`OMITTED` for
        a result longer than `SHORT_RESULT_CHARS` outside the latest `keep_full`);
        commands refused for exceeding the per-round cap as one item with their count.
    """
    first_full = len(records) - keep_full
    view: list[dict[str, Any]] = []
    for position, record in enumerate(records):
        if record.get("error_type") == "too_many_commands":  # one line for all of them
            if view and "not_run" in view[-1]:
                view[-1]["not_run"] += 1
            else:
                view.append({"round": record.get("round_index", 0), "not_run": 1,
                             "error": record["error"]})  # fmt: skip
            continue
        item: dict[str, Any] = {"round": record.get("round_index", 0)}
        if record["purpose"] != default_purpose(record["tool_name"]):
            item["purpose"] = record["purpose"]  # a purpose the planner wrote
        item.update(tool_name=record["tool_name"], kwargs=record["kwargs"])
        if not record["success"]:
            item["success"] = False
        if record.get("flagged") or not record["success"]:
            item["error"] = record["error"]
        else:
            omit = position < first_full and _omits(record)
            item["result"] = OMITTED if omit else record["result"]
        if record.get("fallback"):
            item["fallback"] = record["fallback"]
        if record.get("stale"):
            item["stale_result"] = record["result"]
            item["stale_age_s"] = record.get("stale_age_s", 0.0)
        if record.get("todo_suggestion"):
            item["todo_suggestion"] = record["todo_suggestion"]
        view.append(item)
    return view


def omitted_results(seen: int, keep: int) -> int:
    """How many of the oldest results already shown to the planner are now omitted.

    They are omitted in blocks of `keep`, so the history only grows at its end
    between two blocks (a provider's prompt cache keeps reusing it): between `keep`
    and `2 * keep - 1` of the latest results already shown stay in full.

    Args:
        seen: Results shown in earlier prompts (the last round's are not counted).
        keep: `keep_tool_results`; 0 omits every result already shown.
    """
    if keep <= 0:
        return seen
    return max(0, (seen // keep - 1) * keep)


def _last_round_count(round_state: RoundState) -> int:
    """How many of `done_plans` are the last round's records (shown in full)."""
    done, last = round_state["done_plans"], round_state["last_round_records"]
    return len(last) if last and done[-len(last) :] == last else 0


def omits_results(round_state: RoundState, keep: int) -> bool:
    """Whether the planner's next prompt leaves out a result it saw in an earlier one.

    A planner that did not see every result in full cannot write the run's answer
    (`adopts_planner_reply`): the answer model, which sees them all, does.

    Args:
        round_state: What happened so far.
        keep: `keep_tool_results`.
    """
    done = round_state["done_plans"]
    cutoff = omitted_results(len(done) - _last_round_count(round_state), keep)
    return any(_omits(record) for record in done[:cutoff])


def history_text(
    records: Sequence[ToolExecutionRecord],
    last_round: int,
    keep: int,
    lines: HistoryLines | None = None,
) -> str:
    """The planner's view of every record so far, one JSON object per line, oldest first.

    Args:
        records: `done_plans`.
        last_round: How many of them are the last round's (always shown in full).
        keep: `keep_tool_results`.
        lines: The loop's rendered lines, reused (None: each line is rendered).
    """
    if not records:
        return "(none yet)"
    omitted = omitted_results(len(records) - last_round, keep)
    if lines is not None:
        return lines.history(records, omitted)
    text, _ = _history_lines(records, omitted, None)
    return "\n".join(text)


def _history_lines(
    records: Sequence[ToolExecutionRecord],
    omitted: int,
    lines: HistoryLines | None,
    start: int = 0,
    text: list[str] | None = None,
) -> tuple[list[str], bool]:
    """`history_text`'s lines of `records[start:]`, after `text` (the lines before them).

    Returns:
        The lines, and whether any of `records[start:]` was refused for exceeding the
        per-round cap (else each has a line of its own, in order).
    """
    text = [] if text is None else text
    refused: list[ToolExecutionRecord] = []  # over the round's cap: one line per run of them
    merged = False
    for position in range(start, len(records)):
        record = records[position]
        if record.get("error_type") == "too_many_commands":
            refused.append(record)
            merged = True
            continue
        if refused:
            text.extend(to_prompt_json(item) for item in planner_view(refused, keep_full=0))
            refused = []
        shown = position >= omitted
        text.append(
            _render_line(record, shown=shown) if lines is None else lines.line(record, shown=shown)
        )
    if refused:
        text.extend(to_prompt_json(item) for item in planner_view(refused, keep_full=0))
    return text, merged


def _entry_size(entry: tuple[ToolExecutionRecord, str]) -> int:
    """An entry's weight: its line and the record's result (which it keeps alive)."""
    record, line = entry
    result = record.get("result")
    return len(line) + (len(result) if isinstance(result, str) else len(line)) + 64


def _render_line(record: ToolExecutionRecord, *, shown: bool) -> str:
    """A record's history line: its `planner_view` as prompt JSON."""
    return to_prompt_json(planner_view([record], keep_full=int(shown))[0])


def _put(entries: dict[Any, Any], key: Any, entry: tuple[Any, ...], held: int, bound: int) -> int:
    """Put `entry` (its weight last) under `key`; return the weight `entries` now holds.

    The oldest entries are dropped to stay within `bound`; the caller holds its lock.
    """
    old = entries.pop(key, None)
    if old is not None:
        held -= old[-1]
    while entries and held + entry[-1] > bound:
        held -= entries.pop(next(iter(entries)))[-1]
    entries[key] = entry
    return held + int(entry[-1])


class HistoryLines:
    """The history lines one loop rendered, by call id and whether the result is shown.

    A record does not change after its round, so its line is rendered once; the entry is
    used only for an equal record (a forked run may reuse a call id). Each compiled loop
    holds its own (`LoopParts.history_lines`): lines and the results of their records,
    about `max_chars` characters at most, the oldest entries dropped first. A lookup is
    one dict read, without a lock: every plan reads each line of the run so far.

    It also keeps each recent run's history so far (`history`): the next round's history
    starts with it, and only the round's new records are looked up. Those histories
    hold the same lines (and the run's records), within their own bound of `max_chars`.

    Args:
        max_chars: The bound on what it keeps.
    """

    def __init__(self, max_chars: int = 8_000_000) -> None:
        self._max_chars = max_chars
        self._lines: dict[tuple[str, bool], tuple[ToolExecutionRecord, str, int]] = {}
        self._size = 0
        # by the call id of a run's first record: how many results it left out, its
        # records, their lines and its weight
        self._histories: dict[str, tuple[int, tuple[ToolExecutionRecord, ...], list[str], int]] = {}
        self._histories_size = 0
        self._lock = threading.Lock()  # writers only: a dict read is atomic

    def __len__(self) -> int:
        """How many lines it keeps."""
        return len(self._lines)

    def line(self, record: ToolExecutionRecord, *, shown: bool) -> str:
        """A record's history line, rendered once."""
        call_id = record.get("call_id")
        if not call_id:
            return _render_line(record, shown=shown)
        key = (str(call_id), shown)
        try:
            kept = self._lines[key]
        except KeyError:
            pass
        else:
            if kept[0] is record or kept[0] == record:
                return kept[1]
        line = None
        if not shown:  # a result `planner_view` never omits: the line with the result shown
            full = self._lines.get((key[0], True))
            if full is not None and (full[0] is record or full[0] == record) and not _omits(record):
                line = full[1]
        if line is None:
            line = _render_line(record, shown=shown)
        size = _entry_size((record, line))
        if size > self._max_chars:
            return line
        with self._lock:
            self._size = _put(self._lines, key, (record, line, size), self._size, self._max_chars)
        return line

    def history(self, records: Sequence[ToolExecutionRecord], omitted: int) -> str:
        """`history_text` of `records` (not empty), the oldest `omitted` results left out.

        A run's history only grows at its end: the lines of the run's last history are
        reused for the records it begins with (the very same objects) whose result is
        shown or left out as before, and only the other records are looked up.
        """
        key = records[0].get("call_id")
        if not key:
            return "\n".join(_history_lines(records, omitted, self)[0])
        key = str(key)
        cut, before = 0, None
        known = self._histories.get(key)
        if known is not None:
            was, kept, text, _ = known
            cut = min(len(kept), len(records))
            if was != omitted:  # the results between the two bounds changed sides
                cut = min(cut, was, omitted)
            if cut and all(map(operator.is_, kept[:cut], records)):
                before = text[:cut]
            else:
                cut = 0
        text, merged = _history_lines(records, omitted, self, cut, before)
        if not merged and cut < len(records):  # one line a record: a history to reuse
            self._keep_history(key, (omitted, tuple(records), text))
        return "\n".join(text)

    def _keep_history(
        self, key: str, entry: tuple[int, tuple[ToolExecutionRecord, ...], list[str]]
    ) -> None:
        # its lines; the records (and their results) are the run's state
        weight = sum(map(len, entry[2])) + 64 * len(entry[2])
        if weight > self._max_chars:
            return
        with self._lock:
            held, bound = self._histories_size, self._max_chars
            self._histories_size = _put(self._histories, key, (*entry, weight), held, bound)


_HISTORY_HEADER = "Calls so far, oldest first:"


def _round_section(round_index: int, max_rounds: int) -> str:
    """`round_section`: the round and the limit, and in the last round what to call."""
    last = " (the last round: call only what is essential)" if round_index + 1 >= max_rounds else ""
    return tagged_section("round", f"round_index: {round_index}, max_rounds: {max_rounds}{last}")


class _OnDemand:
    """A template value rendered only when the template uses it (`str()`)."""

    def __init__(self, render: Callable[[], str]) -> None:
        self._render = render

    def __str__(self) -> str:
        return self._render()


def build_plan_messages(
    *,
    user_input: str,
    user_extra_requirement: str,
    available_tools: str,
    round_state: RoundState,
    max_rounds: int,
    keep_tool_results: int,
    rollback_note: str = "",
    conversation: Sequence[dict[str, str]] = (),
    plan_example: str = "",
    reference_example: str = "",
    prompts: PromptSet | None = None,
    native: bool = False,
    history_lines: HistoryLines | None = None,
) -> list[BaseMessage]:
    """Render the planner's request for one round.

    The system message is the same for every round of a loop (no round number), and
    the human message puts what changes least first (tools, conversation, request),
    then the history of the rounds, which only grows at its end (results are omitted
    in blocks, see `omitted_results`), then the little that changes each round: a
    provider's prompt cache can reuse all of the previous prompt but its last lines.

    Args:
        user_input: The request.
        user_extra_requirement: Extra instructions ("" for none).
        available_tools: The tools as prompt JSON (see `to_prompt_json`), rendered once.
        round_state: What happened so far.
        max_rounds: The round limit.
        keep_tool_results: Of the results earlier prompts showed, at least this many
            latest are shown again in full, older ones are omitted in blocks of this
            size (the last round's results are always shown).
        rollback_note: Why the previous plan was rolled back ("" for none).
        conversation: Earlier turns of the conversation (`conversation_turns`).
        plan_example: A plan written with the loop's real tools (`plan_example`).
        reference_example: A plan whose second command uses the first's result, written
            with the loop's real tools (`reference_example`).
        prompts: The loop's templates (default: the shipped ones).
        native: The planner calls the bound tools (`plan_mode="native"`): the
            `plan_native_*` templates, which ask for tool calls instead of a JSON plan
            and leave out the tool list (the bound tools carry it).
        history_lines: The loop's rendered history lines (None: rendered afresh).

    Returns:
        A system message (rules) and a human message (tools, request, round state).
    """
    prompts = prompts or default_prompts()
    done = round_state["done_plans"]
    last = round_state["last_round_records"]
    last_count = _last_round_count(round_state)
    older = done[: len(done) - last_count] if last_count else done
    # The last round's results were never shown: all of them are. `keep_tool_results`
    # bounds the results earlier prompts already showed.
    system = prompts.render(
        "plan_native_system" if native else "plan_system",
        plan_example=plan_example or '{"next_action": "response", "execution_commands": []}',
        reference_example=reference_example or GENERIC_REFERENCE_EXAMPLE,
        max_rounds=max_rounds,
    )
    history = _OnDemand(lambda: history_text(done, last_count, keep_tool_results, history_lines))
    extra = quote_user_text(user_extra_requirement) if user_extra_requirement else ""
    turns = conversation_text(conversation)
    human = prompts.render(
        "plan_native_user" if native else "plan_user",
        available_tools=available_tools,
        conversation=turns,
        conversation_section=tagged_section("conversation", turns) if conversation else "",
        user_input=quote_user_text(user_input),
        user_extra_requirement=extra or "(none)",
        user_extra_requirement_section=tagged_section("user_extra_requirement", extra),
        history=history,
        history_section=_OnDemand(
            lambda: tagged_section("rounds", f"{_HISTORY_HEADER}\n{history}") if done else ""
        ),
        # for templates of the app's that ask for them (the shipped ones use `history`)
        done_plans=_OnDemand(
            lambda: to_prompt_json(planner_view(older, keep_full=keep_tool_results))
        ),
        last_round_records=_OnDemand(
            lambda: to_prompt_json(planner_view(last, keep_full=len(last)))
        ),
        round_section=_round_section(round_state["round_index"], max_rounds),
        round_number=round_state["round_index"] + 1,
        round_index=round_state["round_index"],
        max_rounds=max_rounds,
        rollback_note=rollback_note,
    )
    return [SystemMessage(system), HumanMessage(human)]


def conversation_text(turns: Sequence[dict[str, str]]) -> str:
    """Earlier turns for a prompt: one JSON object per line, or "(none)"."""
    if not turns:
        return "(none)"
    return "\n".join(to_prompt_json(turn) for turn in turns)


@cache
def default_prompts() -> PromptSet:
    """The shipped templates."""
    return PromptSet()
