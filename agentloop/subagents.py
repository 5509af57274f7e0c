"""A compiled tool loop offered to another loop as a tool (a sub-agent).

The sub-agent runs as its own loop: its own rounds, history, tools and duplicate
namespace. Its answer is the tool result. Its progress reaches the parent's `custom`
stream as `agent_started`, `agent_progress` (wrapping each of its events) and
`agent_completed` (rounds, tool calls, tokens in and out, duration), and its token
usage joins the parent's `usage` summary.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool
from langgraph.config import get_stream_writer
from pydantic import BaseModel, Field

from agentloop._runtime import USAGE_SINK
from agentloop.errors import ConfigurationError

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


def _summary(state: dict[str, Any], started: float) -> dict[str, Any]:
    usage = state.get("usage") or {}
    return {
        "rounds": (state.get("round_state") or {}).get("round_index", 0),
        "tool_calls": len(state.get("tool_logs") or []),
        "input_tokens": sum(int(u.get("input_tokens", 0)) for u in usage.values()),
        "output_tokens": sum(int(u.get("output_tokens", 0)) for u in usage.values()),
        "duration_ms": round((time.perf_counter() - started) * 1000, 3),
    }


def as_tool(
    graph: Any,
    *,
    name: str,
    description: str,
    recursion_limit: int | None = None,
) -> BaseTool:
    """Offer a compiled `create_tool_loop` graph to another loop as a tool.

    Args:
        graph: The compiled sub-agent loop.
        name: The tool's name, as the parent planner sees it.
        description: What the sub-agent is good for.
        recursion_limit: LangGraph recursion limit of the sub-agent's runs.

    Returns:
        An async tool taking `user_input` and optional `user_extra_requirement` and
        returning the sub-agent's answer.

    Raises:
        ConfigurationError: `graph` is not a compiled graph.
    """
    if not hasattr(graph, "astream"):
        msg = f"as_tool needs a compiled graph, got {type(graph).__name__}"
        raise ConfigurationError(msg)

    async def run(user_input: str, user_extra_requirement: str = "") -> str:
        writer = _parent_writer()
        sink = USAGE_SINK.get()
        started = time.perf_counter()

        parent_context = contextvars.copy_context()

        def forward(event: dict[str, Any]) -> None:
            if writer is not None:
                # the parent's writer reads the parent's config: call it in that context
                parent_context.run(writer, {"agent": name, "ts": time.time(), **event})

        forward({"type": "agent_started", "input": user_input})
        config: dict[str, Any] = {"run_name": name}
        if recursion_limit is not None:
            config["recursion_limit"] = recursion_limit
        payload = {"user_input": user_input, "user_extra_requirement": user_extra_requirement}

        async def drive() -> dict[str, Any]:
            final: dict[str, Any] = {}
            async for mode, chunk in graph.astream(
                payload, config, stream_mode=["custom", "values"]
            ):
                if mode == "custom":
                    forward({"type": "agent_progress", "event": chunk})
                else:
                    final = chunk
            return final

        # A fresh context: the sub-agent is its own run, not a subgraph of the caller's.
        task = asyncio.get_running_loop().create_task(drive(), context=contextvars.Context())
        try:
            final = await task
        except Exception as error:
            forward({"type": "agent_completed", "success": False, "error": str(error)})
            raise
        summary = _summary(final, started)
        if sink is not None and final.get("usage"):
            sink.append(final["usage"])
        forward({"type": "agent_completed", "success": True, **summary})
        return str(final.get("answer", ""))

    return StructuredTool.from_function(
        coroutine=run,
        name=name,
        description=description,
        args_schema=SubAgentInput,
        metadata={"agentloop_subagent": True},
    )
