"""The planner's view of the transcript: older long results left out in blocks."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from agentloop import ConfigurationError, ModelOptions, PlanningOptions, create_tool_loop
from agentloop.planning import prompt
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


def _loop(plan_mode: str = "json", **planning: Any) -> tuple[Any, ScriptedChatModel]:
    planner = ScriptedChatModel(_plans())
    graph = create_tool_loop(
        planner,
        [get_item],
        models=ModelOptions(answer_model=ScriptedChatModel(replies=["done"])),
        planning=PlanningOptions(**planning),
        plan_mode=plan_mode,  # type: ignore[arg-type]
    )
    return graph, planner


def _text(messages: list[BaseMessage]) -> str:
    return "\n".join(str(message.content) for message in messages)


@pytest.mark.parametrize("plan_mode", ["json", "native"])
async def test_the_planner_sees_the_last_round_and_one_more_result_by_default(
    run_loop: Any, plan_mode: str
) -> None:
    graph, planner = _loop(plan_mode)
    out = await run_loop(graph, {"user_input": "read the items"})
    last_request = _text(planner.requests[-1])
    records = out["round_state"]["done_plans"]
    shown = [r for r in records if str(r["result"]) in last_request]
    assert len(shown) == 3  # the last round's two and the latest one before them
    assert last_request.count(prompt.OMITTED) == len(records) - 3
    # the transcript itself keeps every result: only the request leaves some out
    assert all(str(r["result"]) in _text(out["messages"]) for r in records)


async def test_each_plan_request_is_the_transcript_bounded(run_loop: Any) -> None:
    graph, planner = _loop("native", keep_tool_results=2)
    out = await run_loop(graph, {"user_input": "read the items"})
    transcript = out["messages"][:-1]  # before the answer
    request = planner.requests[-1]
    assert request[1:] == prompt.transcript_view(transcript, keep_tool_results=2)
    assert [m.id for m in request[1:]] == [m.id for m in transcript]


def _transcript(results: list[Any], failed: tuple[int, ...] = ()) -> list[BaseMessage]:
    """A request, then one round per result."""
    messages: list[BaseMessage] = [HumanMessage("read", id="ask")]
    for n, result in enumerate(results):
        messages.append(AIMessage("", id=f"plan-{n}", tool_calls=[_call(n)]))
        status = "error" if n in failed else "success"
        messages.append(ToolMessage(result, tool_call_id=f"c{n}", id=f"out-{n}", status=status))
    return messages


def _call(n: int) -> Any:
    return {"name": "get_item", "args": {"n": n}, "id": f"c{n}", "type": "tool_call"}


def _results(messages: list[BaseMessage]) -> list[Any]:
    return [message.content for message in messages if isinstance(message, ToolMessage)]


def test_short_and_failed_results_are_never_omitted_and_long_ones_are() -> None:
    short, long = "ID-7", "page " + "x" * (prompt.SHORT_RESULT_CHARS + 1)
    messages = _transcript([short, long, "12", long, long], failed=(3,))
    view = prompt.transcript_view(messages, keep_tool_results=1)
    assert _results(view) == [short, prompt.OMITTED, "12", long, long]
    assert [m.id for m in view] == [m.id for m in messages]  # the same messages, edited
    assert _results(messages)[1] == long  # the transcript given is not changed
    assert prompt.transcript_view(messages, keep_tool_results=None) == messages


def test_omits_results_is_true_only_when_a_long_result_is_left_out() -> None:
    long = "x" * 500
    assert not prompt.omits_results(_transcript(["short"] * 6), 1)
    assert not prompt.omits_results(_transcript([long, long]), 1)
    assert prompt.omits_results(_transcript([long] * 3), 1)
    assert not prompt.omits_results(_transcript([long] * 3), 5)


@pytest.mark.parametrize("keep", [0, 1, 2, 3])
def test_results_are_left_out_in_blocks_so_a_request_changes_only_at_its_end(keep: int) -> None:
    long = "x" * 500
    changed_inside = 0
    for rounds in range(1, 12):
        before = prompt.transcript_view(_transcript([long] * rounds), keep_tool_results=keep)
        after = prompt.transcript_view(_transcript([long] * (rounds + 1)), keep_tool_results=keep)
        changed_inside += before != after[: len(before)]
    # the older results change sides once every `keep` rounds, not every round
    assert changed_inside <= (11 if keep == 0 else 11 // keep + 1)


def test_the_earliest_turns_are_trimmed_to_the_budget() -> None:
    turns: list[BaseMessage] = []
    for n in range(4):
        turns += [HumanMessage(f"question {n}", id=f"q{n}"), AIMessage(f"answer {n}", id=f"a{n}")]
    turns.append(HumanMessage("the request", id="now"))
    kept = prompt.transcript_view(turns, keep_tool_results=None, history_turns=1)
    assert [m.id for m in kept] == ["q3", "a3", "now"]
    none = prompt.transcript_view(turns, keep_tool_results=None, history_turns=0)
    assert [m.id for m in none] == ["now"]
    by_chars = prompt.transcript_view(
        turns, keep_tool_results=None, history_chars=40
    )  # 18 characters a turn
    assert [m.id for m in by_chars] == ["q2", "a2", "q3", "a3", "now"]


async def test_a_plan_template_shows_the_round_as_the_app_writes_it(run_loop: Any) -> None:
    graph, planner = _loop(prompts={"plan_user": "Round $round_number of $max_rounds. Go."})
    await run_loop(graph, {"user_input": "read the items"})
    assert str(planner.requests[0][-1].content) == "Round 1 of 5. Go."
    assert str(planner.requests[2][-1].content) == "Round 3 of 5. Go."


def test_a_template_asking_for_the_records_is_refused_with_what_it_may_use() -> None:
    with pytest.raises(ConfigurationError, match=r"\$done_plans.*it may use .*\$round_index"):
        _loop(prompts={"plan_user": "Done: $done_plans"})
