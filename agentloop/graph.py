"""`create_tool_loop`: the plan / execute / answer state machine as a compiled LangGraph."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore

from agentloop.mcp.toolset import MCPToolset
from agentloop.middleware import LoopMiddleware
from agentloop.model_calls import ModelRetryPolicy
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
from agentloop.options import GovernanceOptions, ModelOptions, PlanningOptions
from agentloop.prompts import PromptSet
from agentloop.redaction import Redactor
from agentloop.settings import LoopContext, LoopSettings, PlanMode
from agentloop.state import InputState, LoopState, OutputState
from agentloop.structured import StructuredOutput
from agentloop.system_prompt import app_instructions
from agentloop.tools.cache import ResultCache
from agentloop.tools.catalog import ToolCatalog
from agentloop.tools.interceptors import CacheInterceptor, Interceptor, RateLimitInterceptor
from agentloop.tools.invoke import ToolInvoker
from agentloop.tools.pipeline import ToolRunner
from agentloop.tools.policy import ToolRetry
from agentloop.tools.registry import ToolLike
from agentloop.tools.threads import ToolThreads
from agentloop.updates import ReleaseSessionsUpdate

__all__ = ["create_tool_loop"]


def create_tool_loop(
    model: ModelLike,
    tools: Sequence[ToolLike | MCPToolset] = (),
    *,
    system_prompt: str | SystemMessage | None = None,
    middleware: Sequence[AgentMiddleware[Any, Any, Any]] = (),
    response_format: Any = None,
    context_schema: type[Any] | None = None,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    store: BaseStore | None = None,
    interrupt_before: Sequence[str] | None = None,
    interrupt_after: Sequence[str] | None = None,
    name: str = "tool_loop",
    max_rounds: int = 5,
    concurrency: int | None = None,
    plan_mode: PlanMode = "json",
    governance: GovernanceOptions | None = None,
    planning: PlanningOptions | None = None,
    models: ModelOptions | None = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Build a plan / execute tool loop.

    Args:
        model: The planner (and default answer) model: a LangChain chat model or an
            `init_chat_model` string such as `"openai:gpt-4.1-mini"`.
        tools: LangChain tools or plain functions, and `MCPToolset`s whose servers' tools
            join them (`tools=[add, MCPToolset("servers.json")]`). A toolset's sessions
            are shared by every run of the loop; a server that fails to start is left out
            (and tried again later) unless its config says `"required": true`.
        system_prompt: The app's instructions (text, or a `SystemMessage` whose content
            blocks are kept, cache markers included), as in `create_agent`: both the planner
            and the answer model see them first, before the loop's own rules.
        middleware: LangChain `AgentMiddleware` (and `@wrap_model_call` /
            `@wrap_tool_call` functions), first outermost: `wrap_model_call` wraps every
            planner, answer and `response_format` call, `wrap_tool_call` every governed
            call inside the ledger's guard; middleware `tools` are added. `before_*` /
            `after_*` hooks are a `ConfigurationError` (see `agentloop.middleware`).
        response_format: A typed result beside the text answer, as in `create_agent`: a
            pydantic model, dataclass, TypedDict or JSON schema (native structured output
            where the answer model has it, a tool call otherwise), or a `ToolStrategy` /
            `ProviderStrategy`. The output's `structured_response` holds it; a reply that
            does not validate is asked again once, then `status` is
            `structured_response_failed`.
        context_schema: The app's run context type (a dataclass, TypedDict or pydantic
            model), as in `create_agent`: `loop.invoke(input, context=MyContext(...))`
            reaches tools through `ToolRuntime.context`, and Studio shows it as a form.
            The loop's own per-run settings then go in
            `config["configurable"]["agentloop"]` (a `LoopContext`). Default: `LoopContext`
            is the context.
        checkpointer: A LangGraph checkpointer (none for `langgraph dev`).
        store: A LangGraph store (`InMemoryStore`...), which tools read through
            `ToolRuntime.store` or an `InjectedStore` argument (none for `langgraph dev`,
            which brings its own).
        interrupt_before: Nodes to interrupt before (e.g. `["execute"]`, needs a checkpointer).
        interrupt_after: Nodes to interrupt after.
        name: The compiled graph's name.
        max_rounds: Most executed rounds; the planner is not called once it is reached.
        concurrency: Most tool calls running at once (None: no limit).
        plan_mode: `"json"` (the plan as message text: any chat model), `"tool"` (native
            structured output through tool calling) or `"native"` (the planner is bound
            to the loop's tools and its tool calls are the round's commands; a planner
            without tool calling is a `ConfigurationError`).
        governance: How tools may be called (`GovernanceOptions`: policies,
            interceptors, timeouts, retries, cache, threads, redaction, ledger).
        planning: How rounds are planned and bounded, and the prompt templates
            (`PlanningOptions`).
        models: How models are called (`ModelOptions`: the answer model, fallbacks,
            retries, limits, prices).

    Returns:
        The compiled graph: input `user_input` / `user_extra_requirement` (or `messages`),
        output `round_state`, `answer`, `action_results`, `tool_logs`, `messages`,
        `status`.

    Raises:
        ConfigurationError: An option, tool or policy is invalid.
        MCPTransportError: A `required` MCP server could not be started.
    """
    governance = governance or GovernanceOptions()
    planning = planning or PlanningOptions()
    models = models or ModelOptions()
    threads = governance.tool_threads or ToolThreads()
    wrappers = LoopMiddleware(middleware, runner=threads.runner)
    settings = LoopSettings.build(
        planning,
        model_middleware=bool(wrappers.models),
        reviews_plan=_reviews_plan(interrupt_before),
        max_rounds=max_rounds,
        concurrency=concurrency,
        plan_mode=plan_mode,
        name=name,
    )
    toolsets = [tool for tool in tools if isinstance(tool, MCPToolset)]
    own_tools = [tool for tool in tools if not isinstance(tool, MCPToolset)]
    idle = [toolset for toolset in toolsets if not toolset.started]
    try:
        redact = governance.redact if governance.redact is not None else _default_redactor(toolsets)
        catalog = ToolCatalog(
            [*own_tools, *wrappers.tools],
            toolsets,
            governance.policies,
            redact=redact,
            default_timeout_s=governance.default_timeout_s,
            timeout_by_prefix=governance.timeout_by_prefix,
            default_retry=ToolRetry.of(governance.default_retry)
            if governance.default_retry
            else None,
        )
        cache = governance.cache if governance.cache is not None else ResultCache()
        runner = ToolRunner(
            catalog,
            cache,
            interceptors=[
                RateLimitInterceptor(),
                CacheInterceptor(cache),
                *governance.interceptors,
            ],
            mandatory_interceptors=governance.mandatory_interceptors,
            invoker=ToolInvoker(threads),
            wrap_call=_tool_wrapper(wrappers, catalog),
        )
        parts = LoopParts(
            settings=settings,
            models=ModelProvider(model, models.answer_model, models.fallbacks),
            tools=catalog,
            runner=runner,
            model_retry=ModelRetryPolicy.of(models.retry),
            model_limits=models.limits,
            prices=models.prices,
            ledger=governance.ledger,
            redact=redact,
            prompts=PromptSet(planning.prompts),
            system_prompt=app_instructions(system_prompt),
            middleware=wrappers if wrappers.models else None,
            structured=StructuredOutput(response_format) if response_format is not None else None,
        )
        builder = StateGraph(
            LoopState,
            context_schema=context_schema or LoopContext,
            input_schema=InputState,
            output_schema=OutputState,
        )
        builder.add_node("prepare", LoopNode("prepare", make_prepare(parts)))
        builder.add_node("plan", make_plan(parts))
        builder.add_node("execute", LoopNode("execute", core=make_execute(parts)))
        builder.add_node(CALL_NODE, make_call_tool(parts))
        builder.add_node("collect", LoopNode("collect", make_collect(parts)))
        builder.add_node("answer", make_answer(parts))
        builder.add_edge(START, "prepare")
        builder.add_conditional_edges(
            "prepare", Router("route_start", route_start), ["plan", "answer"]
        )
        builder.add_conditional_edges(
            "plan", Router("route_plan", route_plan), ["execute", "answer"]
        )
        builder.add_conditional_edges(
            "execute", Router("route_execute", route_execute), [CALL_NODE, "collect"]
        )
        builder.add_edge(CALL_NODE, "collect")
        builder.add_conditional_edges(
            "collect", Router("route_collect", route_collect), [CALL_NODE, "plan", "answer"]
        )
        scoped = [toolset for toolset in toolsets if toolset.has_run_scope]
        if scoped:
            builder.add_node("release_sessions", LoopNode("release_sessions", _releaser(scoped)))
            builder.add_edge("answer", "release_sessions")
            builder.add_edge("release_sessions", END)
        else:
            builder.add_edge("answer", END)
        return builder.compile(
            checkpointer=checkpointer,
            store=store,
            name=name,
            interrupt_before=list(interrupt_before) if interrupt_before else None,
            interrupt_after=list(interrupt_after) if interrupt_after else None,
        )
    except BaseException:
        for toolset in idle:  # the build started it: leave it as it was given
            toolset.stop_started()
        raise


def _tool_wrapper(
    wrappers: LoopMiddleware, catalog: ToolCatalog
) -> Callable[[RunnableConfig | None], Interceptor] | None:
    """The app's `wrap_tool_call` middleware as the layer of a call (None: there is none)."""
    if not wrappers.tool_calls:
        return None
    return lambda config: wrappers.tool_layer(config, catalog.registry.tools)


def _reviews_plan(interrupt_before: Sequence[str] | None) -> bool:
    """Whether the loop stops before `execute`, so a person sees the plan before it runs."""
    names = [interrupt_before] if isinstance(interrupt_before, str) else interrupt_before or ()
    return "execute" in names or "*" in names


def _default_redactor(toolsets: Sequence[MCPToolset]) -> Redactor:
    return Redactor(frozenset().union(*(toolset.secrets for toolset in toolsets)))


def _releaser(toolsets: Sequence[MCPToolset]) -> Any:
    def release_sessions(state: LoopState, runtime: Any) -> ReleaseSessionsUpdate:
        """Close the run's own MCP sessions (`"scope": "run"`) once no tool will run anymore."""
        for toolset in toolsets:
            toolset.release(state.get("run_id", ""))
        return {}

    return release_sessions
