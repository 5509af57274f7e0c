"""`create_tool_loop`: the plan / execute / answer state machine as a compiled LangGraph."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from langchain_core.messages import AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Overwrite

from agentloop._nodes import graph_node
from agentloop._runtime import run_context, stream_writer
from agentloop.answer import AnswerNode
from agentloop.events import Emit, make_emitter
from agentloop.execution import CALL_NODE, ExecutePath
from agentloop.mcp_toolset import McpServersConfig, MCPToolset
from agentloop.model_calls import ModelRetry
from agentloop.models import ModelLike, ModelProvider
from agentloop.planning.node import chunk_text, plan_runnable
from agentloop.settings import LoopContext, LoopSettings, PlanMode
from agentloop.state import RESET, InputState, LoopState, OutputState, empty_round_state
from agentloop.tools.cache import ResultCache
from agentloop.tools.interceptors import CacheInterceptor, Interceptor, RateLimitInterceptor
from agentloop.tools.pipeline import ToolRunner
from agentloop.tools.policy import DEFAULT_TIMEOUT_S, ToolPolicy, ToolRetry
from agentloop.tools.registry import ToolLike, ToolRegistry
from agentloop.usage import Prices

__all__ = ["DEFAULT_MODEL_RETRY", "DEFAULT_RETRY", "create_tool_loop", "resolve_request"]

DEFAULT_RETRY = ToolRetry()
"""Retry policy of idempotent tools that declare none: 3 attempts on transient errors."""
DEFAULT_MODEL_RETRY = ModelRetry()
"""Retry policy of model calls."""


def _last_human(messages: Sequence[AnyMessage]) -> HumanMessage | None:
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            return message
    return None


def resolve_request(state: Mapping[str, Any]) -> tuple[str, HumanMessage | None]:
    """Decide what this run answers: `user_input`, or the newest human message.

    A human message that the previous run did not answer wins over a `user_input` left
    in a checkpointed thread by that run; a freshly given `user_input` wins otherwise.

    Returns:
        The request text, and the human message it came from (None for `user_input`).
    """
    user_input = (state.get("user_input") or "").strip()
    human = _last_human(state.get("messages") or [])
    fresh_message = human is not None and (human.id or "") != state.get("answered_message_id", "")
    stale_input = not user_input or user_input == state.get("answered_input")
    if human is not None and (not user_input or (fresh_message and stale_input)):
        return chunk_text(human).strip(), human
    return user_input, None


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
    )

    def run_settings(config: RunnableConfig) -> tuple[LoopSettings, Emit]:
        return (
            settings.with_context(run_context(config)),
            make_emitter(stream_writer(config), loop_name=name),
        )

    planner = plan_runnable(models, registry, run_settings, model_retry, prices)
    execute_path = ExecutePath(runner, run_settings)
    answer = AnswerNode(
        models,
        run_settings,
        model_retry,
        prices=prices,
        on_finish=[toolset.release] if toolset is not None else [],
    )

    def prepare(state: LoopState, config: RunnableConfig) -> dict[str, Any]:
        request, human = resolve_request(state)
        update: dict[str, Any] = {
            "user_input": request,
            "user_extra_requirement": state.get("user_extra_requirement") or "",
            "round_state": Overwrite(empty_round_state()),
            "decision": {"next_action": "response", "execution_commands": []},
            "answer": "",
            "action_results": {},
            "tool_logs": Overwrite([]),
            "rollbacks": [],
            "consecutive_rollbacks": 0,
            "rollback_note": "",
            "round_calls": [],
            "call_results": {**RESET},
            "usage": {**RESET},
            "run_id": uuid.uuid4().hex[:12],
        }
        if human is not None:
            update["answered_message_id"] = human.id or ""
        elif request:
            update["messages"] = [HumanMessage(request)]
        return update

    def route_start(state: LoopState, config: RunnableConfig) -> Literal["plan", "answer"]:
        limit = settings.with_context(run_context(config)).max_rounds
        return "plan" if limit > 0 else "answer"

    def route_plan(state: LoopState, config: RunnableConfig) -> Literal["execute", "answer"]:
        decision: Mapping[str, Any] = state.get("decision") or {}
        wants_tools = decision.get("next_action") == "execute"
        return "execute" if wants_tools and decision.get("execution_commands") else "answer"

    builder = StateGraph(
        LoopState,
        context_schema=LoopContext,
        input_schema=InputState,
        output_schema=OutputState,
    )

    def router(func: Callable[[Any, RunnableConfig], Any], name: str) -> Any:
        return graph_node(func, name=name, trace=False)

    builder.add_node("prepare", graph_node(prepare, name="prepare"))
    builder.add_node("plan", graph_node(planner.invoke, planner.ainvoke, name="plan"))
    builder.add_node("execute", graph_node(execute_path.execute, name="execute"))
    builder.add_node(
        CALL_NODE, graph_node(execute_path.call_tool, execute_path.acall_tool, name=CALL_NODE)
    )
    builder.add_node("collect", graph_node(execute_path.collect, name="collect"))
    builder.add_node("answer", graph_node(answer.invoke, answer.ainvoke, name="answer"))
    builder.add_edge(START, "prepare")
    builder.add_conditional_edges("prepare", router(route_start, "route_start"), ["plan", "answer"])
    builder.add_conditional_edges("plan", router(route_plan, "route_plan"), ["execute", "answer"])
    builder.add_conditional_edges(
        "execute", router(execute_path.route_execute, "route_execute"), [CALL_NODE, "collect"]
    )
    builder.add_edge(CALL_NODE, "collect")
    builder.add_conditional_edges(
        "collect",
        router(execute_path.route_collect, "route_collect"),
        [CALL_NODE, "plan", "answer"],
    )
    builder.add_edge("answer", END)
    return builder.compile(
        checkpointer=checkpointer,
        name=name,
        interrupt_before=list(interrupt_before) if interrupt_before else None,
        interrupt_after=list(interrupt_after) if interrupt_after else None,
    )
