"""`ContextEditingMiddleware` clears in a tool loop what it clears under `create_agent`.

One app (three rounds of tools whose results are long) runs through `create_agent` and
through a tool loop with the same middleware; the model's last request is compared:
which results it saw cleared (the edit's placeholder), which in full, and with which
arguments.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import (
    AgentMiddleware,
    ClearToolUsesEdit,
    ContextEditingMiddleware,
    ModelRequest,
    ModelResponse,
)
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver

from agentloop import ModelOptions, PlanningOptions, create_tool_loop
from agentloop.testing import ScriptedChatModel, plan_reply, tool_call_turns

Seen = list[tuple[str, dict[str, Any], Any]]
"""What a model saw of each call: the tool, its arguments, its result."""

ROUNDS: list[tuple[str, dict[str, Any]]] = [
    ("page", {"number": 1}),
    ("note", {"topic": "tides"}),
    ("page", {"number": 2}),
    ("page", {"number": 3}),
]
"""One call per round, oldest first."""


def _tools(calls: list[str]) -> list[BaseTool]:
    @tool
    def page(number: int) -> str:
        """Read a page of the harbour report."""
        calls.append("page")
        return f"page {number}: " + "the tide tables of the harbour, row by row. " * 20

    @tool
    def note(topic: str) -> str:
        """Read the editor's note on a topic."""
        calls.append("note")
        return f"note on {topic}: " + "the editor's remarks, one after another. " * 20

    return [page, note]


def _thread(name: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


def _middleware(**edit: Any) -> list[ContextEditingMiddleware[Any, Any]]:
    return [ContextEditingMiddleware(edits=[ClearToolUsesEdit(keep=1, **edit)])]


def _agent_saw(request: list[BaseMessage]) -> Seen:
    """The calls a `create_agent` request shows: the `AIMessage`s' calls, their results."""
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    seen: Seen = []
    for message in request:
        if isinstance(message, AIMessage):
            calls.update({str(c["id"]): (c["name"], dict(c["args"])) for c in message.tool_calls})
        elif isinstance(message, ToolMessage):
            name, args = calls[message.tool_call_id]
            seen.append((name, args, message.content))
    return seen


def _planner_saw(request: list[BaseMessage]) -> Seen:
    """The calls a planner request shows: a native one's as `create_agent`'s; a JSON one's
    as its plans' JSON and their `<tool_results>` (a line a call, by its number)."""
    if any(isinstance(message, ToolMessage) for message in request):
        return _agent_saw(request)
    seen: Seen = []
    commands: list[dict[str, Any]] = []
    for message in request[1:]:
        text = str(message.content)
        if isinstance(message, AIMessage) and text.startswith("{"):
            commands = json.loads(text)["execution_commands"]
        elif text.startswith("<tool_results>"):
            for line in text.splitlines()[1:-1]:
                item = json.loads(line)
                command = commands[item["call"] - 1]
                seen.append((command["tool_name"], command["tool_kwargs"], item["result"]))
    return seen


def _answerer_saw(request: list[BaseMessage]) -> list[Any]:
    """The results an answer request shows, in order."""
    text = str(request[-1].content)
    start = text.index("<action_results>") + len("<action_results>")
    return list(json.loads(text[start : text.index("</action_results>")]).values())


async def _both(
    run_loop: Any, plan_mode: str, middleware: Callable[[], list[Any]]
) -> tuple[ScriptedChatModel, list[str], ScriptedChatModel, ScriptedChatModel, list[str]]:
    """Run the app through `create_agent`, then through a tool loop, with fresh middleware."""
    agent_calls: list[str] = []
    model = ScriptedChatModel([*tool_call_turns([[call] for call in ROUNDS]), "All read."])
    agent = create_agent(
        model, _tools(agent_calls), checkpointer=InMemorySaver(), middleware=middleware()
    )
    theirs = await run_loop(agent, {"messages": [HumanMessage("Read the report.")]}, _thread("a"))
    assert theirs["messages"][-1].content == "All read."

    loop_calls: list[str] = []
    script = [plan_reply("execute", [{"tool_name": n, "tool_kwargs": a}]) for n, a in ROUNDS]
    planner = ScriptedChatModel([*script, plan_reply("response")])
    answerer = ScriptedChatModel(["All read."])
    graph = create_tool_loop(
        planner,
        _tools(loop_calls),
        models=ModelOptions(answer_model=answerer),
        # the middleware alone decides which results are left out (the loop's own
        # bound would omit the older ones it kept)
        planning=PlanningOptions(keep_tool_results=len(ROUNDS)),
        checkpointer=InMemorySaver(),
        plan_mode=plan_mode,
        middleware=middleware(),
    )
    ours = await run_loop(graph, {"user_input": "Read the report."}, _thread("b"))
    assert ours["status"] == "ok" and ours["answer"] == "All read."
    return model, agent_calls, planner, answerer, loop_calls


@pytest.mark.parametrize(
    ("edit", "cleared"),
    [
        ({"trigger": 300}, "[cleared]"),
        (
            {
                "trigger": 300,
                "clear_tool_inputs": True,
                "exclude_tools": ("note",),
                "placeholder": "[dropped: read it again]",
            },
            "[dropped: read it again]",
        ),
    ],
    ids=["defaults", "inputs-excluded-placeholder"],
)
async def test_older_results_are_cleared_in_what_the_planner_and_answer_model_see(
    run_loop: Any, plan_mode: str, edit: dict[str, Any], cleared: str
) -> None:
    model, agent_calls, planner, answerer, loop_calls = await _both(
        run_loop, plan_mode, lambda: _middleware(**edit)
    )
    theirs = _agent_saw(model.requests[-1])
    # create_agent's last call: only the newest result in full (and the excluded tool's)
    excluded = set(edit.get("exclude_tools", ()))
    assert [result == cleared for _, _, result in theirs] == [
        name not in excluded for name, _ in ROUNDS[:-1]
    ] + [False]
    if edit.get("clear_tool_inputs"):
        assert theirs[0][1] == {} and theirs[1][1] == {"topic": "tides"}

    assert _planner_saw(planner.requests[-1]) == theirs
    assert planner.request_count == model.request_count  # one call a round, then the answer
    assert loop_calls == agent_calls == [name for name, _ in ROUNDS]
    assert answerer.request_count == 1  # and its request is edited too
    assert _answerer_saw(answerer.requests[-1]) == [result for _, _, result in theirs]


async def test_below_the_trigger_nothing_is_cleared(run_loop: Any, plan_mode: str) -> None:
    model, agent_calls, planner, answerer, loop_calls = await _both(
        run_loop, plan_mode, lambda: _middleware(trigger=100_000)
    )
    theirs = _agent_saw(model.requests[-1])
    assert all(str(result).startswith(("page", "note")) for _, _, result in theirs)
    assert _planner_saw(planner.requests[-1]) == theirs
    assert _answerer_saw(answerer.requests[-1]) == [result for _, _, result in theirs]
    assert loop_calls == agent_calls


async def test_a_middleware_sees_the_transcript_and_its_edits_reach_the_planner(
    run_loop: Any, plan_mode: str
) -> None:
    """A `wrap_model_call` of the app's own sees `create_agent`'s messages and may edit them."""
    shapes: list[list[str]] = []

    class Shorten(AgentMiddleware):  # type: ignore[type-arg]
        """Keeps the first 7 characters of every tool result."""

        def _edited(self, request: ModelRequest) -> ModelRequest:
            shapes.append([type(message).__name__ for message in request.messages])
            edited = [
                message.model_copy(update={"content": str(message.content)[:7]})
                if isinstance(message, ToolMessage)
                else message
                for message in request.messages
            ]
            return request.override(messages=edited)

        def wrap_model_call(self, request: ModelRequest, handler: Any) -> ModelResponse:
            return handler(self._edited(request))  # type: ignore[no-any-return]

        async def awrap_model_call(self, request: ModelRequest, handler: Any) -> ModelResponse:
            return await handler(self._edited(request))  # type: ignore[no-any-return]

    model, _, planner, answerer, _ = await _both(run_loop, plan_mode, lambda: [Shorten()])
    theirs = _agent_saw(model.requests[-1])
    assert [result for _, _, result in theirs] == ["page 1:", "note on", "page 2:", "page 3:"]
    assert _planner_saw(planner.requests[-1]) == theirs
    assert _answerer_saw(answerer.requests[-1]) == [result for _, _, result in theirs]
    agent_shapes, loop_shapes = shapes[: model.request_count], shapes[model.request_count :]
    assert loop_shapes[: len(agent_shapes)] == agent_shapes  # the same transcript, call by call


async def test_a_message_a_middleware_adds_after_the_transcript_follows_it(
    run_loop: Any, plan_mode: str
) -> None:
    class Remind(AgentMiddleware):  # type: ignore[type-arg]
        """Adds a reminder after the conversation."""

        def _added(self, request: ModelRequest) -> ModelRequest:
            return request.override(messages=[*request.messages, HumanMessage("Be brief.")])

        def wrap_model_call(self, request: ModelRequest, handler: Any) -> ModelResponse:
            return handler(self._added(request))  # type: ignore[no-any-return]

        async def awrap_model_call(self, request: ModelRequest, handler: Any) -> ModelResponse:
            return await handler(self._added(request))  # type: ignore[no-any-return]

    model, _, planner, answerer, _ = await _both(run_loop, plan_mode, lambda: [Remind()])
    # after the transcript, as under create_agent; the loop's round (a JSON planner's) and
    # the answer's injected results come after it: the instruction to reply is last
    assert {request[-1].text for request in model.requests} == {"Be brief."}
    planned = [request[-1 if plan_mode == "native" else -2] for request in planner.requests]
    assert {message.text for message in planned} == {"Be brief."}
    assert answerer.requests[-1][-2].text == "Be brief."
    assert "<action_results>" in answerer.requests[-1][-1].text
