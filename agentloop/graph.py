"""`create_tool_loop`: the plan / execute / answer state machine as a compiled LangGraph."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore

from agentloop.durability import check_server_database
from agentloop.errors import ConfigurationError
from agentloop.hooks import JUMP_KEY, LoopHooks, agent_hook_node, can_jump_to, resolve_schemas
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
            call inside the ledger's guard; `before_agent` / `after_agent` run as nodes
            around the run, `before_model` / `after_model` around every planner and
            answer call, with `jump_to`; middleware `state_schema` keys join the state
            and middleware `tools` the tools (see `agentloop.middleware`).
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
        ConfigurationError: An option, tool or policy is invalid, or, for a loop built
            without a checkpointer (to be served), `POSTGRES_URI` / `DATABASE_URI` names
            a database its ledger cannot reach.
        MCPTransportError: A `required` MCP server could not be started.
    """
    governance = governance or GovernanceOptions()
    planning = planning or PlanningOptions()
    models = models or ModelOptions()
    threads = governance.tool_threads or ToolThreads()
    wrappers = LoopMiddleware(middleware, runner=threads.runner)
    state_schema, input_schema, output_schema = resolve_schemas(
        middleware, LoopState, InputState, OutputState
    )
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(
        state_schema,
        context_schema=context_schema or LoopContext,
        input_schema=input_schema,
        output_schema=output_schema,
    )
    hooks = LoopHooks.of(middleware, builder.channels, threads.runner)
    settings = LoopSettings.build(
        planning,
        model_middleware=bool(wrappers.models) or (hooks is not None and hooks.around_model),
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
        if checkpointer is None and governance.ledger is None and catalog.registry.has_side_effects:
            check_server_database()  # served: the ledger's database must answer now
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
            hooks=hooks,
            structured=StructuredOutput(response_format) if response_format is not None else None,
        )
        for toolset in toolsets:  # its servers' sampling requests, during this loop's calls
            toolset.samplers.add(parts.sampling)
        builder.add_node("prepare", LoopNode("prepare", core=make_prepare(parts)))
        builder.add_node("plan", make_plan(parts))
        builder.add_node("execute", LoopNode("execute", core=make_execute(parts)))
        builder.add_node(CALL_NODE, make_call_tool(parts))
        builder.add_node("collect", LoopNode("collect", make_collect(parts)))
        builder.add_node("answer", make_answer(parts))
        scoped = [toolset for toolset in toolsets if toolset.has_run_scope]
        after_run = "release_sessions" if scoped else END
        entry, exit_node = _add_agent_hooks(builder, hooks, after_run)
        model_jumps = _jumps(hooks.model_jumps if hooks else (), exit_node)
        builder.add_edge(START, entry)
        builder.add_conditional_edges(
            "prepare", Router("route_start", route_start), ["plan", "answer"]
        )
        builder.add_conditional_edges(
            "plan",
            Router("route_plan", _jumping(route_plan, model_jumps)),
            _destinations(["execute", "answer"], model_jumps),
        )
        builder.add_conditional_edges(
            "execute", Router("route_execute", route_execute), [CALL_NODE, "collect"]
        )
        builder.add_edge(CALL_NODE, "collect")
        builder.add_conditional_edges(
            "collect", Router("route_collect", route_collect), [CALL_NODE, "plan", "answer"]
        )
        _add_hook_edge(builder, "answer", exit_node, model_jumps)
        if scoped:
            builder.add_node("release_sessions", LoopNode("release_sessions", _releaser(scoped)))
            builder.add_edge("release_sessions", END)
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


_DECISION = "<decision>"
"""A jump target: where the state's `decision` leads (`route_plan`: execute or answer)."""


def _jumps(declared: Iterable[str], end: str) -> dict[str, str]:
    """Where each declared jump of a planner or answer call's hooks leads."""
    targets = {"end": end, "model": "plan", "tools": _DECISION}
    return {jump: targets[jump] for jump in declared if jump in targets}


def _destinations(defaults: Sequence[str], jumps: Mapping[str, str]) -> list[str]:
    """A router's possible next nodes: its own, then those its jumps lead to."""
    found = list(defaults)
    for target in jumps.values():
        for node in ("execute", "answer") if target == _DECISION else (target,):
            if node not in found:
                found.append(node)
    return found


def _jumping(route: Callable[[Any], str], jumps: Mapping[str, str]) -> Callable[[Any], str]:
    """`route`, unless the node just run jumped (`jump_to`) to where a hook declared."""
    if not jumps:
        return route

    def routed(state: Any) -> str:
        target = jumps.get(state.get(JUMP_KEY) or "")
        if target is None:
            return route(state)
        return route_plan(state) if target == _DECISION else target

    routed.__name__ = getattr(route, "__name__", "route")
    return routed


def _add_hook_edge(
    builder: StateGraph[Any, Any, Any, Any], source: str, default: str, jumps: Mapping[str, str]
) -> None:
    """An edge to `default`, or a router when the hooks of `source` may jump elsewhere."""
    jumps = {jump: target for jump, target in jumps.items() if target != default}
    if not jumps:
        builder.add_edge(source, default)
        return
    router = Router(f"route_{source}", _jumping(lambda state: default, jumps))
    builder.add_conditional_edges(source, router, _destinations([default], jumps))


def _add_agent_hooks(
    builder: StateGraph[Any, Any, Any, Any], hooks: LoopHooks | None, after_run: str
) -> tuple[str, str]:
    """Add the `before_agent` / `after_agent` nodes, chained as `create_agent` chains them.

    Returns:
        The run's first node (the first `before_agent`, or `prepare`) and the node that
        follows the answer (the last middleware's `after_agent`, or `after_run`).

    Raises:
        ConfigurationError: Two middleware with such a hook have the same name.
    """
    if hooks is None:
        return "prepare", after_run
    before = [(m, f"{m.name}.before_agent") for m in hooks.before_agent]
    after = [(m, f"{m.name}.after_agent") for m in reversed(hooks.after_agent)]
    names = [name for _, name in (*before, *after)]
    if len(set(names)) != len(names):
        msg = (
            f"middleware with before_agent / after_agent hooks need distinct names (their "
            f"nodes are named after them, as in create_agent), got {sorted(names)}"
        )
        raise ConfigurationError(msg)
    exit_node = after[0][1] if after else after_run
    chains = (("before_agent", before, "prepare"), ("after_agent", after, after_run))
    for hook, chain, last in chains:
        following = [name for _, name in chain[1:]] + [last]
        for (item, name), default in zip(chain, following, strict=False):
            core = agent_hook_node(item, hook, hooks)  # type: ignore[arg-type]
            builder.add_node(name, LoopNode(name, core=core))
            declared = can_jump_to(item, hook)
            if hook == "before_agent":
                jumps = {"end": exit_node} if "end" in declared else {}
            else:
                jumps = _jumps(declared, after_run)
            _add_hook_edge(builder, name, default, jumps)
    return (before[0][1] if before else "prepare"), exit_node


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
