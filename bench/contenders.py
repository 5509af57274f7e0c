"""The contenders and their scripted inputs: our loop, `create_agent`, `create_react_agent`.

Every contender gets the same decisions (which tool, which arguments, when to answer)
from a `ScriptedChatModel` and the same async tools, so only the framework differs.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolCall, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph

from agentloop import ModelOptions, create_tool_loop, testing
from agentloop.testing import ScriptedChatModel, plan_reply, planning_round

__all__ = [
    "ONE_CHUNK",
    "BenchChatModel",
    "RECURSION_LIMIT",
    "Graph",
    "agent_input",
    "agent_responder",
    "agent_script",
    "both_forms_tool",
    "build_create_agent",
    "build_create_agent_answering",
    "build_loop",
    "build_react_agent",
    "loop_input",
    "loop_responder",
    "tool_call_turns",
    "plan_script",
    "sleeping_tool",
    "text_tool",
]

Graph = CompiledStateGraph[Any, Any, Any, Any]
"""A compiled LangGraph graph."""
Command = Mapping[str, Any]
"""One planned call: `{"tool_name", "tool_kwargs", "purpose"?}`."""

ONE_CHUNK = 1_000_000
"""A `chunk_size` larger than any reply: each reply streams as a single chunk."""
RECURSION_LIMIT = 100_000
"""LangGraph's step limit for the long runs (a round of our loop takes several steps)."""
ANSWER = "All done."
"""The final answer of every scripted run."""


class BenchChatModel(ScriptedChatModel):
    """A `ScriptedChatModel` that forgets the messages of its requests.

    The test double keeps every request for assertions; over hundreds of rounds those
    prompts would dominate the memory figures, which are about the loop's own state.
    """

    def __init__(self, replies: Sequence[Any] = (), **kwargs: Any) -> None:
        super().__init__(replies, keep_requests=False, **kwargs)


def both_forms_tool(name: str = "get_item") -> BaseTool:
    """A zero-time tool `name(n: int)` with both forms.

    `invoke` calls its sync form, `ainvoke` its async one.
    """

    def get_item(n: int) -> str:
        return f"{name} {n} ok"

    async def aget_item(n: int) -> str:
        return get_item(n)

    return StructuredTool.from_function(
        func=get_item, coroutine=aget_item, name=name, description="Return item n."
    )


def sleeping_tool(name: str, delay_s: float) -> BaseTool:
    """Return an async tool `name(n: int)` that sleeps `delay_s` seconds (0: no sleep)."""

    async def run(n: int) -> str:
        if delay_s > 0:
            await asyncio.sleep(delay_s)
        return f"{name} {n} ok"

    return StructuredTool.from_function(
        coroutine=run, name=name, description=f"Return item n (takes {delay_s:g}s)."
    )


def text_tool(name: str, chars: int) -> BaseTool:
    """Return an async tool `name(n: int)` whose result is a `chars`-character string."""

    async def run(n: int) -> str:
        line = f"page {n}: lorem ipsum dolor sit amet. "
        return (line * (chars // len(line) + 1))[:chars]

    return StructuredTool.from_function(
        coroutine=run, name=name, description=f"Return page n ({chars} characters)."
    )


def _with_purposes(commands: Sequence[Command]) -> list[dict[str, Any]]:
    return [
        {"purpose": f"{command['tool_name']} {command['tool_kwargs']}", **command}
        for command in commands
    ]


def plan_script(rounds: Sequence[Sequence[Command]]) -> list[str | AIMessage]:
    """Return our planner's script: one `execute` plan per round, then `response`."""
    replies = [plan_reply("execute", _with_purposes(commands)) for commands in rounds]
    return [*replies, plan_reply("response")]


def tool_call_turns(rounds: Sequence[Sequence[Command]]) -> list[AIMessage]:
    """Return one agent turn of tool calls per round of commands."""
    return testing.tool_call_turns(
        [
            [(command["tool_name"], command["tool_kwargs"]) for command in commands]
            for commands in rounds
        ]
    )


def agent_script(rounds: Sequence[Sequence[Command]]) -> list[str | AIMessage]:
    """Return the same decisions for a tool-calling agent: one turn of tool calls per round."""
    return [*tool_call_turns(rounds), ANSWER]


def build_loop(
    rounds: Sequence[Sequence[Command]],
    tools: Sequence[BaseTool],
    *,
    chunk_size: int = ONE_CHUNK,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    **options: Any,
) -> Graph:
    """Build our loop with a scripted planner (one plan per round) and answer model."""
    planner = BenchChatModel(plan_script(rounds), chunk_size=chunk_size)
    answerer = BenchChatModel([ANSWER], chunk_size=chunk_size)
    options.setdefault("max_rounds", max(1, len(rounds)))
    return create_tool_loop(
        planner,
        tools,
        models=ModelOptions(answer_model=answerer),
        checkpointer=checkpointer,
        **options,
    )


def build_create_agent(
    replies: Sequence[str | AIMessage] | Callable[[list[BaseMessage]], str | AIMessage],
    tools: Sequence[BaseTool],
    *,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
) -> Graph:
    """Build `langchain.agents.create_agent` on a scripted model (a script or a responder)."""
    model = _scripted(replies)
    return create_agent(model, list(tools), checkpointer=checkpointer)


class _AnswerStep(AgentMiddleware[Any, Any, Any]):
    """An `after_agent` hook that asks an answer model once more over the transcript.

    It gives `create_agent` the shape of our loop's run: its model's last reply is
    followed by one more step and one more model call that writes the answer.
    """

    def __init__(self, answerer: BaseChatModel) -> None:
        super().__init__()
        self.answerer = answerer

    async def aafter_agent(self, state: Any, runtime: Any) -> dict[str, Any]:
        reply = await self.answerer.ainvoke(state["messages"])
        return {"messages": [reply]}


def build_create_agent_answering(
    replies: Sequence[str | AIMessage] | Callable[[list[BaseMessage]], str | AIMessage],
    tools: Sequence[BaseTool],
    answer: str = ANSWER,
) -> Graph:
    """`create_agent` plus an answer step (an `after_agent` hook with a model call).

    The mission's shape in `create_agent`'s terms: a run of one call takes 4 steps and 3
    model calls, as ours does (plan, call, plan, answer), against create_agent's 3 and 2.
    The bound any plan / execute / answer loop on LangGraph starts from.
    """
    answerer = BenchChatModel([], responder=lambda _: answer, chunk_size=ONE_CHUNK)
    return create_agent(_scripted(replies), list(tools), middleware=[_AnswerStep(answerer)])


def build_react_agent(
    replies: Sequence[str | AIMessage], tools: Sequence[BaseTool]
) -> Graph | None:
    """Build the deprecated `langgraph.prebuilt.create_react_agent`, or None if it is gone."""
    try:
        from langgraph.prebuilt import create_react_agent
    except ImportError:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        graph: Graph = create_react_agent(_scripted(replies), list(tools))
    return graph


def _scripted(
    replies: Sequence[str | AIMessage] | Callable[[list[BaseMessage]], str | AIMessage],
) -> BenchChatModel:
    if callable(replies):
        return BenchChatModel([], responder=replies, chunk_size=ONE_CHUNK)
    return BenchChatModel(list(replies), chunk_size=ONE_CHUNK)


def loop_input(request: str = "Collect the items.") -> dict[str, Any]:
    """Return the input of our loop."""
    return {"user_input": request}


def agent_input(request: str = "Collect the items.") -> dict[str, Any]:
    """Return the input of a LangChain agent."""
    return {"messages": [("user", request)]}


def loop_responder(
    command: Command, *, native: bool = False
) -> Callable[[list[BaseMessage]], str | AIMessage]:
    """A planner for concurrent runs: `command` in round 0, then `response`.

    The round is read from the request itself (`planning_round`: the round a JSON plan's
    request names last, the rounds a native planner's transcript holds), so concurrent
    runs sharing the model never share a position in a script.

    Args:
        command: The call of round 0.
        native: Reply as a tool-calling planner (`plan_mode="native"`): `command` as a
            tool call, then the answer as text (no JSON plans).
    """
    execute = None if native else plan_reply("execute", _with_purposes([command]))
    respond = ANSWER if native else plan_reply("response")

    def respond_to(messages: list[BaseMessage]) -> str | AIMessage:
        if planning_round(messages) != 0:
            return respond
        return _tool_call(command) if execute is None else execute

    return respond_to


def _tool_call(command: Command) -> AIMessage:
    call = ToolCall(name=command["tool_name"], args=dict(command["tool_kwargs"]), id=None)
    return AIMessage(content="", tool_calls=[call])


def agent_responder(command: Command) -> Callable[[list[BaseMessage]], str | AIMessage]:
    """A tool-calling model for concurrent runs: `command` first, the answer after its result."""

    def respond_to(messages: list[BaseMessage]) -> str | AIMessage:
        if messages and isinstance(messages[-1], ToolMessage):
            return ANSWER
        return _tool_call(command)

    return respond_to
