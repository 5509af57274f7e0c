"""`create_tool_loop`: the plan / execute / answer state machine as a compiled LangGraph."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from agentloop.durability import SideEffectLedger
from agentloop.mcp_toolset import McpServersConfig, MCPToolset
from agentloop.model_calls import ModelRetry
from agentloop.model_stream import ModelLimits
from agentloop.models import ModelLike, ModelProvider
from agentloop.nodes import (
    CALL_NODE,
    LoopNode,
    LoopParts,
    Router,
    make_answer,
    make_call_tool,
    make_collect,
    make_execute,
    make_plan,
    make_prepare,
    route_collect,
    route_execute,
    route_plan,
    route_start,
)
from agentloop.redaction import Redact, Redactor, install_log_redaction
from agentloop.settings import LoopContext, LoopSettings, PlanMode
from agentloop.state import InputState, LoopState, OutputState
from agentloop.tools.cache import ResultCache
from agentloop.tools.interceptors import CacheInterceptor, Interceptor, RateLimitInterceptor
from agentloop.tools.invoke import ToolInvoker
from agentloop.tools.pipeline import ToolRunner
from agentloop.tools.policy import DEFAULT_TIMEOUT_S, ToolPolicy, ToolRetry
from agentloop.tools.registry import ToolLike, ToolRegistry
from agentloop.tools.threads import ToolThreads
from agentloop.usage import Prices

__all__ = ["DEFAULT_MODEL_RETRY", "DEFAULT_RETRY", "create_tool_loop"]

DEFAULT_RETRY = ToolRetry()
"""Retry policy of idempotent tools that declare none: 3 attempts on transient errors."""
DEFAULT_MODEL_RETRY = ModelRetry()
"""Retry policy of model calls."""


def create_tool_loop(
    model: ModelLike,
    tools: Sequence[ToolLike] = (),
    *,
    answer_model: ModelLike | None = None,
    max_rounds: int = 5,
    concurrency: int | None = None,
    plan_mode: PlanMode = "json",
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    name: str = "tool_loop",
    policies: Mapping[str, ToolPolicy] | None = None,
    interceptors: Sequence[Interceptor] = (),
    mandatory_interceptors: Sequence[Interceptor] = (),
    keep_tool_results: int = 5,
    max_consecutive_rollbacks: int = 5,
    default_timeout_s: float = DEFAULT_TIMEOUT_S,
    timeout_by_prefix: Mapping[str, float] | None = None,
    default_retry: ToolRetry | None = DEFAULT_RETRY,
    cache: ResultCache | None = None,
    mcp_servers: McpServersConfig | MCPToolset | None = None,
    fallback_models: Sequence[ModelLike] = (),
    model_retry: ModelRetry = DEFAULT_MODEL_RETRY,
    prices: Prices | None = None,
    interrupt_before: Sequence[str] | None = None,
    interrupt_after: Sequence[str] | None = None,
    ledger: SideEffectLedger | None = None,
    max_commands_per_round: int = 64,
    redact: Redact | None = None,
    model_limits: ModelLimits | None = None,
    tool_threads: ToolThreads | None = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Build a plan / execute tool loop.

    Args:
        model: The planner (and default answer) model: a LangChain chat model or an
            `init_chat_model` string such as `"openai:gpt-4.1-mini"`.
        tools: LangChain tools or plain functions.
        answer_model: The model of the final answer (default: `model`).
        max_rounds: Most executed rounds; the planner is not called once it is reached.
        concurrency: Most tool calls running at once (None: no limit).
        plan_mode: `"json"` (the plan as message text: any chat model) or `"tool"`
            (native structured output through tool calling).
        checkpointer: A LangGraph checkpointer (none for `langgraph dev`).
        name: The compiled graph's name.
        policies: `ToolPolicy` per tool name.
        interceptors: Optional interceptors (may short-circuit), outermost first.
        mandatory_interceptors: Interceptors that always run (audit, tracing).
        keep_tool_results: The planner sees full results of only this many latest records.
        max_consecutive_rollbacks: Rounds in a row that may be rolled back.
        default_timeout_s: Timeout of tools whose policy sets none.
        timeout_by_prefix: Timeouts by tool-name prefix (`{"search_": 10.0}`).
        default_retry: Retry policy of idempotent tools that declare none (None: no retry).
        cache: A result cache to share between loops (default: one per compiled loop).
        mcp_servers: MCP servers whose tools join `tools`: a JSON/YAML file path or an
            `mcpServers` dict (stdio `command/args/env/cwd` or HTTP `url`, with
            `allow`/`deny` tool lists), or an `MCPToolset`. Each run keeps one session
            (one process per stdio server) for all its calls and closes it when it answers.
        fallback_models: Models tried in order when the planner or answer model keeps
            failing after its retries.
        model_retry: How model calls are retried (transient errors, length limit,
            degenerate replies).
        prices: `{model_name: (usd_per_million_input, usd_per_million_output)}` for the
            `usage` cost summary.
        interrupt_before: Nodes to interrupt before (e.g. `["execute"]`, needs a checkpointer).
        interrupt_after: Nodes to interrupt after.
        ledger: Where calls are claimed and their outcomes kept (default: with the
            checkpointer: its database for SQLite and PostgreSQL, this process's memory
            otherwise).
        max_commands_per_round: Commands of one plan that run; the excess become
            refused records (`too_many_commands`) that tell the planner why.
        redact: Applied to every string written to state, events, log lines and prompts
            (default: a `Redactor` of secret-looking environment variables, the MCP
            servers' `env` and `headers` values, and credential shapes).
        model_limits: Time and size bounds of every model call (`ModelLimits()`).
        tool_threads: Where sync tools run (`ToolThreads(max_running=64, max_abandoned=4)`).

    Returns:
        The compiled graph: input `user_input` / `user_extra_requirement` (or `messages`),
        output `round_state`, `answer`, `action_results`, `tool_logs`, `messages`.

    Raises:
        ConfigurationError: An option, tool or policy is invalid.
    """
    settings = LoopSettings(
        max_rounds=max_rounds,
        concurrency=concurrency,
        plan_mode=plan_mode,
        keep_tool_results=keep_tool_results,
        max_consecutive_rollbacks=max_consecutive_rollbacks,
        max_commands_per_round=max_commands_per_round,
        name=name,
    )
    models = ModelProvider(model, answer_model, fallback_models)
    toolset = (
        mcp_servers
        if isinstance(mcp_servers, MCPToolset) or mcp_servers is None
        else MCPToolset(mcp_servers)
    )
    registry = ToolRegistry(
        [*tools, *(toolset.tools if toolset is not None else [])],
        policies,
        default_timeout_s=default_timeout_s,
        timeout_by_prefix=timeout_by_prefix,
        default_retry=default_retry,
    )
    result_cache = cache if cache is not None else ResultCache()
    runner = ToolRunner(
        registry,
        result_cache,
        interceptors=[RateLimitInterceptor(), CacheInterceptor(result_cache), *interceptors],
        mandatory_interceptors=mandatory_interceptors,
        invoker=ToolInvoker(tool_threads),
    )

    parts = LoopParts(
        settings=settings,
        models=models,
        registry=registry,
        runner=runner,
        model_retry=model_retry,
        model_limits=model_limits or ModelLimits(),
        prices=prices,
        ledger=ledger,
        redact=redact if redact is not None else _default_redactor(toolset),
    )
    install_log_redaction(logging.getLogger("agentloop"), parts.redact)
    builder = StateGraph(
        LoopState,
        context_schema=LoopContext,
        input_schema=InputState,
        output_schema=OutputState,
    )
    builder.add_node("prepare", LoopNode("prepare", make_prepare(parts)))
    builder.add_node("plan", make_plan(parts))
    builder.add_node("execute", LoopNode("execute", make_execute(parts)))
    builder.add_node(CALL_NODE, make_call_tool(parts))
    builder.add_node("collect", LoopNode("collect", make_collect(parts)))
    builder.add_node("answer", make_answer(parts))
    builder.add_edge(START, "prepare")
    builder.add_conditional_edges("prepare", Router("route_start", route_start), ["plan", "answer"])
    builder.add_conditional_edges("plan", Router("route_plan", route_plan), ["execute", "answer"])
    builder.add_conditional_edges(
        "execute", Router("route_execute", route_execute), [CALL_NODE, "collect"]
    )
    builder.add_edge(CALL_NODE, "collect")
    builder.add_conditional_edges(
        "collect", Router("route_collect", route_collect), [CALL_NODE, "plan", "answer"]
    )
    if toolset is not None:
        builder.add_node("release_sessions", LoopNode("release_sessions", _releaser(toolset)))
        builder.add_edge("answer", "release_sessions")
        builder.add_edge("release_sessions", END)
    else:
        builder.add_edge("answer", END)
    return builder.compile(
        checkpointer=checkpointer,
        name=name,
        interrupt_before=list(interrupt_before) if interrupt_before else None,
        interrupt_after=list(interrupt_after) if interrupt_after else None,
    )


def _default_redactor(toolset: MCPToolset | None) -> Redactor:
    return Redactor(toolset.secrets if toolset is not None else ())


def _releaser(toolset: MCPToolset) -> Any:
    def release_sessions(state: LoopState, runtime: Any) -> dict[str, Any]:
        """Close the run's MCP sessions once no tool will run anymore."""
        toolset.release(state.get("run_id", ""))
        return {}

    return release_sessions
