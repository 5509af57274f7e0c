"""A compiled tool loop offered to another loop as a tool (a sub-agent).

The sub-agent runs as its own loop: its own rounds, history, tools and duplicate
namespace. Its answer is the tool result. Its progress reaches the parent's `custom`
stream as `agent_started`, `agent_progress` (wrapping each of its events) and
`agent_completed` (rounds, tool calls, tokens in and out, duration), and its token
usage reaches the parent's `usage` summary as the tool's artifact.

It runs as a nested graph of the parent's call: with the parent's checkpointer, in the
call's own checkpoint namespace, and named after the parent's call. A crash inside it
resumes inside it, and its own calls keep the exactly-once guarantees of any loop.
Unless declared otherwise, a sub-agent is neither idempotent nor concurrency-safe: it
runs alone and is never retried automatically.
"""

from __future__ import annotations

import time
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool
from langgraph.config import get_stream_writer
from pydantic import BaseModel, Field

from agentloop.base.sync import has_running_loop, run_blocking
from agentloop.errors import ConfigurationError
from agentloop.governance.artifacts import AGENT_USAGE_ARTIFACT
from agentloop.governance.policy import SUBAGENT_METADATA
from agentloop.observability.events import AgentCompleted, AgentProgress, AgentStarted

__all__ = ["SubAgentInput", "as_tool"]


class SubAgentInput(BaseModel):
    """What a parent loop passes to a sub-agent."""

    user_input: str = Field(description="The task or question for the sub-agent.")
    user_extra_requirement: str = Field(
        default="", description="Extra instructions for the sub-agent (optional)."
    )


def _parent_writer() -> Any:
    try:
        return get_stream_writer()
    except RuntimeError:  # called outside a graph
        return None


def _summary(state: dict[str, Any], started: float) -> AgentCompleted:
    usage = state.get("usage") or {}
    return AgentCompleted(
        success=True,
        rounds=(state.get("round_state") or {}).get("round_index", 0),
        tool_calls=len(state.get("tool_logs") or []),
        input_tokens=sum(int(u.get("input_tokens", 0)) for u in usage.values()),
        output_tokens=sum(int(u.get("output_tokens", 0)) for u in usage.values()),
        duration_ms=round((time.perf_counter() - started) * 1000, 3),
    )


class _Progress:
    """Forwards a sub-agent run's events to the parent's stream and keeps its final state."""

    def __init__(self, name: str, user_input: str) -> None:
        self.name = name
        self.writer = _parent_writer()
        self.started = time.perf_counter()
        self.final: dict[str, Any] = {}
        self.forward(AgentStarted(input=user_input))

    def forward(self, event: AgentStarted | AgentProgress | AgentCompleted) -> None:
        if self.writer is not None:
            self.writer(
                {"agent": self.name, "ts": time.time(), "type": event.type, **event.payload()}
            )

    def take(self, mode: str, chunk: Any) -> None:
        if mode == "custom":
            self.forward(AgentProgress(event=chunk))
        else:
            self.final = chunk

    def __enter__(self) -> _Progress:
        return self

    def __exit__(self, kind: Any, error: BaseException | None, trace: Any) -> None:
        if isinstance(error, Exception):
            self.forward(AgentCompleted(success=False, error=str(error)))
        elif error is None:
            self.forward(_summary(self.final, self.started))

    def result(self) -> _Result:
        usage = self.final.get("usage") or {}
        return str(self.final.get("answer", "")), {AGENT_USAGE_ARTIFACT: usage}


_STREAM_MODES: list[Any] = ["custom", "values"]
_Result = tuple[str, dict[str, Any]]
"""The answer, and the artifact with the sub-agent's token usage."""


def as_tool(
    graph: Any,
    *,
    name: str,
    description: str,
    recursion_limit: int | None = None,
    idempotent: bool = False,
    concurrency_safe: bool = False,
) -> BaseTool:
    """Offer a compiled `create_tool_loop` graph to another loop as a tool.

    Args:
        graph: The compiled sub-agent loop.
        name: The tool's name, as the parent planner sees it.
        description: What the sub-agent is good for.
        recursion_limit: LangGraph recursion limit of the sub-agent's runs.
        idempotent: Declare that running the sub-agent twice has the effect of once
            (its tools only read): the parent may then retry it.
        concurrency_safe: Declare that it may run in parallel with other safe calls.

    Returns:
        An async tool taking `user_input` and optional `user_extra_requirement` and
        returning the sub-agent's answer.

    Raises:
        ConfigurationError: `graph` is not a compiled graph.
    """
    if not hasattr(graph, "astream"):
        msg = f"as_tool needs a compiled graph, got {type(graph).__name__}"
        raise ConfigurationError(msg)

    async def running(user_input: str, user_extra_requirement: str = "") -> _Result:
        """The sub-agent's run, nested in the parent's call (`astream`, or `stream` off a loop)."""
        child: dict[str, Any] = {"run_name": name}
        if recursion_limit is not None:
            child["recursion_limit"] = recursion_limit
        payload = {"user_input": user_input, "user_extra_requirement": user_extra_requirement}
        with _Progress(name, user_input) as progress:  # the parent's checkpointer applies
            if has_running_loop():
                async for item in graph.astream(payload, child, stream_mode=_STREAM_MODES):
                    progress.take(*item)
            else:
                for item in graph.stream(payload, child, stream_mode=_STREAM_MODES):
                    progress.take(*item)
        return progress.result()

    return StructuredTool.from_function(
        # the tool's two entry points run the one coroutine
        func=lambda **arguments: run_blocking(running(**arguments)),
        coroutine=running,
        name=name,
        description=description,
        args_schema=SubAgentInput,
        response_format="content_and_artifact",
        metadata={
            SUBAGENT_METADATA: True,
            "agentloop": {"idempotent": idempotent, "concurrency_safe": concurrency_safe},
        },
    )
