"""`create_tool_loop`: the plan / execute / answer state machine as a compiled LangGraph."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import SystemMessage
from langgraph.cache.base import BaseCache
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore
from langgraph.types import All, Send

from agentloop.durability import check_server_database
from agentloop.errors import ConfigurationError
from agentloop.governance.cache import ResultCache
from agentloop.governance.catalog import ToolCatalog
from agentloop.governance.invoke import ToolInvoker
from agentloop.governance.pipeline import ToolRunner
from agentloop.governance.policy import ToolRetry
from agentloop.governance.registry import POLICY_LOGGER, DictTool, ToolLike, dict_tool_name
from agentloop.governance.threads import ToolThreads
from agentloop.mcp.toolset import MCPToolset
from agentloop.middleware.hooks import (
    JUMP_KEY,
    LoopHooks,
    agent_hook_node,
    can_jump_to,
    resolve_schemas,
    waiting_reply,
)
from agentloop.middleware.stack import LoopMiddleware
from agentloop.models.calls import ModelRetryPolicy, model_layers
from agentloop.models.resolve import ModelLike, ModelProvider
from agentloop.nodes._runnable import LoopNode, Router
from agentloop.nodes.accelerate import Accelerator
from agentloop.nodes.answer import AFTER_ANSWER_NODE, make_answer, make_answer_after_model
from agentloop.nodes.call_tool import make_call_tool
from agentloop.nodes.execute import CALL_NODE, make_execute
from agentloop.nodes.parts import LoopParts
from agentloop.nodes.plan import AFTER_PLAN_NODE, make_plan, make_plan_after_model, reviews_after
from agentloop.nodes.prepare import make_prepare
from agentloop.nodes.routes import route_entry, route_execute, route_plan, route_start
from agentloop.nodes.structured import StructuredOutput
from agentloop.nodes.updates import ReleaseSessionsUpdate
from agentloop.observability.redaction import Redactor
from agentloop.options import GovernanceOptions, ModelOptions, PlanningOptions
from agentloop.planning.system_prompt import app_instructions
from agentloop.planning.templates import PromptSet
from agentloop.settings import LoopContext, LoopSettings, PlanMode
from agentloop.state import InputState, LoopState, OutputState, run_id_of

__all__ = ["create_tool_loop"]


def create_tool_loop(
    model: ModelLike,
    tools: Sequence[ToolLike | DictTool | MCPToolset] = (),
    *,
    system_prompt: str | SystemMessage | None = None,
    middleware: Sequence[AgentMiddleware[Any, Any, Any]] = (),
    response_format: Any = None,
    state_schema: type[Any] | None = None,
    context_schema: type[Any] | None = None,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    store: BaseStore | None = None,
    interrupt_before: Sequence[str] | None = None,
    interrupt_after: Sequence[str] | None = None,
    debug: bool = False,
    name: str = "tool_loop",
    cache: BaseCache[Any] | None = None,
    transformers: Sequence[Any] | None = None,
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
            (and tried again later) unless its config says `"required": true`. Dict tools
            as `create_agent` takes them (OpenAI format, `{"type": "function", "function":
            {"name", "description", "parameters"}}`, or a provider's own, such as
            `{"type": "web_search_preview"}`) are, as there, bound to the model and never
            run by the loop: with `plan_mode="native"` the planner is bound to them after
            the loop's tools (a provider runs its own tools; a call to a function-format
            one gets the unknown-tool refusal, as `ToolNode` answers "is not a valid
            tool"). With `"json"` and `"tool"` the planner is bound to no tool the
            provider could run, so they are not offered, and a warning on the
            `agentloop.policy` logger names them.
        system_prompt: The app's instructions (text, or a `SystemMessage` whose content
            blocks are kept, cache markers included), as in `create_agent`: both the planner
            and the answer model see them first, before the loop's own rules.
        middleware: LangChain `AgentMiddleware` (and `@wrap_model_call` /
            `@wrap_tool_call` functions), first outermost: `wrap_model_call` wraps every
            planner, answer and `response_format` call, `wrap_tool_call` every governed
            call inside the ledger's guard; `before_agent` / `after_agent` run as nodes
            around the run, `before_model` / `after_model` around every planner and
            answer call, with `jump_to`; middleware `state_schema` keys join the state
            and middleware `tools` the tools (see `agentloop.middleware.stack`).
        response_format: A typed result beside the text answer, as in `create_agent`: a
            pydantic model, dataclass, TypedDict or JSON schema (native structured output
            where the answer model has it, a tool call otherwise), or a `ToolStrategy` /
            `ProviderStrategy`. The output's `structured_response` holds it; a reply that
            does not validate is asked again once, then `status` is
            `structured_response_failed`.
        state_schema: Keys of the app's own in the state, as in `create_agent`: a TypedDict
            (usually extending `AgentState`; a dataclass's or pydantic model's annotations
            are read alike) whose keys join the loop's state, input and output, with
            their reducers. They come after the middleware's `state_schema` keys (and win
            over them), before the loop's own: `AgentState`'s keys (`messages`,
            `jump_to`, `structured_response`) are the loop's, and any other key the loop
            has with another type is a `ConfigurationError`. `OmitFromInput`,
            `OmitFromOutput` and `PrivateStateAttr` keep a key out of the input or output.
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
        interrupt_before: Nodes to interrupt before (needs a checkpointer): the loop's
            (`"plan"`, `"execute"`, `"answer"`, ...), `"*"`, or `create_agent`'s names:
            `"model"` is the planner node `plan`, `"tools"` is `execute`, so
            `["tools"]` stops before each round's calls run, as `create_agent` stops
            before its tools node (and no call starts early while the plan streams).
            Resume with `invoke(None, config)` or `invoke(Command(resume=...), config)`.
        interrupt_after: Nodes to interrupt after, with the same names: `"model"` is
            `plan` (the round's plan is decided and no call has started), `"tools"` is
            `call_tool` (each batch of the round's calls has run: once a round, unless
            the round runs writes alone or calls that refer to others' results).
        debug: Print each step's updates and the state, as `create_agent`'s `debug`
            (LangGraph's compile option).
        name: The compiled graph's name.
        cache: LangGraph's node cache (a `BaseCache`), given to the compiled graph as
            `create_agent` gives it (`loop.cache`): it keeps the writes of nodes and
            `@task`s that declare a `CachePolicy`; like `create_agent`'s, the loop's own
            nodes declare none. Not the loop's cache of tool results, which is
            `GovernanceOptions(cache=ResultCache(...))`: that one keeps idempotent
            tools' results by their arguments, whatever the graph's cache.
        transformers: LangGraph stream transformer factories for the compiled graph, as
            `create_agent` takes them: the middleware's (`AgentMiddleware.transformers`),
            then these.
        max_rounds: Most executed rounds; the planner is not called once it is reached.
        concurrency: Most tool calls running at once (None: no limit).
        plan_mode: `"json"` (the plan as message text: any chat model), `"tool"` (native
            structured output through tool calling) or `"native"` (the planner is bound
            to the loop's tools and its tool calls are the round's commands; a planner
            without tool calling is a `ConfigurationError`).
        governance: How tools may be called (`GovernanceOptions`: policies,
            timeouts, retries, cache, threads, redaction, ledger).
        planning: How rounds are planned and bounded, and the prompt templates
            (`PlanningOptions`).
        models: How models are called (`ModelOptions`: the answer model, fallbacks,
            retries, limits, prices).

    Returns:
        The compiled graph: input `user_input` / `user_extra_requirement` (or `messages`),
        output `round_state`, `answer`, `action_results`, `tool_logs`, `messages`,
        `status`.

    Raises:
        ConfigurationError: An option, tool, policy or `state_schema` is invalid, an
            interrupt names no node of the loop (the message lists them), or, for a loop built
            without a checkpointer (to be served), `POSTGRES_URI` / `DATABASE_URI` names
            a database its ledger cannot reach.
        MCPTransportError: A `required` MCP server could not be started.
    """
    governance = governance or GovernanceOptions()
    planning = planning or PlanningOptions()
    models = models or ModelOptions()
    threads = governance.tool_threads or ToolThreads()
    instructions = app_instructions(system_prompt)
    provider = ModelProvider(model, models.answer_model, models.fallbacks)
    retry = None if models.retry is None else ModelRetryPolicy.of(models.retry)
    wrappers = LoopMiddleware(
        middleware,
        runner=threads.runner,
        instructions=instructions,
        layers=model_layers(retry, provider.fallbacks, middleware),
    )
    loop_state, input_schema, output_schema = resolve_schemas(
        middleware, LoopState, InputState, OutputState, app_schema=state_schema
    )
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(
        loop_state,
        context_schema=context_schema or LoopContext,
        input_schema=input_schema,
        output_schema=output_schema,
    )
    hooks = LoopHooks.of(middleware, builder.channels, threads.runner)
    stop_before = _interrupt_nodes(interrupt_before, _BEFORE_ALIASES)
    stop_after = _interrupt_nodes(interrupt_after, _AFTER_ALIASES)
    settings = LoopSettings.build(
        planning,
        model_middleware=bool(wrappers.models) or (hooks is not None and hooks.around_model),
        # an after_model hook reviews each plan before it runs (it may drop or block calls)
        reviews_plan=_reviews_plan(stop_before, stop_after)
        or (hooks is not None and hooks.after_any_model),
        max_rounds=max_rounds,
        concurrency=concurrency,
        plan_mode=plan_mode,
        name=name,
    )
    toolsets = [tool for tool in tools if isinstance(tool, MCPToolset)]
    dict_tools = [tool for tool in tools if isinstance(tool, dict)]
    own_tools = [tool for tool in tools if not isinstance(tool, MCPToolset | dict)]
    if dict_tools and plan_mode != "native":
        POLICY_LOGGER.warning(
            "dict tools %s are not offered to the planner: with plan_mode=%r it is bound "
            "to no tool a provider could run (plan_mode='native' binds them, as create_agent "
            "does)",
            ", ".join(dict_tool_name(tool) for tool in dict_tools),
            plan_mode,
        )
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
            bound_only=dict_tools if plan_mode == "native" else (),
        )
        if checkpointer is None and governance.ledger is None and catalog.registry.has_side_effects:
            check_server_database()  # served: the ledger's database must answer now
        results = governance.cache if governance.cache is not None else ResultCache()
        command_keys = _command_keys(builder)
        runner = ToolRunner(
            catalog,
            results,
            invoker=ToolInvoker(threads),
            middleware=wrappers,
            retried_elsewhere=wrappers.retries_tool if wrappers.tool_retries else None,
            state_keys=command_keys,
        )
        parts = LoopParts(
            settings=settings,
            models=provider,
            tools=catalog,
            runner=runner,
            model_retry=retry or ModelRetryPolicy(),
            model_limits=models.limits,
            prices=models.prices,
            ledger=governance.ledger,
            retention=governance.ledger_retention if governance.ledger is None else None,
            redact=redact,
            prompts=PromptSet(planning.prompts),
            system_prompt=instructions,
            middleware=wrappers,
            hooks=hooks,
            structured=StructuredOutput(response_format) if response_format is not None else None,
        )
        for toolset in toolsets:  # its servers' sampling requests, during this loop's calls
            toolset.samplers.add(parts.sampling)
        prepare = make_prepare(parts)
        builder.add_node("prepare", LoopNode("prepare", coroutine=prepare))
        accelerator = Accelerator(parts)  # what the plan node starts ahead, for later nodes
        # with no `before_agent` hook and no interrupt before `prepare`, a run without a
        # checkpointer starts in `plan`
        folds = (hooks is None or not hooks.before_agent) and not _stops_at(stop_before, "prepare")
        builder.add_node("plan", make_plan(parts, accelerator, prepare if folds else None))
        builder.add_node("execute", LoopNode("execute", coroutine=make_execute(parts, accelerator)))
        builder.add_node(CALL_NODE, make_call_tool(parts, accelerator))
        builder.add_node("answer", make_answer(parts, accelerator))
        scoped = [toolset for toolset in toolsets if toolset.has_run_scope]
        after_run = "release_sessions" if scoped else END
        entry, exit_node = _add_agent_hooks(builder, hooks, after_run)
        model_jumps = _jumps(hooks.model_jumps if hooks else (), exit_node)
        if folds:
            builder.add_conditional_edges(
                START, Router("route_entry", route_entry, takes_config=True), ["prepare", "plan"]
            )
        else:
            builder.add_edge(START, entry)
        builder.add_conditional_edges(
            "prepare", Router("route_start", route_start), ["plan", "answer"]
        )
        # the end of a round of `return_direct` calls: drawn only when a tool may end the
        # run, as create_agent draws it
        ends = {"end": exit_node} if _returns_directly(own_tools, wrappers) else {}
        if hooks is not None and reviews_after(parts):  # the reply is checkpointed first
            builder.add_node(AFTER_PLAN_NODE, make_plan_after_model(parts))
            builder.add_conditional_edges(
                "plan",
                Router("route_plan", _jumping(_route_reply, model_jumps)),
                _paths([AFTER_PLAN_NODE, "execute", "answer", CALL_NODE], model_jumps, ends),
            )
            source, source_jumps = AFTER_PLAN_NODE, _jumps(hooks.after_model_jumps, exit_node)
            builder.add_conditional_edges(
                source,
                Router("route_plan", _jumping(route_plan, source_jumps)),
                _destinations(["execute", "answer"], source_jumps),
            )
        else:
            builder.add_conditional_edges(
                "plan",
                Router("route_plan", _jumping(route_plan, model_jumps)),
                # without a checkpointer `plan` prepares its round and sends the first
                # batch (or ends a round none of whose calls runs); with one, `execute`
                _paths(["execute", "answer", CALL_NODE, "plan"], model_jumps, ends),
            )
        builder.add_conditional_edges(
            "execute", Router("route_execute", route_execute), [CALL_NODE, "plan"]
        )
        builder.add_edge(CALL_NODE, "plan")  # the plan node ends the round
        if hooks is not None and reviews_after(parts):  # the answer is checkpointed first
            builder.add_node(AFTER_ANSWER_NODE, make_answer_after_model(parts))
            answer_jumps = _jumps(hooks.before_model_jumps, exit_node)
            answer_jumps = {jump: to for jump, to in answer_jumps.items() if to != exit_node}

            def route_answer(state: Any) -> str:
                return AFTER_ANSWER_NODE if waiting_reply(state) == "answer" else exit_node

            builder.add_conditional_edges(
                "answer",
                Router("route_answer", _jumping(route_answer, answer_jumps)),
                _destinations([AFTER_ANSWER_NODE, exit_node], answer_jumps),
            )
            after_jumps = _jumps(hooks.after_model_jumps, exit_node)
            _add_hook_edge(builder, AFTER_ANSWER_NODE, exit_node, after_jumps)
        else:
            _add_hook_edge(builder, "answer", exit_node, model_jumps)
        if scoped:
            builder.add_node("release_sessions", LoopNode("release_sessions", _releaser(scoped)))
            builder.add_edge("release_sessions", END)
        _check_interrupts(builder, stop_before, stop_after)
        streamed = [t for m in middleware for t in getattr(m, "transformers", ())]
        streamed += [t for t in transformers or () if all(t is not s for s in streamed)]
        return builder.compile(
            checkpointer=checkpointer,
            cache=cache,
            store=store,
            interrupt_before=stop_before,
            interrupt_after=stop_after,
            debug=debug,
            name=name,
            **({"transformers": streamed} if streamed else {}),
        )
    except BaseException:
        for toolset in idle:  # the build started it: leave it as it was given
            toolset.stop_started()
        raise


def _route_reply(state: Any) -> str | list[Send]:
    """After `plan`: its reply's `after_model` hooks, or `route_plan` when it left none."""
    return AFTER_PLAN_NODE if waiting_reply(state) == "plan" else route_plan(state)


Route = Callable[[Any], "str | list[Send]"]
"""A router: the next node's name, or the tasks it sends."""

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


def _paths(
    defaults: Sequence[str], jumps: Mapping[str, str], ends: Mapping[str, str]
) -> dict[Hashable, str]:
    """A router's path map: its next nodes by name, and what its `"end"` leads to."""
    paths: dict[Hashable, str] = {node: node for node in _destinations(defaults, jumps)}
    paths.update(ends)
    return paths


def _jumping(route: Route, jumps: Mapping[str, str]) -> Route:
    """`route`, unless the node just run jumped (`jump_to`) to where a hook declared."""
    if not jumps:
        return route

    def routed(state: Any) -> str | list[Send]:
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
        for position, ((item, name), default) in enumerate(zip(chain, following, strict=False)):
            first = hook == "before_agent" and position == 0
            hook_node = agent_hook_node(item, hook, hooks, first=first)  # type: ignore[arg-type]
            builder.add_node(name, LoopNode(name, coroutine=hook_node))
            declared = can_jump_to(item, hook)
            if hook == "before_agent":
                jumps = {"end": exit_node} if "end" in declared else {}
            else:
                jumps = _jumps(declared, after_run)
            _add_hook_edge(builder, name, default, jumps)
    return (before[0][1] if before else "prepare"), exit_node


def _command_keys(builder: StateGraph[Any, Any, Any, Any]) -> frozenset[str]:
    """The state keys a tool's `Command(update=...)` may write.

    `messages`, and the keys of the app's `state_schema` and of its middleware; the
    loop's own keys (`answer`, `round_state`, ...) are the loop's to write.
    """
    own = frozenset(LoopState.__annotations__) - {"messages"}
    return frozenset(builder.channels) - own


def _returns_directly(tools: Sequence[Any], wrappers: LoopMiddleware) -> bool:
    """Whether a tool of the loop is `return_direct` (a round of its calls ends the run)."""
    return any(getattr(tool, "return_direct", False) for tool in [*tools, *wrappers.tools])


_BEFORE_ALIASES = {"model": "plan", "tools": "execute"}
"""`create_agent`'s node names in `interrupt_before`, and the loop's node they stop before."""

_AFTER_ALIASES = {"model": "plan", "tools": CALL_NODE}
"""`create_agent`'s node names in `interrupt_after`: after `call_tool` the calls have run."""


def _interrupt_nodes(
    names: Sequence[str] | None, aliases: Mapping[str, str]
) -> All | list[str] | None:
    """The loop's nodes an `interrupt_before` / `interrupt_after` names (`"*"`: all)."""
    if names is None:
        return None
    if isinstance(names, str):
        names = [names]
    if "*" in names:
        return "*"
    nodes: list[str] = []
    for name in names:
        node = aliases.get(name, name)
        if node not in nodes:
            nodes.append(node)
    return nodes or None


def _check_interrupts(
    builder: StateGraph[Any, Any, Any, Any],
    before: All | list[str] | None,
    after: All | list[str] | None,
) -> None:
    """Fail when an interrupt names no node of the loop, listing the names it takes.

    Raises:
        ConfigurationError: An unknown node name.
    """
    for option, nodes, aliases in (
        ("interrupt_before", before, _BEFORE_ALIASES),
        ("interrupt_after", after, _AFTER_ALIASES),
    ):
        if nodes is None or nodes == "*":
            continue
        unknown = [node for node in nodes if node not in builder.nodes]
        if not unknown:
            continue
        named = ", ".join(f"{alias!r} ({node})" for alias, node in aliases.items())
        msg = (
            f"{option} names no node of the loop: {', '.join(map(repr, unknown))}. "
            f"Valid names: {', '.join(map(repr, builder.nodes))}, '*', and create_agent's "
            f"{named}"
        )
        raise ConfigurationError(msg)


def _stops_at(nodes: All | list[str] | None, node: str) -> bool:
    """Whether an interrupt list given to `create_tool_loop` names `node` (or is `"*"`)."""
    return nodes == "*" or node in (nodes or ())


def _reviews_plan(before: All | list[str] | None, after: All | list[str] | None) -> bool:
    """Whether the loop stops between a plan and its calls, so a person sees it first.

    Then no call starts while the plan streams.
    """
    return _stops_at(before, "execute") or _stops_at(after, "plan")


def _default_redactor(toolsets: Sequence[MCPToolset]) -> Redactor:
    return Redactor(frozenset().union(*(toolset.secrets for toolset in toolsets)))


def _releaser(toolsets: Sequence[MCPToolset]) -> Any:
    def release_sessions(state: LoopState, runtime: Any) -> ReleaseSessionsUpdate:
        """Close the run's own MCP sessions (`"scope": "run"`) once no tool will run anymore."""
        for toolset in toolsets:
            toolset.release(run_id_of(state))
        return {}

    return release_sessions
