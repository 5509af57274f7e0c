"""LangChain `AgentMiddleware` in a tool loop: model calls and tool calls, wrapped.

`create_tool_loop(middleware=[...])` takes LangChain 1.x middleware objects and the
`@wrap_model_call` / `@wrap_tool_call` decorator forms, with `create_agent`'s ordering
(the first in the list is the outermost):

- `wrap_model_call` / `awrap_model_call` wrap every planner call, every answer call and
  every `response_format` call. The `ModelRequest` carries the model, the system message
  (the app's `system_prompt`, or None, as under `create_agent`: the loop's planner and
  answer rules are added to what the handler sends, so a middleware that sets the system
  prompt, `@dynamic_prompt` included, replaces the app's part only), the messages (the
  run's transcript, as `create_agent`'s: the user's messages, each round's `AIMessage`
  with `tool_calls`, their `ToolMessage`s; for the `response_format` call, its own
  request), the tools (the planner's: the loop's tools, in every `plan_mode`; the
  answer's: none), the loop's state with `agentloop_model_call` set to `"plan"`,
  `"answer"` or `"structured_response"`, and the node's `Runtime`. Every model call
  goes through one stack of `wrap_model_call` layers, composed once at build time
  (`LoopMiddleware.stack`), outermost first:

      app middleware (list order) -> loop's retry -> loop's fallback -> model

  The loop's retry (`ModelOptions(retry=...)`, `agentloop.models.calls.ModelRetryLayer`)
  is not added when the list has a `ModelRetryMiddleware` or a `ModelFallbackMiddleware`
  and `retry` is not set, so a failed call is retried once, by the app's middleware, as
  under `create_agent`; the loop's fallback (`ModelOptions(fallbacks=...)`, LangChain's
  own `ModelFallbackMiddleware`) makes a failed call with each fallback model in turn.
  At the centre, one call of the request's model with its system message and messages and its
  `model_settings` bound to the model (provider options such as prompt-cache markers);
  it raises the model's own exception when it failed. A reply cut by its length or
  repeating itself is asked again at the centre (it is no failed call). A middleware
  that adds a provider's tools or marks tools `defer_loading`
  (`ProviderToolSearchMiddleware`) has them bound to a native planner; it is left out of
  the answer's and the typed result's stack (`LoopMiddleware.toolless_stack`: they are
  offered no tools, and it would refuse a request without its tools). A
  middleware that narrows the planner's `tools` (`LLMToolSelectorMiddleware`) offers
  the planner only those: bound in `plan_mode="native"`, listed in the prompt's tool
  list otherwise; a plan that names no offered tool is asked again with the normal
  unknown-tool feedback. A changed `tool_choice` is not applied. A reply the middleware
  makes itself (without the handler) is read like one from the model; a `Command` it
  returns fails the call (the loop's state is its own). The handler renders the
  planner's and the answer's prompts from the run's records with what the middleware
  changed in the transcript (`agentloop.middleware.transcript.edited_round_state`): a
  `ToolMessage`'s new content stands for the call's result, a call's new arguments for
  its arguments, so a result `ContextEditingMiddleware` cleared shows as its
  placeholder; messages added after the transcript follow the prompt. Without such
  changes the prompt is sent as built.
- `wrap_tool_call` / `awrap_tool_call` wrap every governed call, after its arguments are
  validated and inside the side-effect ledger's guard (so a call the ledger has settled
  never reaches them, and whatever they do counts as the call's one outcome), outside
  the loop's own layers (its result cache, rate limiter, timeout and retries): app
  middleware (first outermost) -> cache -> rate limit -> timeout and retries -> tool.
  Under `invoke`, when every one has the sync `wrap_tool_call`, they run in the call's
  thread and a sync tool's call needs no event loop; otherwise the call runs on the
  compiled loop's one event loop. The `ToolCallRequest` has the call as a `ToolCall`,
  the tool, the loop's state and a `ToolRuntime`. The handler returns the result as a
  `ToolMessage`, or raises when the call failed (after the loop's own retries): the
  tool's own exception, as a tool's error propagates in `create_agent`, or
  `ToolCallFailed` for a failure of the loop's making (a timeout, a refusal); so
  `ToolRetryMiddleware(retry_on=...)` and `ToolErrorMiddleware` see what they see there,
  and one that reaches the loop becomes the call's record. A `ToolRetryMiddleware`
  replaces the loop's own retry (`ToolPolicy.retry`) for the tools it retries, so
  retries never stack, and the record's `attempts` counts every execution the handler
  made. A `ToolMessage` returned without calling the handler becomes the call's record
  (failed, as `refused`, when its status is `"error"`). A result the loop's cache gave
  has `response_metadata["from_cache"]` set (`agentloop.observability.audit.AuditLog` reads it).
- `before_agent` / `abefore_agent` run once per invocation, in list order, as nodes
  `"<name>.before_agent"` between `START` and `prepare`; `after_agent` / `aafter_agent`
  once at its end, in reverse list order, as nodes `"<name>.after_agent"` after `answer`
  (before a run's MCP sessions are released and `END`). A loop without them keeps its
  graph.
- `before_model` / `abefore_model` run before every planner call (re-asks included) and
  every answer model call, in list order; `after_model` / `aafter_model` after each, in
  reverse list order (`agentloop.middleware.hooks.HookRun`), inside the `plan` and `answer` nodes
  (`after_model` for the planner's last reply and for the answer in nodes of their own,
  `plan.after_model` and `answer.after_model`, once the reply is checkpointed).
  They see the node's state as earlier hooks left it (`after_model` after the answer
  also sees the answer's `AIMessage`), and what they return joins the node's update:
  `messages` through `add_messages`, every key through its reducer. The prompt of the
  call is built from the state as the hooks left it (a `SummarizationMiddleware`
  summary replaces the old turns it summarised; when a hook rewrites the request's
  `HumanMessage`, as `PIIMiddleware` redacts it, `user_input` follows, so every prompt
  quotes the rewritten request as `create_agent`'s model sees it); `wrap_model_call`
  sees the hooks' state in `ModelRequest.state`. No hook runs when no model is asked (an answer
  taken from the planner's reply, a planner that failed before any tool ran), nor for
  the `response_format` call, which `create_agent` makes inside its one model call.
  A speculative answer is off when they exist (it would start before `before_model`).
- `jump_to` (honoured when the hook declares it in `can_jump_to`, as in `create_agent`;
  the first hook that jumps stops the hooks after it):
  - `"end"`: the run ends, no model is asked again: from a planner call's hooks or the
    answer's `before_model` (then the model is not called), the route goes to the
    `after_agent` nodes (or `END`), `status` is `"ended"`, `answer` the text of the last
    `AIMessage` the hooks added (or empty) and `status_reason` names the hook. From the
    answer's `after_model` it is the normal route. From `before_agent`: the same, without
    `prepare` (the run does nothing); from `after_agent`: the remaining `after_agent`
    hooks are skipped.
  - `"model"`: plan again (the `plan` node: a new planner call with its hooks). From a
    planner call's `before_model` the call is not made; from its `after_model` the plan
    is recorded in `decision` but not executed; after the answer, the loop plans again
    (within `max_rounds` and the planner-call limit).
  - `"tools"`: run the state's `decision` (`execute`) when it has commands, or answer
    when it has none, without another planner call: a hook may write the plan itself
    (`{"decision": ..., "jump_to": "tools"}`). After a planner call that said `execute`
    it is the normal route.
  - From `before_agent`, `"model"` and `"tools"` are the normal route: `prepare` runs
    first (a run is prepared before it plans or executes).
- Middleware `state_schema` keys join the loop's state (the loop's own keys win a
  conflict; `OmitFromInput` / `OmitFromOutput` / `PrivateStateAttr` hide them from the
  input or output), so a middleware's own keys persist across nodes and runs.
- Middleware `tools` join the loop's tools.

A hook that calls `interrupt()` pauses its node as any LangGraph node pauses; on resume
the node runs again from its start, so inside `plan` or `answer` the hooks before it and
the node's model call run again (`create_agent` resumes its hook node alone).

A middleware with only the sync hook also runs under `ainvoke` (in a worker thread), and
one with only the async hook under `invoke`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from functools import partial
from typing import Any, Literal, TypeVar

from langchain.agents.middleware import (
    AgentMiddleware,
    ModelRequest,
    ModelResponse,
    ProviderToolSearchMiddleware,
    ToolErrorMiddleware,
    ToolRetryMiddleware,
)
from langchain.agents.middleware.types import ExtendedModelResponse
from langchain_core.exceptions import ModelRefusalError
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import Runtime
from langgraph.types import Command

from agentloop.base.sync import LoopRunner, has_running_loop, run_blocking
from agentloop.errors import (
    ConfigurationError,
    ModelBehaviorError,
    ToolCallError,
    model_error_message,
)
from agentloop.governance.injected import command_outcome, tool_runtime
from agentloop.governance.layers import Proceed, ToolInvocation
from agentloop.governance.outcome import ToolOutcome
from agentloop.models.calls import AsyncHandler, Handler

__all__ = ["MODEL_CALL_KEY", "Compose", "LoopMiddleware", "ModelCall", "ToolCallFailed"]

T = TypeVar("T")
H = TypeVar("H", bound=Callable[..., Any])
ModelCall = Literal["plan", "answer", "structured_response"]
MODEL_CALL_KEY = "agentloop_model_call"
"""The key of the `ModelRequest.state` that says which call it is: `"plan"`, `"answer"`, or
`"structured_response"` (the `response_format` call that follows the answer)."""


Compose = Callable[[SystemMessage | None, list[BaseMessage], list[Any]], list[BaseMessage]]
"""What a model call sends for its request's system message, messages and tools."""


def _overrides(middleware: AgentMiddleware[Any, Any, Any], hook: str) -> bool:
    return getattr(type(middleware), hook, None) is not getattr(AgentMiddleware, hook, None)


def _normalized(result: Any) -> ModelResponse[Any]:
    if isinstance(result, AIMessage):
        return ModelResponse(result=[result])
    if isinstance(result, ExtendedModelResponse):
        if result.command is not None:
            msg = "wrap_model_call returned a Command; a tool loop does not apply Command updates"
            raise TypeError(msg)
        return result.model_response
    if isinstance(result, ModelResponse):
        return result
    msg = f"wrap_model_call returned {type(result).__name__}, not a ModelResponse or AIMessage"
    raise TypeError(msg)


_UNREAD_REPLY = AIMessage("")
"""What a model call's layers get for its reply when none of them reads it (the loop's own
retry and fallback): the reply itself is not made into a message."""


def _failed(error: Exception) -> Exception:
    """What a failed wrapped model call raises: the loop's error, or an interrupt as it is."""
    if isinstance(error, ModelBehaviorError | GraphBubbleUp):
        return error
    return ModelBehaviorError(model_error_message(error))


def _reply(response: ModelResponse[Any]) -> AIMessage:
    for message in reversed(response.result):
        if isinstance(message, AIMessage):
            return message
    msg = "wrap_model_call returned no AIMessage"
    raise TypeError(msg)


class LoopMiddleware:
    """The app's middleware, checked once and split by what it wraps.

    Args:
        middleware: `AgentMiddleware` objects (decorated functions are such objects).
        runner: The event loop on which, under `invoke`, a middleware with only the
            async hook runs (the compiled loop's; default: one of its own).
        instructions: The app's `system_prompt`: the system message a `ModelRequest`
            carries (the loop's rules are added to what the handler sends).
        layers: The loop's own model layers (`agentloop.models.calls.model_layers`: its
            retry, its fallback), inside the app's model middleware.

    Raises:
        ConfigurationError: Not middleware.
    """

    def __init__(
        self,
        middleware: Sequence[AgentMiddleware[Any, Any, Any]],
        *,
        runner: LoopRunner | None = None,
        instructions: SystemMessage | None = None,
        layers: Sequence[AgentMiddleware[Any, Any, Any]] = (),
    ) -> None:
        self.runner = runner or LoopRunner()
        self.instructions = instructions
        for item in middleware:
            if not isinstance(item, AgentMiddleware):
                msg = f"middleware must be AgentMiddleware objects, got {type(item).__name__}"
                raise ConfigurationError(msg)
        self.middleware = list(middleware)
        self.models = [m for m in middleware if self._wraps(m, "wrap_model_call")]
        """The app's `wrap_model_call` middleware."""
        self.stack = [*self.models, *layers]
        """Every model call's layers, outermost first: the app's, then the loop's."""
        self.toolless_stack = [
            m for m in self.stack if not isinstance(m, ProviderToolSearchMiddleware)
        ]
        """The layers of a call offered no tools (the answer's, the typed result's): a
        `ProviderToolSearchMiddleware` has no tool to defer there, and would refuse the
        call (its `searchable_tools` not bound), so it is left out, once, here."""
        self.tool_calls = [m for m in middleware if self._wraps(m, "wrap_tool_call")]
        self.tool_retries = [
            m for m in middleware if isinstance(m, ToolRetryMiddleware | ToolErrorMiddleware)
        ]
        """The app's middleware that deals with a failed tool call: it retries it
        (`ToolRetryMiddleware`) or turns it into an answer (`ToolErrorMiddleware`)."""
        self.tools: list[BaseTool] = [
            tool for m in middleware for tool in getattr(m, "tools", None) or ()
        ]

    @staticmethod
    def _wraps(middleware: AgentMiddleware[Any, Any, Any], hook: str) -> bool:
        return _overrides(middleware, hook) or _overrides(middleware, f"a{hook}")

    # -- model calls ---------------------------------------------------------------------

    async def call_model(
        self,
        which: ModelCall,
        model: BaseChatModel,
        messages: Sequence[BaseMessage],
        compose: Compose,
        call: Callable[[BaseChatModel, list[BaseMessage], dict[str, Any], list[Any]], Awaitable[T]],
        reply_of: Callable[[T], AIMessage],
        result_of: Callable[[AIMessage, BaseChatModel], T],
        *,
        state: Mapping[str, Any],
        runtime: Runtime[Any],
        tools: Sequence[Any] = (),
    ) -> T:
        """Make a model call through every layer's `wrap_model_call` (or `awrap_model_call`).

        Args:
            which: The planner's call, the answer's, or the typed result's.
            model: The model (the loop's fallback layer may change it).
            messages: The transcript the request carries (`transcript_view`).
            compose: What is sent for the request's system message, messages and tools
                as the middleware passed them on: the system message with the loop's
                rules, then the messages (for a JSON planner, as text).
            call: The loop's call (one call, not retried) of a model with messages,
                the request's `model_settings` (bound to the model: provider options such
                as prompt-cache markers) and the request's `tools` (the planner is offered
                only those).
            reply_of: The reply a result carries.
            result_of: A result made of a reply the middleware wrote itself.
            state: The loop's state.
            runtime: The node's runtime.
            tools: The tools the request offers (the loop's tools, for the planner; none
                for the other calls, whose stack is `toolless_stack`).
        """
        produced: dict[int, T] = {}
        reads_reply = bool(self.models)  # the loop's own layers never read the reply

        async def innermost(request: ModelRequest[Any]) -> ModelResponse[Any]:
            offered = list(request.tools)
            sent = compose(request.system_message, list(request.messages), offered)
            result = await call(request.model, sent, dict(request.model_settings), offered)
            reply = reply_of(result) if reads_reply else _UNREAD_REPLY
            produced[id(reply)] = result
            return ModelResponse(result=[reply])

        request = ModelRequest(
            model=model,
            messages=list(messages),  # type: ignore[arg-type]
            system_message=self.instructions,
            tools=list(tools),
            state={**state, MODEL_CALL_KEY: which},  # type: ignore[arg-type]
            runtime=runtime,
        )
        stack = self.stack if which == "plan" else self.toolless_stack
        try:
            reply = _reply(await self._wrapped(request, innermost, stack))
        except ModelRefusalError:
            raise  # the app asked for a refusal to end the run, as create_agent raises it
        except Exception as error:
            raise _failed(error) from error
        return produced[id(reply)] if id(reply) in produced else result_of(reply, model)

    async def _wrapped(
        self,
        request: ModelRequest[Any],
        innermost: Callable[[ModelRequest[Any]], Coroutine[Any, Any, ModelResponse[Any]]],
        stack: Sequence[AgentMiddleware[Any, Any, Any]],
    ) -> ModelResponse[Any]:
        """The request through every layer of `stack`, `innermost` at the centre.

        `invoke` calls each one's `wrap_model_call`, `ainvoke` its `awrap_model_call`
        (bridged when it has only the other one).
        """
        if has_running_loop():
            acentre: AsyncHandler = innermost
            return await self._chain(stack, acentre, self._amodel_layer)(request)
        # at the centre: the innermost coroutine, run with blocking calls
        centre: Handler = lambda inner: run_blocking(innermost(inner))  # noqa: E731
        return self._chain(stack, centre, self._model_layer)(request)

    @staticmethod
    def _chain(
        wrapping: Sequence[AgentMiddleware[Any, Any, Any]],
        centre: H,
        layer: Callable[[AgentMiddleware[Any, Any, Any], H], H],
    ) -> H:
        """`centre` wrapped in each middleware's layer, the first one outermost."""
        handler = centre
        for middleware in reversed(wrapping):
            handler = layer(middleware, handler)
        return handler

    def _model_layer(self, middleware: AgentMiddleware[Any, Any, Any], inner: Handler) -> Handler:
        if _overrides(middleware, "wrap_model_call"):
            return lambda request: _normalized(middleware.wrap_model_call(request, inner))

        async def ainner(request: ModelRequest[Any]) -> ModelResponse[Any]:
            return await asyncio.to_thread(inner, request)

        def bridged(request: ModelRequest[Any]) -> ModelResponse[Any]:
            return _normalized(self.runner.run(middleware.awrap_model_call(request, ainner)))

        return bridged

    @staticmethod
    def _amodel_layer(
        middleware: AgentMiddleware[Any, Any, Any], inner: AsyncHandler
    ) -> AsyncHandler:
        if _overrides(middleware, "awrap_model_call"):

            async def wrapped(request: ModelRequest[Any]) -> ModelResponse[Any]:
                return _normalized(await middleware.awrap_model_call(request, inner))

            return wrapped

        async def bridged(request: ModelRequest[Any]) -> ModelResponse[Any]:
            loop = asyncio.get_running_loop()

            def sync_inner(inner_request: ModelRequest[Any]) -> ModelResponse[Any]:
                return _on_loop(loop, inner(inner_request))

            result = await asyncio.to_thread(middleware.wrap_model_call, request, sync_inner)
            return _normalized(result)

        return bridged

    # -- tool calls ----------------------------------------------------------------------

    def retries_tool(self, name: str) -> bool:
        """Whether the app's middleware deals with a failed call of a tool itself.

        A `ToolRetryMiddleware` that retries it, or a `ToolErrorMiddleware` that handles
        its errors: the loop's own retry of such a tool is then off (`ToolRunner`), so a
        failing call runs as often as under `create_agent`.
        """
        # each middleware's own filter (its `tools=`), read where it keeps it
        return any(
            m._should_retry_tool(name)
            if isinstance(m, ToolRetryMiddleware)
            else m._should_handle_tool(name)
            for m in self.tool_retries
        )

    @property
    def sync_tool_calls(self) -> bool:
        """Whether every `wrap_tool_call` middleware has the sync hook.

        Under `invoke`, their stack then runs in the call's thread with no event loop
        (`call_tool`); otherwise the call runs on the compiled loop's event loop.
        """
        return all(_overrides(m, "wrap_tool_call") for m in self.tool_calls)

    def call_tool(
        self,
        call: ToolInvocation,
        config: RunnableConfig | None,
        proceed: Callable[[ToolInvocation], ToolOutcome],
        *,
        tools: list[BaseTool],
        state_keys: frozenset[str] = frozenset({"messages"}),
    ) -> ToolOutcome:
        """Run a call through every `wrap_tool_call`, in this thread, ending in `proceed`.

        `proceed` is the loop's own layers and the tool; `tools` (the loop's) are for the
        `ToolRuntime`; `state_keys` are those a `Command(update=...)` may write
        (`agentloop.governance.injected.command_outcome`).
        """
        wrapped = _WrappedCall(call, config, tools, state_keys)
        handler: Callable[[ToolCallRequest], Any] = lambda inner: wrapped.message(  # noqa: E731
            proceed(wrapped.inner_call(inner))
        )
        for middleware in reversed(self.tool_calls):
            handler = partial(middleware.wrap_tool_call, handler=handler)
        try:
            result = handler(wrapped.request)
        except Exception as error:
            return wrapped.failed(error)
        return wrapped.settled(result)

    async def acall_tool(
        self,
        call: ToolInvocation,
        config: RunnableConfig | None,
        proceed: Proceed,
        *,
        tools: list[BaseTool],
        state_keys: frozenset[str] = frozenset({"messages"}),
    ) -> ToolOutcome:
        """Run a call through every `awrap_tool_call` (bridged when only sync), as `call_tool`."""
        wrapped = _WrappedCall(call, config, tools, state_keys)

        async def innermost(inner: ToolCallRequest) -> ToolMessage | Command[Any]:
            return wrapped.message(await proceed(wrapped.inner_call(inner)))

        handler: Callable[[ToolCallRequest], Awaitable[Any]] = innermost
        for middleware in reversed(self.tool_calls):
            handler = _tool_layer(middleware, handler)
        try:
            result = await handler(wrapped.request)
        except Exception as error:
            return wrapped.failed(error)
        return wrapped.settled(result)


class _WrappedCall:
    """One call on its way through the app's `wrap_tool_call` middleware."""

    def __init__(
        self,
        call: ToolInvocation,
        config: RunnableConfig | None,
        tools: list[BaseTool],
        state_keys: frozenset[str],
    ) -> None:
        runtime = tool_runtime(config, tool_call_id=call.transcript_id, tools=tools)
        tool_call = {"name": call.tool_name, "args": call.arguments, "id": call.transcript_id}
        self.request = ToolCallRequest(
            tool_call=tool_call,  # type: ignore[arg-type]
            tool=call.tool,
            state=runtime.state,
            runtime=runtime,
        )
        self.call = call
        self.state_keys = state_keys
        self.outcomes: dict[int, ToolOutcome] = {}
        self.failures: dict[int, ToolOutcome] = {}
        self.attempts: list[int] = []

    def inner_call(self, request: ToolCallRequest) -> ToolInvocation:
        """The call as a middleware passed it on to the handler."""
        return self.call.override(arguments=dict(request.tool_call["args"]))

    def message(self, outcome: ToolOutcome) -> ToolMessage | Command[Any]:
        """What the handler returns for an outcome, or raises when the call failed."""
        self.attempts.append(outcome.attempts)
        if not outcome.success:
            error = outcome.exception
            if isinstance(error, Exception):  # the tool's own, as create_agent's
                self.failures[id(error)] = outcome
                raise error
            raise ToolCallFailed(outcome)
        message: ToolMessage | Command[Any] = _as_message(outcome, self.call)
        if outcome.state_update:  # the tool's Command, as the handler returns it
            earlier = outcome.state_update.get("messages") or []
            update = {**outcome.state_update, "messages": [*earlier, message]}
            message = Command(update=update)
        self.outcomes[id(message)] = outcome
        return message

    def failed(self, error: Exception) -> ToolOutcome:
        """The outcome of a call whose middleware raised (re-raised when not a call's)."""
        if isinstance(error, ToolCallFailed):
            return self._counted(error.outcome)
        if id(error) not in self.failures:
            raise error
        return self._counted(self.failures[id(error)])

    def settled(self, result: Any) -> ToolOutcome:
        """The outcome of what the middleware returned."""
        outcome = self.outcomes.get(id(result))
        if outcome is None:
            outcome = _outcome_of(result, self.call, self.state_keys, ran=bool(self.attempts))
        return self._counted(outcome)

    def _counted(self, outcome: ToolOutcome) -> ToolOutcome:
        # every execution counts, however many times a middleware called the handler
        return outcome.with_changes(attempts=sum(self.attempts)) if self.attempts else outcome


class ToolCallFailed(ToolCallError):
    """What the handler of a `wrap_tool_call` raises when the call failed.

    As in `create_agent`, where a tool's error propagates through the middleware, so
    `ToolRetryMiddleware` retries it; one that reaches the loop becomes the call's record.
    """

    def __init__(self, outcome: ToolOutcome) -> None:
        super().__init__(outcome.error_type or "internal_error", outcome.error)
        self.outcome = outcome


def _tool_layer(
    middleware: AgentMiddleware[Any, Any, Any],
    inner: Callable[[ToolCallRequest], Awaitable[Any]],
) -> Callable[[ToolCallRequest], Awaitable[Any]]:
    if _overrides(middleware, "awrap_tool_call"):
        return lambda request: middleware.awrap_tool_call(request, inner)

    async def bridged(request: ToolCallRequest) -> Any:
        loop = asyncio.get_running_loop()

        def sync_inner(inner_request: ToolCallRequest) -> Any:
            return _on_loop(loop, inner(inner_request))

        return await asyncio.to_thread(middleware.wrap_tool_call, request, sync_inner)

    return bridged


def _on_loop(loop: asyncio.AbstractEventLoop, awaitable: Awaitable[T]) -> T:
    """Wait, from a worker thread, for an awaitable run on the event loop."""

    async def run() -> T:
        return await awaitable

    return asyncio.run_coroutine_threadsafe(run(), loop).result()


def _as_message(outcome: ToolOutcome, call: ToolInvocation) -> ToolMessage:
    """The `ToolMessage` a middleware sees for a call's result.

    A result the loop's cache gave has `response_metadata["from_cache"]` set.
    """
    content = outcome.value if isinstance(outcome.value, str | list) else str(outcome.value)
    message = ToolMessage(content, tool_call_id=call.transcript_id, name=call.tool_name)
    if outcome.from_cache:
        message.response_metadata["from_cache"] = True
    return message


def _outcome_of(
    result: Any, call: ToolInvocation, state_keys: frozenset[str], *, ran: bool
) -> ToolOutcome:
    """The outcome of a call a middleware answered itself.

    An error `ToolMessage` is a refusal (`refused`) when the tool never ran.
    """
    if isinstance(result, ToolMessage):
        if result.status == "error":
            message = str(result.content)
            if ran:
                return ToolOutcome.failure("internal_error", message, attempts=0)
            return ToolOutcome.refused("refused", call.tool_name, message)
        return ToolOutcome(value=result.content, attempts=0)
    if isinstance(result, Command):  # applied as a tool's own Command is
        outcome = ToolOutcome(value=result, attempts=0)
        return command_outcome(outcome, call.tool_name, call.transcript_id, state_keys)
    msg = f"wrap_tool_call returned {type(result).__name__}, not a ToolMessage"
    return ToolOutcome.failure("internal_error", msg, attempts=0)
