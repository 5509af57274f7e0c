"""The transcript is what the models see: middleware that edits it acts as under `create_agent`.

Each test runs one app through `create_agent` and through `create_tool_loop` (JSON and
native plan modes, `invoke` and `ainvoke`, `InMemorySaver`) with the request given both
ways a loop takes it (`{"user_input": ...}` and `{"messages": [...]}`), and compares what
every model request held.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from langchain.agents.middleware import (
    AgentMiddleware,
    ModelChoice,
    ModelRouterMiddleware,
    PIIMiddleware,
    SummarizationMiddleware,
    ToolErrorMiddleware,
    before_model,
)
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from parity import agent_of, kinds, loop_of, thread
from test_parity_stock_middleware import Decisions

from agentloop import create_tool_loop
from agentloop.testing import ScriptedChatModel, plan_reply

ADDRESS = re.compile(r"[\w.]+@example\.(?:org|com)")

pytestmark = pytest.mark.parametrize("form", ["user_input", "messages"])


def request(text: str, form: str) -> dict[str, Any]:
    """A run's input, in either form the loop takes."""
    return {"user_input": text} if form == "user_input" else {"messages": [HumanMessage(text)]}


def shown(requests: list[list[BaseMessage]]) -> str:
    """Everything some model requests held, as text."""
    return "\n".join(str(message.content) for sent in requests for message in sent)


@tool
def lookup_contact(name: str) -> str:
    """Where to reach a contact."""
    return f"{name} can be reached at jane.doe@example.com"


@tool
def search_tides(query: str) -> str:
    """Search the tide tables (a read, by its name, whose service is down)."""
    search_tides.metadata["runs"] += 1  # type: ignore[index]
    msg = f"search service unreachable for {query!r}"
    raise ConnectionError(msg)


search_tides.metadata = {"runs": 0}


async def test_pii_in_the_request_and_a_result_never_reaches_a_model(
    run_loop: Any, plan_mode: str, form: str
) -> None:
    def pii() -> list[Any]:
        return [
            PIIMiddleware(
                "email", strategy="redact", apply_to_input=True, apply_to_tool_results=True
            )
        ]

    ask = "I am me@example.org: how do I reach Jane?"
    rounds = [[("lookup_contact", {"name": "Jane"})]]
    agent = agent_of([lookup_contact], rounds, pii())
    await run_loop(agent.graph, request(ask, "messages"), thread("a"))
    assert not ADDRESS.search(shown(agent.model.requests))
    assert "[REDACTED_EMAIL]" in shown(agent.model.requests)

    loop = loop_of([lookup_contact], rounds, pii(), plan_mode=plan_mode)
    out = await run_loop(loop.graph, request(ask, form), thread("b"))
    assert out["status"] == "ok"
    seen = shown([*loop.planner.requests, *loop.answerer.requests])
    assert not ADDRESS.search(seen), seen
    assert seen.count("[REDACTED_EMAIL]") >= 3  # the request, the result, in each request
    assert not ADDRESS.search(str(out["messages"]))  # the transcript keeps the redaction
    assert out["user_input"] == "I am [REDACTED_EMAIL]: how do I reach Jane?"


@pytest.mark.filterwarnings("ignore:The middleware `ModelRouterMiddleware` is in beta")
async def test_a_model_router_routes_on_the_request(
    run_loop: Any, plan_mode: str, form: str
) -> None:
    choice = {"type": "choice", "choice": "big", "probabilities": {"big": 0.9, "small": 0.1}}
    decisions = Decisions(answers={"model_route": {**choice, "confidence": 0.9}})

    def routed(messages: list[BaseMessage]) -> str:  # a plan to answer, then the answer
        planning = "JSON" in str(messages[0].content)
        return str(plan_reply("response")) if planning else "Routed."

    big = ScriptedChatModel(responder=routed)
    router = ModelRouterMiddleware(
        choices={
            "small": ModelChoice(model=ScriptedChatModel(), criteria="easy"),
            "big": ModelChoice(model=big, criteria="hard"),
        },
        instructions="Pick one.",
        classifier=decisions,
    )
    graph = create_tool_loop(ScriptedChatModel(), [lookup_contact], middleware=[router],
                             plan_mode=plan_mode)  # fmt: skip
    out = await run_loop(graph, request("Tell me a joke.", form))
    assert out["status"] == "ok" and out["model_route"].choice == "big"
    assert [state.text for state in decisions.seen] == ["Tell me a joke."]
    assert big.request_count >= 1


async def test_a_summary_within_one_run_reaches_the_next_request(
    run_loop: Any, plan_mode: str, form: str
) -> None:
    def summarize() -> list[Any]:
        summarizer = ScriptedChatModel(responder=lambda messages: "SUMMARY OF THE CONTACTS")
        return [SummarizationMiddleware(summarizer, trigger=("messages", 4), keep=("messages", 1))]

    rounds = [[("lookup_contact", {"name": "Jane"})], [("lookup_contact", {"name": "Ann"})]]
    agent = agent_of([lookup_contact], rounds, summarize())
    await run_loop(agent.graph, request("Reach Jane and Ann?", "messages"), thread("a"))
    theirs = [shown([sent]) for sent in agent.model.requests]
    assert [("SUMMARY OF THE CONTACTS" in sent) for sent in theirs] == [False, False, True]

    loop = loop_of([lookup_contact], rounds, summarize(), plan_mode=plan_mode)
    out = await run_loop(loop.graph, request("Reach Jane and Ann?", form), thread("b"))
    assert out["status"] == "ok"
    ours = [shown([sent]) for sent in [*loop.planner.requests, *loop.answerer.requests]]
    # from the third call on, the model reads the summary, not the turns it replaced
    assert [("SUMMARY OF THE CONTACTS" in sent) for sent in ours] == [False, False, True, True]
    assert "Jane can be reached" not in ours[2]


@before_model
def rewrite_and_remind(state: Any, runtime: Any) -> dict[str, Any] | None:
    """Before a call that follows results: rewrite the last result, add a reminder."""
    last = state["messages"][-1]
    if not isinstance(last, ToolMessage):
        return None
    edited = last.model_copy(update={"content": "REWRITTEN RESULT"})
    return {"messages": [edited, HumanMessage("REMINDER: be brief.")]}


async def test_a_before_model_hooks_edits_reach_the_request_that_follows(
    run_loop: Any, plan_mode: str, form: str
) -> None:
    rounds = [[("lookup_contact", {"name": "Jane"})]]
    agent = agent_of([lookup_contact], rounds, [rewrite_and_remind])
    await run_loop(agent.graph, request("Reach Jane?", "messages"), thread("a"))
    theirs = shown(agent.model.requests[1:])
    assert "REWRITTEN RESULT" in theirs and "REMINDER: be brief." in theirs
    assert "jane.doe" not in theirs

    loop = loop_of([lookup_contact], rounds, [rewrite_and_remind], plan_mode=plan_mode)
    out = await run_loop(loop.graph, request("Reach Jane?", form), thread("b"))
    assert out["status"] == "ok"
    after = [loop.planner.requests[1], *loop.answerer.requests]
    for sent in after:
        assert "REWRITTEN RESULT" in shown([sent]) and "REMINDER: be brief." in shown([sent])
        assert "jane.doe" not in shown([sent])


async def test_a_tool_error_middleware_sees_the_tool_fail_once(
    run_loop: Any, plan_mode: str, form: str
) -> None:
    def handled() -> list[Any]:
        return [ToolErrorMiddleware(on_error=lambda error, call: f"search failed: {error}")]

    rounds = [[("search_tides", {"query": "tides"})]]
    search_tides.metadata["runs"] = 0  # type: ignore[index]
    agent = agent_of([search_tides], rounds, handled())
    theirs = await run_loop(agent.graph, request("Tides?", "messages"), thread("a"))
    assert search_tides.metadata["runs"] == 1  # type: ignore[index]

    search_tides.metadata["runs"] = 0  # type: ignore[index]
    loop = loop_of([search_tides], rounds, handled(), plan_mode=plan_mode)
    ours = await run_loop(loop.graph, request("Tides?", form), thread("b"))
    assert search_tides.metadata["runs"] == 1  # type: ignore[index]  # no retry beneath it
    assert kinds(ours["messages"]) == kinds(theirs["messages"])
    assert "search failed" in str(ours["messages"][2].content)


async def test_transformers_are_taken_as_create_agent_takes_them(
    run_loop: Any, plan_mode: str, form: str
) -> None:
    script = ["Hi."] if plan_mode == "native" else [plan_reply("response"), "Hi."]
    graph = create_tool_loop(ScriptedChatModel(script), [], plan_mode=plan_mode, transformers=[])
    out = await run_loop(graph, request("hello", form))
    assert out["status"] == "ok" and out["answer"] == "Hi."


async def test_a_native_request_is_the_transcript_after_the_system_message(
    run_loop: Any, form: str
) -> None:
    class Seen(AgentMiddleware):  # type: ignore[type-arg]
        """Keeps the messages every model request carried."""

        def __init__(self) -> None:
            super().__init__()
            self.requests: list[list[BaseMessage]] = []

        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            self.requests.append(list(request.messages))
            return handler(request)

        async def awrap_model_call(self, request: Any, handler: Any) -> Any:
            self.requests.append(list(request.messages))
            return await handler(request)

    seen = Seen()
    rounds = [[("lookup_contact", {"name": "Jane"})], [("lookup_contact", {"name": "Ann"})]]
    loop = loop_of([lookup_contact], rounds, [seen], plan_mode="native")
    out = await run_loop(loop.graph, request("Reach Jane and Ann?", form), thread("n"))
    transcript = out["messages"]
    for sent, carried in zip(loop.planner.requests, seen.requests, strict=False):
        assert sent[0].type == "system"
        assert sent[1:] == carried == transcript[: len(sent) - 1]
    assert isinstance(transcript[-1], AIMessage) and transcript[-1].content == "Done."
