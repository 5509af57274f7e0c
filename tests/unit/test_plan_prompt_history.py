"""The planner's history: each earlier record rendered once, the prompt unchanged by it."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.tools import tool

from agentloop import ModelOptions, PlanningOptions, create_tool_loop
from agentloop.planning import prompt
from agentloop.planning.prompt import omitted_results, planner_view
from agentloop.prompts import to_prompt_json
from agentloop.testing import ScriptedChatModel, plan_reply

ROUNDS = 4


@tool
def get_item(n: int) -> str:
    """Read an item."""
    return f"item {n} " + "x" * 120  # long enough to be omitted


def _plans() -> list[Any]:
    rounds = [
        plan_reply(
            "execute",
            [{"tool_name": "get_item", "tool_kwargs": {"n": 2 * r + i}} for i in range(2)],
        )
        for r in range(ROUNDS)
    ]
    return [*rounds, plan_reply("response")]


def _loop(**planning: Any) -> tuple[Any, ScriptedChatModel]:
    planner = ScriptedChatModel(_plans())
    graph = create_tool_loop(
        planner,
        [get_item],
        models=ModelOptions(answer_model=ScriptedChatModel(replies=["done"])),
        planning=PlanningOptions(keep_tool_results=2, **planning),
    )
    return graph, planner


async def test_each_earlier_record_is_rendered_once_per_form(
    run_loop: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    rendered: list[str] = []

    def counting(value: Any) -> str:
        if isinstance(value, dict) and "tool_name" in value:
            rendered.append(f"{value['kwargs']}:{value.get('result') == prompt.OMITTED}")
        return to_prompt_json(value)

    monkeypatch.setattr(prompt, "to_prompt_json", counting)
    graph, planner = _loop()
    out = await run_loop(graph, {"user_input": "read the items"})
    records = out["round_state"]["done_plans"]
    assert len(records) == 2 * ROUNDS
    # each record once with its result, once more when it is omitted: not once per round
    assert len(rendered) == len(set(rendered)) <= 2 * len(records)

    last_prompt = str(planner.requests[-1][-1].content)
    seen = len(records) - 2
    view = planner_view(records, keep_full=len(records) - omitted_results(seen, 2))
    assert "\n".join(to_prompt_json(item) for item in view) in last_prompt


async def test_a_plan_template_may_still_show_the_records_as_lists(run_loop: Any) -> None:
    template = (
        "Tools: $available_tools\nAsked: $user_input\nDone: $done_plans\nLast: $last_round_records"
    )
    graph, planner = _loop(prompts={"plan_user": template})
    out = await run_loop(graph, {"user_input": "read the items"})
    records = out["round_state"]["done_plans"]
    last_prompt = str(planner.requests[-1][-1].content)
    last = records[-2:]
    assert f"Last: {to_prompt_json(planner_view(last, keep_full=2))}" in last_prompt
    assert f"Done: {to_prompt_json(planner_view(records[:-2], keep_full=2))}" in last_prompt


def _record(n: int, result: Any, *, success: bool = True) -> dict[str, Any]:
    return {
        "call_id": f"c{n}",
        "round_index": n,
        "purpose": "Use get_item",
        "tool_name": "get_item",
        "kwargs": {"n": n},
        "success": success,
        "result": result,
        "error": "" if success else "boom",
    }


def _state(records: list[dict[str, Any]]) -> Any:
    return {"done_plans": records, "last_round_records": records[-1:], "round_index": len(records)}


def test_short_results_are_never_omitted_and_long_ones_are() -> None:
    short = "ID-7"
    long = "page " + "x" * (prompt.SHORT_RESULT_CHARS + 1)
    records = [_record(0, short), _record(1, long), _record(2, 12), _record(3, long)]
    view = planner_view(records, keep_full=1)
    assert [item["result"] for item in view] == [short, prompt.OMITTED, 12, long]
    assert all("success" not in item for item in view)  # only a failure says so
    failed = planner_view([_record(0, None, success=False)], keep_full=0)[0]
    assert failed["success"] is False and failed["error"] == "boom"


def test_omits_results_is_true_only_when_a_long_result_is_left_out() -> None:
    long = "x" * 500
    assert not prompt.omits_results(_state([_record(n, "short") for n in range(6)]), 1)
    assert not prompt.omits_results(_state([_record(0, long), _record(1, long)]), 1)
    assert prompt.omits_results(_state([_record(n, long) for n in range(3)]), 1)
    assert not prompt.omits_results(_state([_record(n, long) for n in range(3)]), 5)


async def test_the_planner_sees_the_last_round_and_one_more_result_by_default(
    run_loop: Any,
) -> None:
    planner = ScriptedChatModel(_plans())
    graph = create_tool_loop(
        planner, [get_item], models=ModelOptions(answer_model=ScriptedChatModel(["done"]))
    )
    out = await run_loop(graph, {"user_input": "read the items"})
    last_prompt = str(planner.requests[-1][-1].content)
    records = out["round_state"]["done_plans"]
    shown = [r for r in records if str(r["result"]) in last_prompt]
    assert len(shown) == 3  # the last round's two and the latest one before them
    assert last_prompt.count(prompt.OMITTED) == len(records) - 3


def _run_record(run: str, round_index: int, position: int, *, refused: bool) -> dict[str, Any]:
    record: dict[str, Any] = {
        "call_id": f"{run}:{round_index}:{position}",
        "round_index": round_index,
        "purpose": "read an item",
        "tool_name": "get_item",
        "kwargs": {"n": position},
        "success": not refused,
        "result": "" if refused else f"item {position} " + "x" * (120 * (position % 2)),
        "error": "over the round's cap" if refused else "",
    }
    if refused:
        record["error_type"] = "too_many_commands"
    return record


@pytest.mark.parametrize("keep", [0, 1, 2, 3])
def test_a_loops_kept_history_reads_as_one_rendered_afresh(keep: int) -> None:
    lines = prompt.HistoryLines()
    runs: dict[str, list[Any]] = {"a": [], "b": []}
    for round_index in range(9):
        for run, records in runs.items():
            size = 1 + (round_index + len(run)) % 4
            new = [
                _run_record(
                    run, round_index, position, refused=position == 3 and round_index % 3 == 1
                )
                for position in range(size)
            ]
            records.extend(new)
            kept = prompt.history_text(records, len(new), keep, lines)
            assert kept == prompt.history_text(records, len(new), keep)
    # a fork: the same first record, then other records of its own
    fork = [*runs["a"][:5], _run_record("a", 2, 9, refused=False)]
    kept = prompt.history_text(fork, 1, 1, lines)
    assert kept == prompt.history_text(fork, 1, 1)
    assert '"n": 9' in kept
