"""The loop's own bound on one plan's width, beside create_agent's per-run limit.

`create_agent` runs every tool call of an `AIMessage`; a limit there is
`ToolCallLimitMiddleware`'s, per run or per thread. The loop keeps one bound of its own,
`PlanningOptions(max_commands_per_round=)`, on the commands of one plan: the excess are
refused and told to the planner, as `ToolCallLimitMiddleware(exit_behavior="continue")`
tells the model about the calls over its limit, and the run goes on.
"""

from __future__ import annotations

from typing import Any

from langchain.agents.middleware import ToolCallLimitMiddleware
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from parity import Call, agent_of, ask, kinds, loop_of, thread

from agentloop import PlanningOptions

ran: list[str] = []


@tool
def read_inbox(folder: str) -> str:
    """Read the messages of an inbox folder."""
    ran.append(folder)
    return f"2 messages in {folder}"


THREE_READS: list[Call] = [("read_inbox", {"folder": folder}) for folder in ("a", "b", "c")]


def _by_call(messages: list[Any]) -> list[tuple[str, dict[str, Any], str]]:
    """Each tool call of the transcript and its `ToolMessage`'s status, in call order.

    (`create_agent` adds a blocked call's `ToolMessage` before the others run, the loop in
    call order: the pairing is what a model reads.)
    """
    status = {m.tool_call_id: m.status for m in messages if isinstance(m, ToolMessage)}
    return [
        (call["name"], call["args"], status[call["id"]])
        for m in messages
        if isinstance(m, AIMessage)
        for call in m.tool_calls
    ]


async def test_the_calls_of_a_plan_over_its_cap_are_refused_and_the_run_goes_on(
    run_loop: Any, plan_mode: str
) -> None:
    ran.clear()
    limit = ToolCallLimitMiddleware(run_limit=2, exit_behavior="continue")
    agent = agent_of([read_inbox], [THREE_READS], [limit])
    theirs = await run_loop(agent.graph, ask("Read a, b and c."), thread("agent"))
    assert sorted(ran) == ["a", "b"]  # they run in parallel

    ran.clear()
    capped = PlanningOptions(max_commands_per_round=2)
    loop = loop_of([read_inbox], [THREE_READS], plan_mode=plan_mode, planning=capped)
    ours = await run_loop(loop.graph, ask("Read a, b and c."), thread("loop"))
    assert sorted(ran) == ["a", "b"]  # the third call never ran
    # the same transcript: three calls, two results, an error for the third, the answer
    assert sorted(kinds(ours["messages"])) == sorted(kinds(theirs["messages"]))
    assert _by_call(ours["messages"]) == _by_call(theirs["messages"])
    assert [status for *_, status in _by_call(ours["messages"])] == ["success", "success", "error"]
    assert ours["status"] == "ok" and ours["answer"] == "Done."
    refused = ours["tool_logs"][-1]
    assert (refused["success"], refused["error_type"], refused["attempts"]) == (
        False,
        "too_many_commands",
        0,
    )
    # the planner is told, as the model is told under create_agent, and answers
    assert "at most 2 run per round" in "\n".join(str(m.content) for m in loop.planner.requests[-1])
