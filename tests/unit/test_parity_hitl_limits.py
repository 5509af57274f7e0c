"""`HumanInTheLoopMiddleware` and `ToolCallLimitMiddleware`: the same effect as under create_agent.

The same small app (a gated `send_email`, a `read_inbox` read) runs through `create_agent`
and `create_tool_loop` with one script of tool calls; the tests compare what a user
observes: the interrupts and their action requests, how often each tool ran, and the
final messages (their kinds, the tool messages' status, how the run ended).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, NamedTuple

import parity
import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import (
    HumanInTheLoopMiddleware,
    ToolCallLimitMiddleware,
    after_model,
)
from langchain.agents.middleware.tool_call_limit import ToolCallLimitExceededError
from langchain_core.messages import AIMessage, ToolCall
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, interrupt
from parity import Call, ask, kinds, thread, tool_outcomes

from agentloop import ModelOptions, create_tool_loop
from agentloop.testing import ScriptedChatModel, plan_reply

EMAIL: Call = ("send_email", {"to": "ann@example.test", "body": "Lunch at noon?"})
EDITED = {"to": "bob@example.test", "body": "Lunch at one?"}


def _read(folder: str) -> Call:
    return ("read_inbox", {"folder": folder})


class App:
    """The app's two tools, counting what they ran with."""

    def __init__(self) -> None:
        self.ran: list[Call] = []

        @tool
        def send_email(to: str, body: str) -> str:
            """Send an email."""
            self.ran.append(("send_email", {"to": to, "body": body}))
            return f"sent to {to}"

        @tool
        def read_inbox(folder: str) -> str:
            """Read the messages of an inbox folder."""
            self.ran.append(("read_inbox", {"folder": folder}))
            return f"2 messages in {folder}"

        self.tools: list[BaseTool] = [send_email, read_inbox]

    @property
    def counts(self) -> Counter[str]:
        return Counter(name for name, _ in self.ran)


def agent_of(app: App, rounds: list[list[Call]], middleware: list[Any], *, turns: int = 1) -> Any:
    """create_agent scripted to make `rounds` of tool calls, then answer "Done." (per turn)."""
    return parity.agent_of(app.tools, rounds, middleware, turns=turns).graph


def loop_of(
    app: App, rounds: list[list[Call]], middleware: list[Any], plan_mode: str, *, turns: int = 1
) -> Any:
    """The same app as a tool loop: its planner plans `rounds`, then says `response`."""
    return parity.loop_of(app.tools, rounds, middleware, plan_mode=plan_mode, turns=turns).graph


def pending(graph: Any, config: dict[str, Any]) -> list[Any]:
    """The interrupt values the thread waits on."""
    return [item.value for item in graph.get_state(config).interrupts]


# -- HumanInTheLoopMiddleware ------------------------------------------------------------


def hitl() -> HumanInTheLoopMiddleware:
    return HumanInTheLoopMiddleware(interrupt_on={"send_email": True})


ONE_ROUND = [[EMAIL, _read("inbox")]]


async def test_only_the_gated_call_interrupts_with_the_same_action_requests(
    run_loop: Any, plan_mode: str
) -> None:
    theirs, ours = App(), App()
    agent = agent_of(theirs, ONE_ROUND, [hitl()])
    await run_loop(agent, ask("Email Ann, read the inbox."), thread("a"))
    graph = loop_of(ours, ONE_ROUND, [hitl()], plan_mode)
    out = await run_loop(graph, ask("Email Ann, read the inbox."), thread("l"))
    [their_request] = pending(agent, thread("a"))
    [our_request] = pending(graph, thread("l"))
    assert our_request["action_requests"] == their_request["action_requests"]
    assert [a["name"] for a in our_request["action_requests"]] == ["send_email"]
    assert our_request["review_configs"] == their_request["review_configs"]
    assert ours.ran == theirs.ran == []  # nothing of the round runs before the review
    assert out["status"] == "running"


async def test_a_round_without_the_gated_tool_does_not_stop(run_loop: Any, plan_mode: str) -> None:
    theirs, ours = App(), App()
    rounds = [[_read("inbox")]]
    agent = agent_of(theirs, rounds, [hitl()])
    agent_out = await run_loop(agent, ask("Read the inbox."), thread("a"))
    graph = loop_of(ours, rounds, [hitl()], plan_mode)
    out = await run_loop(graph, ask("Read the inbox."), thread("l"))
    assert pending(graph, thread("l")) == pending(agent, thread("a")) == []
    assert out["status"] == "ok"
    assert ours.ran == theirs.ran == [_read("inbox")]
    assert kinds(out["messages"]) == kinds(agent_out["messages"])


DECISIONS = {
    "approve": {"type": "approve"},
    "edit": {
        "type": "edit",
        "edited_action": {"name": "send_email", "args": EDITED},
    },
    "reject": {"type": "reject", "message": "Not today."},
}


@pytest.mark.parametrize("decision", list(DECISIONS))
async def test_a_decision_on_resume_has_the_same_effect(
    run_loop: Any, plan_mode: str, decision: str
) -> None:
    resume = Command(resume={"decisions": [DECISIONS[decision]]})
    theirs, ours = App(), App()
    agent = agent_of(theirs, ONE_ROUND, [hitl()])
    await run_loop(agent, ask("Email Ann, read the inbox."), thread("a"))
    agent_out = await run_loop(agent, resume, thread("a"))
    graph = loop_of(ours, ONE_ROUND, [hitl()], plan_mode)
    await run_loop(graph, ask("Email Ann, read the inbox."), thread("l"))
    out = await run_loop(graph, resume, thread("l"))
    assert pending(graph, thread("l")) == pending(agent, thread("a")) == []
    assert out["status"] == "ok"
    expected = {
        "approve": [EMAIL, _read("inbox")],
        "edit": [("send_email", EDITED), _read("inbox")],
        "reject": [_read("inbox")],
    }[decision]
    assert sorted(map(str, ours.ran)) == sorted(map(str, theirs.ran)) == sorted(map(str, expected))
    assert kinds(out["messages"]) == kinds(agent_out["messages"])
    assert tool_outcomes(out["messages"]) == tool_outcomes(agent_out["messages"])
    email = next(r for r in out["tool_logs"] if r["tool_name"] == "send_email")
    if decision == "reject":  # the hook's message is the call's outcome; it did not run
        assert not email["success"] and email["attempts"] == 0
        assert "Not today." in email["error"]
    else:
        assert email["success"]


TO_BOB: Call = ("send_email", {"to": "bob@example.test", "body": "Lunch at noon?"})


class Pair(NamedTuple):
    """create_agent and a tool loop on one script, with their models and apps to count."""

    agent: Any
    their_model: ScriptedChatModel
    theirs: App
    graph: Any
    planner: ScriptedChatModel
    ours: App
    answerer: ScriptedChatModel


def scripted_pair(rounds: list[list[Call]], middleware: list[Any], plan_mode: str) -> Pair:
    """create_agent and a tool loop on one script: the loop's answer differs if asked twice."""
    theirs, ours = App(), App()
    their_model = ScriptedChatModel(
        [
            *(
                AIMessage(
                    "",
                    tool_calls=[
                        ToolCall(name=name, args=args, id=f"call_{r}_{n}")
                        for n, (name, args) in enumerate(calls)
                    ],
                )
                for r, calls in enumerate(rounds)
            ),
            "Done.",
        ]
    )
    agent = create_agent(
        their_model, theirs.tools, middleware=middleware, checkpointer=InMemorySaver()
    )
    planner = ScriptedChatModel(
        [
            *(
                plan_reply(
                    "execute",
                    [{"tool_name": name, "tool_kwargs": args} for name, args in calls],
                )
                for calls in rounds
            ),
            plan_reply("response"),
        ]
    )
    answerer = ScriptedChatModel(["Done.", "Done twice."])
    graph = create_tool_loop(
        planner,
        ours.tools,
        middleware=middleware,
        plan_mode=plan_mode,  # type: ignore[arg-type]
        checkpointer=InMemorySaver(),
        models=ModelOptions(answer_model=answerer),
    )
    return Pair(agent, their_model, theirs, graph, planner, ours, answerer)


async def test_a_resumed_review_applies_to_the_plan_reviewed_without_asking_again(
    run_loop: Any, plan_mode: str
) -> None:
    # a planner asked again on resume would plan the mail to Bob, and the approval of
    # the mail to Ann would send it
    agent, their_model, theirs, graph, planner, ours, _ = scripted_pair(
        [[EMAIL], [TO_BOB]], [hitl()], plan_mode
    )
    await run_loop(agent, ask("Email Ann."), thread("a"))
    await run_loop(graph, ask("Email Ann."), thread("l"))
    [their_request] = pending(agent, thread("a"))
    [our_request] = pending(graph, thread("l"))
    assert our_request["action_requests"] == their_request["action_requests"]
    assert planner.request_count == their_model.request_count == 1
    approve = Command(resume={"decisions": [DECISIONS["approve"]]})
    await run_loop(agent, approve, thread("a"))
    out = await run_loop(graph, approve, thread("l"))
    assert ours.ran == theirs.ran == [EMAIL]  # the reviewed plan ran, as reviewed
    assert planner.request_count == their_model.request_count == 2  # once more: the next plan
    [their_request] = pending(agent, thread("a"))
    [our_request] = pending(graph, thread("l"))  # the next plan is reviewed in turn
    assert our_request["action_requests"] == their_request["action_requests"]
    assert [a["args"]["to"] for a in our_request["action_requests"]] == ["bob@example.test"]
    assert out["status"] == "running"
    reject = Command(resume={"decisions": [DECISIONS["reject"]]})
    agent_out = await run_loop(agent, reject, thread("a"))
    out = await run_loop(graph, reject, thread("l"))
    assert ours.ran == theirs.ran == [EMAIL]
    assert planner.request_count == their_model.request_count == 3  # the last says: done
    assert out["status"] == "ok"
    assert kinds(out["messages"]) == kinds(agent_out["messages"])
    assert tool_outcomes(out["messages"]) == tool_outcomes(agent_out["messages"])


async def test_a_hook_that_interrupts_on_every_reply_resumes_without_a_model_call(
    run_loop: Any, plan_mode: str
) -> None:
    seen: list[str] = []

    @after_model
    def confirm(state: Any, runtime: Any) -> dict[str, Any] | None:
        last = state["messages"][-1]
        calls = [call["args"].get("to", "") for call in getattr(last, "tool_calls", [])]
        seen.append(f"{calls}: {interrupt('confirm?')}")
        return None

    agent, their_model, theirs, graph, planner, ours, answerer = scripted_pair(
        [[EMAIL], [TO_BOB]], [confirm], plan_mode
    )
    for graph_, config in ((agent, thread("a")), (graph, thread("l"))):
        await run_loop(graph_, ask("Email Ann."), config)
        for answer in ("yes 1", "yes 2", "yes 3"):
            await run_loop(graph_, Command(resume=answer), config)
    their_seen, seen[:] = seen[:3], seen[3:]
    # each reply is confirmed once, with the answer given to it (the loop's answer
    # model call has its own confirmation next, still pending)
    confirmed = ["['ann@example.test']: yes 1", "['bob@example.test']: yes 2", "[]: yes 3"]
    assert seen == their_seen == confirmed
    assert ours.ran == theirs.ran == [EMAIL, TO_BOB]
    assert planner.request_count == 3  # two plans and the plan that says `response`
    assert their_model.request_count == 3  # two tool-call replies and the answer
    # the loop's own answer call is confirmed too, and not made again on resume
    assert pending(graph, thread("l")) == ["confirm?"]
    out = await run_loop(graph, Command(resume="yes 4"), thread("l"))
    assert seen == [*confirmed, "[]: yes 4"]
    assert answerer.request_count == 1
    assert (out["answer"], out["status"]) == ("Done.", "ok")
    assert out["messages"][-1].content == "Done."


# -- ToolCallLimitMiddleware -------------------------------------------------------------

THREE_READS = [[_read("a")], [_read("b")], [_read("c")]]


@pytest.mark.parametrize("exit_behavior", ["continue", "end"])
async def test_a_run_limit_runs_as_many_calls_and_ends_the_same(
    run_loop: Any, plan_mode: str, exit_behavior: str
) -> None:
    def limit() -> ToolCallLimitMiddleware:
        return ToolCallLimitMiddleware(run_limit=2, exit_behavior=exit_behavior)  # type: ignore[arg-type]

    theirs, ours = App(), App()
    agent_out = await run_loop(
        agent_of(theirs, THREE_READS, [limit()]), ask("Read a, b, c."), thread("a")
    )
    out = await run_loop(
        loop_of(ours, THREE_READS, [limit()], plan_mode), ask("Read a, b, c."), thread("l")
    )
    assert ours.ran == theirs.ran == [_read("a"), _read("b")]
    assert kinds(out["messages"]) == kinds(agent_out["messages"])
    assert tool_outcomes(out["messages"]) == tool_outcomes(agent_out["messages"])
    last = out["messages"][-1].content
    if exit_behavior == "end":
        assert out["status"] == "ended"
        assert last == agent_out["messages"][-1].content == out["answer"]
        assert last.startswith("Tool call limit reached")
        assert len(out["tool_logs"]) == 2  # the run ended before the third round ran
    else:
        assert out["status"] == "ok" and last == "Done."
        blocked = out["tool_logs"][-1]  # the round ran: the blocked call is on its record
        assert (blocked["tool_name"], blocked["success"], blocked["attempts"]) == (
            "read_inbox",
            False,
            0,
        )


async def test_a_thread_limit_counts_across_runs(run_loop: Any, plan_mode: str) -> None:
    rounds = [[_read("a")], [_read("b")]]
    theirs, ours = App(), App()
    agent = agent_of(theirs, rounds, [ToolCallLimitMiddleware(thread_limit=3)], turns=2)
    graph = loop_of(ours, rounds, [ToolCallLimitMiddleware(thread_limit=3)], plan_mode, turns=2)
    for turn in ("first", "second"):
        agent_out = await run_loop(agent, ask(f"Read a and b ({turn})."), thread("a"))
        out = await run_loop(graph, ask(f"Read a and b ({turn})."), thread("l"))
        assert ours.counts == theirs.counts
        assert kinds(out["messages"]) == kinds(agent_out["messages"])
        assert out["status"] == "ok"
    assert ours.counts["read_inbox"] == 3


async def test_a_limit_on_one_tool_blocks_only_that_tool(run_loop: Any, plan_mode: str) -> None:
    rounds = [[EMAIL, _read("a")], [EMAIL, _read("b")]]

    def limit() -> ToolCallLimitMiddleware:
        return ToolCallLimitMiddleware(tool_name="send_email", run_limit=1)

    theirs, ours = App(), App()
    agent_out = await run_loop(agent_of(theirs, rounds, [limit()]), ask("Twice."), thread("a"))
    out = await run_loop(loop_of(ours, rounds, [limit()], plan_mode), ask("Twice."), thread("l"))
    assert ours.counts == theirs.counts == Counter(send_email=1, read_inbox=2)
    assert kinds(out["messages"]) == kinds(agent_out["messages"])
    assert tool_outcomes(out["messages"]) == tool_outcomes(agent_out["messages"])


# -- a hook that rewrites the round's AIMessage ------------------------------------------


@after_model
def redirect_mail(state: Any, runtime: Any) -> dict[str, Any] | None:
    """Rewrites the last AIMessage (same id): mail goes to Bob, the inbox is not read."""
    last = next((m for m in reversed(state["messages"]) if isinstance(m, AIMessage)), None)
    if last is None or not last.tool_calls:
        return None
    calls = [
        {**call, "args": EDITED} if call["name"] == "send_email" else call
        for call in last.tool_calls
        if call["name"] != "read_inbox"
    ]
    if calls == last.tool_calls:
        return None
    return {"messages": [last.model_copy(update={"tool_calls": calls})]}


async def test_calls_a_hook_edits_or_removes_run_edited_or_not_at_all(
    run_loop: Any, plan_mode: str
) -> None:
    theirs, ours = App(), App()
    agent_out = await run_loop(
        agent_of(theirs, ONE_ROUND, [redirect_mail]), ask("Go."), thread("a")
    )
    graph = loop_of(ours, ONE_ROUND, [redirect_mail], plan_mode)
    out = await run_loop(graph, ask("Go."), thread("l"))
    assert ours.ran == theirs.ran == [("send_email", EDITED)]
    assert kinds(out["messages"]) == kinds(agent_out["messages"])
    assert tool_outcomes(out["messages"]) == tool_outcomes(agent_out["messages"])
    [planned] = [m for m in out["messages"] if isinstance(m, AIMessage) and m.tool_calls]
    assert [(c["name"], c["args"]) for c in planned.tool_calls] == [("send_email", EDITED)]
    read = next(r for r in out["tool_logs"] if r["tool_name"] == "read_inbox")
    assert (read["success"], read["attempts"], read["error_type"]) == (False, 0, "refused")


async def test_the_error_exit_raises_as_under_create_agent(run_loop: Any, plan_mode: str) -> None:
    def limit() -> ToolCallLimitMiddleware:
        return ToolCallLimitMiddleware(run_limit=2, exit_behavior="error")

    theirs, ours = App(), App()
    with pytest.raises(ToolCallLimitExceededError):
        await run_loop(agent_of(theirs, THREE_READS, [limit()]), ask("Read."), thread("a"))
    graph = loop_of(ours, THREE_READS, [limit()], plan_mode)
    with pytest.raises(ToolCallLimitExceededError):
        await run_loop(graph, ask("Read."), thread("l"))
    assert ours.ran == theirs.ran == [_read("a"), _read("b")]


async def test_per_call_review_interrupts_as_the_call_starts(run_loop: Any, plan_mode: str) -> None:
    def review() -> HumanInTheLoopMiddleware:
        return HumanInTheLoopMiddleware(
            interrupt_on={"send_email": True}, interrupt_mode="per_call"
        )

    theirs, ours = App(), App()
    agent = agent_of(theirs, ONE_ROUND, [review()])
    await run_loop(agent, ask("Email Ann, read the inbox."), thread("a"))
    graph = loop_of(ours, ONE_ROUND, [review()], plan_mode)
    await run_loop(graph, ask("Email Ann, read the inbox."), thread("l"))
    [theirs_pending] = agent.get_state(thread("a")).interrupts
    [ours_pending] = graph.get_state(thread("l")).interrupts
    assert {k: v for k, v in ours_pending.value.items() if k != "tool_call_id"} == {
        k: v for k, v in theirs_pending.value.items() if k != "tool_call_id"
    }
    assert ("send_email" in dict(ours.ran)) is ("send_email" in dict(theirs.ran)) is False
    agent_out = await run_loop(
        agent, Command(resume={theirs_pending.id: {"type": "approve"}}), thread("a")
    )
    out = await run_loop(graph, Command(resume={ours_pending.id: {"type": "approve"}}), thread("l"))
    assert ours.counts == theirs.counts == Counter(send_email=1, read_inbox=1)
    assert kinds(out["messages"]) == kinds(agent_out["messages"])
