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
  returns fails the call (the loop's state is its own). The handler builds what it
  sends from the request's messages as the middleware left them (`Compose`): the
  transcript is the models' only view, so a `ToolMessage` a middleware rewrote (as
  `ContextEditingMiddleware` clears one) reaches the model rewritten.
- `wrap_tool_call` / `awrap_tool_call` wrap every governed call: see
  `agentloop.governance.app_layers`.
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
  call is built from the `messages` the hooks left (a `SummarizationMiddleware`
  summary replaces the old turns it summarised; a request `PIIMiddleware` redacted
  reaches the model redacted, as under `create_agent`); `wrap_model_call` sees the
  hooks' state in `ModelRequest.state`. No hook runs when no model is asked (an answer
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
from typing import Any, Literal, TypeVar

from langchain.agents.middleware import (
    AgentMiddleware,
    ModelRequest,
    ModelResponse,
    ProviderToolSearchMiddleware,
)
from langchain.agents.middleware.types import ExtendedModelResponse
from langchain_core.exceptions import ModelRefusalError
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.tools import BaseTool
from langgraph.errors import GraphBubbleUp
from langgraph.runtime import Runtime

from agentloop.base.sync import LoopRunner, has_running_loop, run_blocking
from agentloop.errors import (
    ConfigurationError,
    ModelBehaviorError,
    model_error_message,
)
from agentloop.governance.app_layers import AppToolLayers, on_loop, overrides, wraps
from agentloop.models.calls import AsyncHandler, Handler

__all__ = ["MODEL_CALL_KEY", "Compose", "LoopMiddleware", "ModelCall"]

T = TypeVar("T")
H = TypeVar("H", bound=Callable[..., Any])
ModelCall = Literal["plan", "answer", "structured_response"]
MODEL_CALL_KEY = "agentloop_model_call"
"""The key of the `ModelRequest.state` that says which call it is: `"plan"`, `"answer"`, or
`"structured_response"` (the `response_format` call that follows the answer)."""


Compose = Callable[[SystemMessage | None, list[BaseMessage], list[Any]], list[BaseMessage]]
"""What a model call sends for its request's system message, messages and tools."""


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


class LoopMiddleware(AppToolLayers):
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
        super().__init__(middleware)
        self.middleware = list(middleware)
        self.models = [m for m in middleware if wraps(m, "wrap_model_call")]
        """The app's `wrap_model_call` middleware."""
        self.stack = [*self.models, *layers]
        """Every model call's layers, outermost first: the app's, then the loop's."""
        self.toolless_stack = [
            m for m in self.stack if not isinstance(m, ProviderToolSearchMiddleware)
        ]
        """The layers of a call offered no tools (the answer's, the typed result's): a
        `ProviderToolSearchMiddleware` has no tool to defer there, and would refuse the
        call (its `searchable_tools` not bound), so it is left out, once, here."""
        self.tools: list[BaseTool] = [
            tool for m in middleware for tool in getattr(m, "tools", None) or ()
        ]

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
        if overrides(middleware, "wrap_model_call"):
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
        if overrides(middleware, "awrap_model_call"):

            async def wrapped(request: ModelRequest[Any]) -> ModelResponse[Any]:
                return _normalized(await middleware.awrap_model_call(request, inner))

            return wrapped

        async def bridged(request: ModelRequest[Any]) -> ModelResponse[Any]:
            loop = asyncio.get_running_loop()

            def sync_inner(inner_request: ModelRequest[Any]) -> ModelResponse[Any]:
                return on_loop(loop, inner(inner_request))

            result = await asyncio.to_thread(middleware.wrap_model_call, request, sync_inner)
            return _normalized(result)

        return bridged
