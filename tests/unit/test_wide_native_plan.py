"""A native plan far wider than the round's cap: the excess is refused as a block.

A planner reply of thousands of tool calls runs `max_commands_per_round` of them; every
other call gets its refused record and its error `ToolMessage`, as a narrower plan's
excess does, but none of them is prepared on its own: the refusal is written (and
redacted) once for the whole excess, not once per call, so the work does not grow with
the number of calls refused. The redact hook counts that work: every string the loop
writes to state, events and prompts goes through it.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, ToolCall, ToolMessage
from langchain_core.tools import tool

from agentloop import GovernanceOptions, ModelOptions, PlanningOptions, create_tool_loop
from agentloop.testing import ScriptedChatModel

CAP = 8
REFUSAL = "run per round"
"""Words of the refusal every call over the cap gets."""


class CountingRedact:
    """A redact hook that changes nothing and counts the refusals it is given."""

    def __init__(self) -> None:
        self.refusals = 0

    def __call__(self, text: str) -> str:
        if REFUSAL in text:
            self.refusals += 1
        return text


async def _wide_plan(run_loop: Any, calls: int) -> tuple[dict[str, Any], list[int], int]:
    """Run a native plan of `calls` reads; return the output, what ran, the refusals redacted."""
    ran: list[int] = []

    @tool
    def get_item(n: int) -> str:
        """Read one item."""
        ran.append(n)
        return f"item {n}"

    plan = AIMessage(
        "",
        tool_calls=[ToolCall(name="get_item", args={"n": n}, id=f"call_{n}") for n in range(calls)],
    )
    redact = CountingRedact()
    graph = create_tool_loop(
        ScriptedChatModel([plan, "Done."], chunk_size=10_000),
        [get_item],
        plan_mode="native",
        planning=PlanningOptions(max_commands_per_round=CAP),
        governance=GovernanceOptions(redact=redact),
        models=ModelOptions(answer_model=ScriptedChatModel(["Done."], repeat_last=True)),
    )
    out = await run_loop(graph, {"user_input": "read them all"})
    return out, ran, redact.refusals


async def test_a_plan_of_a_thousand_calls_runs_the_cap_and_refuses_the_rest_at_once(
    run_loop: Any,
) -> None:
    out, ran, wide = await _wide_plan(run_loop, 1_000)
    assert sorted(ran) == list(range(CAP))
    records = out["tool_logs"]
    assert [r["index"] for r in records] == list(range(1_000))
    refused = records[CAP:]
    assert all(r["error_type"] == "too_many_commands" and r["attempts"] == 0 for r in refused)
    assert all(f"at most {CAP} run per round" in r["error"] for r in refused)
    assert [r["kwargs"] for r in refused] == [{"n": n} for n in range(CAP, 1_000)]
    # the transcript: the planner's 1,000 calls as it made them, one ToolMessage each
    [plan] = [m for m in out["messages"] if isinstance(m, AIMessage) and m.tool_calls]
    assert [(c["id"], c["args"]) for c in plan.tool_calls] == [
        (f"call_{n}", {"n": n}) for n in range(1_000)
    ]
    outcomes = {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}
    assert len(outcomes) == 1_000
    assert {outcomes[f"call_{n}"].status for n in range(CAP, 1_000)} == {"error"}
    assert REFUSAL in str(outcomes["call_999"].content)
    assert out["status"] == "ok" and out["answer"] == "Done."
    # the work: the refusal is written as often for 992 calls over the cap as for 8
    _, _, narrow = await _wide_plan(run_loop, 2 * CAP)
    assert 0 < wide == narrow
