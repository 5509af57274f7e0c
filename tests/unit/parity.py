"""One app, two agents: what the parity tests share.

A parity test runs the same small app through `create_agent` and through
`create_tool_loop` on one script of decisions (`rounds`: per round, the tool calls as
`(name, arguments)`) and compares what a user observes. `agent_of` scripts the
tool-calling model of `create_agent`; `loop_of` scripts the loop's planner with the same
rounds as plans, then `response`, and its answer model with the same final answer. Both
get an `InMemorySaver`, as an app with threads has.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, NamedTuple

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from agentloop import ModelOptions, create_tool_loop
from agentloop.testing import ScriptedChatModel, plan_reply, tool_call_turns

Call = tuple[str, dict[str, Any]]
"""One tool call of a script: the tool's name and its arguments."""


class Agent(NamedTuple):
    """A `create_agent` graph and its scripted model."""

    graph: Any
    model: ScriptedChatModel


class Loop(NamedTuple):
    """A tool loop and its scripted planner and answer model."""

    graph: Any
    planner: ScriptedChatModel
    answerer: ScriptedChatModel


def agent_of(
    tools: Sequence[Any],
    rounds: Sequence[Sequence[Call]],
    middleware: Sequence[Any] = (),
    *,
    answer: str = "Done.",
    turns: int = 1,
    model: ScriptedChatModel | None = None,
    **kwargs: Any,
) -> Agent:
    """`create_agent` whose model makes `rounds` of tool calls, then says `answer` (per turn).

    With `model`, that model is used as it is (its own script).
    """
    if model is None:
        script = tool_call_turns(rounds, prefix=f"call_{uuid.uuid4().hex[:6]}")
        model = ScriptedChatModel([*script, answer] * turns)
    graph = create_agent(
        model, list(tools), middleware=list(middleware), checkpointer=InMemorySaver(), **kwargs
    )
    return Agent(graph, model)


def loop_of(
    tools: Sequence[Any],
    rounds: Sequence[Sequence[Call]],
    middleware: Sequence[Any] = (),
    *,
    plan_mode: str = "json",
    answer: str = "Done.",
    turns: int = 1,
    planner: ScriptedChatModel | None = None,
    **kwargs: Any,
) -> Loop:
    """The same app as a tool loop: its planner plans `rounds`, then says `response`.

    With `planner`, that model plans as it is (its own script).
    """
    if planner is None:
        plans = [
            plan_reply("execute", [{"tool_name": name, "tool_kwargs": a} for name, a in calls])
            for calls in rounds
        ]
        planner = ScriptedChatModel([*plans, plan_reply("response")] * turns)
    answerer = ScriptedChatModel([answer] * turns)
    graph = create_tool_loop(
        planner,
        list(tools),
        middleware=list(middleware),
        plan_mode=plan_mode,  # type: ignore[arg-type]
        checkpointer=InMemorySaver(),
        models=ModelOptions(answer_model=answerer),
        **kwargs,
    )
    return Loop(graph, planner, answerer)


def thread(name: str) -> dict[str, Any]:
    """A run's config on thread `name`."""
    return {"configurable": {"thread_id": name}}


def ask(text: str) -> dict[str, Any]:
    """A run's input, as both agents take it."""
    return {"messages": [HumanMessage(text)]}


def kinds(messages: Sequence[BaseMessage]) -> list[str]:
    """The transcript's shape: `AI(tool_calls)`, `Tool(error)`, ..."""
    shape = []
    for message in messages:
        name = type(message).__name__.removesuffix("Message")
        if isinstance(message, AIMessage) and message.tool_calls:
            name += "(tool_calls)"
        if isinstance(message, ToolMessage):
            name += f"({message.status})"
        shape.append(name)
    return shape


def tool_outcomes(messages: Sequence[BaseMessage]) -> list[tuple[str | None, str, Any]]:
    """Each `ToolMessage`'s tool name, status and content, in order."""
    return [(m.name, m.status, m.content) for m in messages if isinstance(m, ToolMessage)]


def tool_calls(messages: Sequence[BaseMessage]) -> list[Call]:
    """Every tool call the transcript's `AIMessage`s made, in order."""
    return [
        (call["name"], call["args"])
        for m in messages
        if isinstance(m, AIMessage)
        for call in m.tool_calls
    ]
