"""The app's `wrap_tool_call` middleware: the outermost layer of every governed tool call.

`wrap_tool_call` / `awrap_tool_call` wrap every governed call, after its arguments are
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
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any, TypeVar

from langchain.agents.middleware import AgentMiddleware, ToolErrorMiddleware, ToolRetryMiddleware
from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from agentloop.errors import ToolCallError
from agentloop.governance.injected import command_outcome, tool_runtime
from agentloop.governance.layers import Proceed, ToolInvocation
from agentloop.governance.outcome import ToolOutcome

__all__ = ["AppToolLayers", "ToolCallFailed", "on_loop", "overrides", "wraps"]

T = TypeVar("T")


def overrides(middleware: AgentMiddleware[Any, Any, Any], hook: str) -> bool:
    """Whether a middleware's class defines `hook` itself."""
    return getattr(type(middleware), hook, None) is not getattr(AgentMiddleware, hook, None)


def wraps(middleware: AgentMiddleware[Any, Any, Any], hook: str) -> bool:
    """Whether a middleware defines `hook` or its async form (`a` + hook)."""
    return overrides(middleware, hook) or overrides(middleware, f"a{hook}")


class AppToolLayers:
    """The app's middleware that wraps tool calls, as one layer, first outermost.

    Args:
        middleware: The app's `AgentMiddleware` objects, in `create_tool_loop`'s order.
    """

    def __init__(self, middleware: Sequence[AgentMiddleware[Any, Any, Any]]) -> None:
        self.tool_calls = [m for m in middleware if wraps(m, "wrap_tool_call")]
        """The app's `wrap_tool_call` middleware, first outermost."""
        self.tool_retries = [
            m for m in middleware if isinstance(m, ToolRetryMiddleware | ToolErrorMiddleware)
        ]
        """The app's middleware that deals with a failed tool call: it retries it
        (`ToolRetryMiddleware`) or turns it into an answer (`ToolErrorMiddleware`)."""

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
        return all(overrides(m, "wrap_tool_call") for m in self.tool_calls)

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
    if overrides(middleware, "awrap_tool_call"):
        return lambda request: middleware.awrap_tool_call(request, inner)

    async def bridged(request: ToolCallRequest) -> Any:
        loop = asyncio.get_running_loop()

        def sync_inner(inner_request: ToolCallRequest) -> Any:
            return on_loop(loop, inner(inner_request))

        return await asyncio.to_thread(middleware.wrap_tool_call, request, sync_inner)

    return bridged


def on_loop(loop: asyncio.AbstractEventLoop, awaitable: Awaitable[T]) -> T:
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
