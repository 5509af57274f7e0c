"""Calling a tool for real: one attempt under a timeout, and retries by policy (tenacity)."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool, Tool, ToolException
from langgraph.errors import GraphBubbleUp
from pydantic import ValidationError
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
    wait_none,
    wait_random,
)

from agentloop.base.messages import message_text
from agentloop.base.retry import retry_after
from agentloop.base.sync import has_running_loop
from agentloop.errors import MCPTransportError, ToolCallError, classify_tool_error
from agentloop.governance.artifacts import unpack_output
from agentloop.governance.layers import ToolInvocation
from agentloop.governance.outcome import ToolOutcome, cut_off, timed_out
from agentloop.governance.output import LARGE_RESULT_CHARS, BoundedOutput, bound_output
from agentloop.governance.policy import ToolRetry, is_subagent
from agentloop.governance.results import ReadLimits
from agentloop.governance.threads import ToolThreads
from agentloop.observability.events import Emit, ToolAbandoned, ToolRetrying, ToolThreadAbandoned

__all__ = [
    "ToolFacts",
    "ToolInvoker",
    "crash_proof",
    "crashed",
    "has_sync_implementation",
    "is_async_tool",
    "propagates",
]


def is_async_tool(tool: BaseTool) -> bool:
    """Tell whether a tool has a native async implementation."""
    if isinstance(tool, StructuredTool | Tool):
        return tool.coroutine is not None
    return type(tool)._arun is not BaseTool._arun


def has_sync_implementation(tool: BaseTool) -> bool:
    """Tell whether a tool can run without an event loop."""
    if isinstance(tool, StructuredTool | Tool):
        return tool.func is not None
    return not is_async_tool(tool)


def _starts_own_processes(tool: BaseTool) -> bool:
    """Whether the processes an async call starts are its own to end at its timeout.

    An MCP tool's server and a sub-agent's tools belong to their toolset and loop.
    """
    return not is_subagent(tool) and "mcp_server" not in (tool.metadata or {})


def _payload(call: ToolInvocation) -> Any:
    """What the tool is invoked with: its arguments, or a tool call (artifact, injection)."""
    tool, arguments, call_id = call.tool, call.arguments, call.transcript_id
    if tool.response_format == "content_and_artifact" or call.as_tool_call:
        return {"name": tool.name, "args": arguments, "id": call_id, "type": "tool_call"}
    return arguments


def _without_handlers(tool: BaseTool) -> BaseTool | None:
    """A copy of a tool that turns its own errors into content, with those handlers off.

    Called with its arguments, such a tool returns its handler's text as if it were its
    result (only the `ToolMessage` of a tool call says `status="error"`); the copy
    raises instead, and the call fails with the handler's text (`_handled`). None for a
    tool with no handler.
    """
    if not (tool.handle_tool_error or tool.handle_validation_error):
        return None
    return tool.model_copy(update={"handle_tool_error": False, "handle_validation_error": False})


def _handled(tool: BaseTool, error: Exception) -> ToolException | None:
    """The failure a tool's own error handler makes of `error`, as LangChain's tools do.

    None when the tool has no handler for it (the error is the call's failure as is).
    """
    flag: Any
    if isinstance(error, ToolException):
        flag, default = tool.handle_tool_error, (str(error.args[0]) if error.args else "")
        default = default or "Tool execution error"
    elif isinstance(error, ValidationError):
        flag, default = tool.handle_validation_error, "Tool input validation error"
    else:
        return None
    if not flag:
        return None
    if isinstance(flag, str):
        return ToolException(flag)
    if callable(flag):
        made = flag(error)
        return ToolException(made if isinstance(made, str) else str(made))
    return ToolException(default)


def crashed(error: BaseException) -> ToolCallError:
    """The failure of a tool that raised a `BaseException` that is not an `Exception`.

    `SystemExit`, `GeneratorExit` and the like must not travel through coroutines (a
    `GeneratorExit` escaping an `await` confuses the event loop), so they are turned
    into a `ToolCallError` where the tool raised them.
    """
    return ToolCallError("tool_crashed", f"{type(error).__name__}: {error}".rstrip(": "))


def _crash_proof(function: Callable[..., Any], *args: Any) -> Any:
    """Run a sync tool; a `BaseException` that is not an `Exception` becomes `crashed`."""
    try:
        return function(*args)
    except (Exception, KeyboardInterrupt):
        raise
    except BaseException as error:
        raise crashed(error) from None


def crash_proof(tool: BaseTool) -> BaseTool:
    """Return a copy of a tool whose coroutine cannot raise a `BaseException` at the loop.

    LangChain runs an async tool's coroutine in a task of its own; a `SystemExit` raised
    there is re-raised by asyncio out of the event loop itself, and a `GeneratorExit`
    confuses the awaiting coroutine. The copy's coroutine turns both (and any
    `BaseException` that is not an `Exception`, a `KeyboardInterrupt` or the cancellation
    of its task) into a `ToolCallError("tool_crashed", ...)`. Tools that are not
    `StructuredTool` or `Tool` are returned as they are.
    """
    if not isinstance(tool, StructuredTool | Tool) or tool.coroutine is None:
        return tool
    coroutine = tool.coroutine

    @functools.wraps(coroutine)
    async def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return await coroutine(*args, **kwargs)
        except (Exception, KeyboardInterrupt):
            raise
        except BaseException as error:
            if propagates(error) or _closed_after_its_loop(error):
                raise
            raise crashed(error) from None

    return tool.model_copy(update={"coroutine": guarded})


def _closed_after_its_loop(error: BaseException) -> bool:
    """Tell whether a coroutine is being closed after its event loop ended.

    A task abandoned and detached at its timeout is dropped unfinished when its loop
    closes; its coroutine is then closed (`GeneratorExit`), which must go through.
    """
    return isinstance(error, GeneratorExit) and not has_running_loop()


def propagates(error: BaseException) -> bool:
    """Tell whether an error raised by a tool must stop the run rather than become a record.

    Interrupts (LangGraph asks a person), Ctrl-C, and the cancellation of the run itself
    propagate; anything else a tool raises - `SystemExit` from an argparse tool,
    `GeneratorExit`, a `CancelledError` of its own making - is the tool's failure.
    """
    if isinstance(error, GraphBubbleUp | KeyboardInterrupt):
        return True
    if isinstance(error, asyncio.CancelledError) and has_running_loop():
        task = asyncio.current_task()
        return task is not None and task.cancelling() > 0
    return False


def _retryable(retry: ToolRetry) -> Callable[[BaseException], bool]:
    def retryable(error: BaseException) -> bool:
        return not isinstance(error, GraphBubbleUp) and retry.should_retry(error)

    return retryable


def _retrying(retry: ToolRetry, call: ToolInvocation, emit: Emit) -> Retrying:
    wait = wait_exponential(
        multiplier=retry.initial_delay_s,
        exp_base=retry.multiplier,
        max=retry.max_delay_s,
    )

    def before_sleep(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome else None
        emit(
            ToolRetrying(
                call_id=call.call_id,
                tool_name=call.tool_name,
                attempt=state.attempt_number,
                error=str(error),
                wait_s=round(state.upcoming_sleep, 3),
            )
        )

    return Retrying(
        stop=stop_after_attempt(retry.max_attempts),
        wait=wait + (wait_random(0, retry.initial_delay_s) if retry.jitter else wait_none()),
        retry=retry_if_exception(_retryable(retry)),
        before_sleep=before_sleep,
        reraise=True,
    )


@dataclass(frozen=True, slots=True)
class ToolFacts:
    """What calling a tool depends on that never changes for the tool object."""

    is_async: bool
    """It has a native async implementation (`is_async_tool`)."""
    has_sync: bool
    """It can run without an event loop (`has_sync_implementation`)."""
    subagent: bool
    """It is a sub-agent (`is_subagent`)."""
    own_processes: bool
    """The processes an async call starts are its own to end at its timeout."""
    unhandled: BaseTool | None = None
    """The tool with its error handlers off, called with its arguments (`_without_handlers`)."""


_MAX_KNOWN_TOOLS = 512
"""Tool objects whose facts an invoker keeps (all of them are forgotten past it)."""


class ToolInvoker:
    """Calls tools for one loop: timeouts, retries by policy, sync tools in `ToolThreads`.

    Args:
        threads: Where the loop's sync tools run.
    """

    def __init__(self, threads: ToolThreads | None = None) -> None:
        self.threads = threads or ToolThreads()
        self._facts: dict[int, tuple[BaseTool, ToolFacts]] = {}

    def facts(self, tool: BaseTool) -> ToolFacts:
        """A tool's `ToolFacts`, worked out on its first call and kept for the tool object."""
        known = self._facts.get(id(tool))
        if known is not None and known[0] is tool:
            return known[1]
        facts = ToolFacts(
            is_async=is_async_tool(tool),
            has_sync=has_sync_implementation(tool),
            subagent=is_subagent(tool),
            own_processes=_starts_own_processes(tool),
            unhandled=_without_handlers(tool),
        )
        if len(self._facts) >= _MAX_KNOWN_TOOLS:  # tools replaced many times over (MCP)
            self._facts.clear()
        self._facts[id(tool)] = (tool, facts)
        return facts

    async def invoke_once(
        self,
        call: ToolInvocation,
        emit: Emit,
        config: RunnableConfig | None = None,
        *,
        prefer_sync: bool = False,
    ) -> tuple[Any, Any]:
        """Call a tool once. A timed-out coroutine is cancelled; a sync tool's thread is abandoned.

        A tool with both implementations runs its sync one when `prefer_sync` (the loop
        runs under `invoke`, whose checkpointer may be sync-only), else its async one.
        Its output is then bounded (`bound_output`): iterators are read within the call's
        time limit, large results converted off the event loop.

        Returns:
            The tool's output (a `BoundedOutput` once bounded) and its artifact (None
            unless the tool returns content and an artifact).

        Raises:
            TimeoutError: The call took longer than its timeout.
            UnknownOutcomeError: It did, has side effects and may still take effect; or
                it is an MCP call with side effects whose connection broke after its
                request had left.
        """
        tool, timeout_s = call.tool, call.policy.timeout_s
        payload = _payload(call)

        def abandoned(tool_name: str, hung: int, cap: int) -> None:
            emit(
                ToolThreadAbandoned(
                    call_id=call.call_id, tool_name=tool_name, hung_threads=hung, cap=cap
                )
            )

        def abandoned_task(tool_name: str, hung: int, cap: int) -> None:
            emit(ToolAbandoned(call_id=call.call_id, tool_name=tool_name, hung=hung, cap=cap))

        deadline = time.monotonic() + timeout_s  # the event loop's clock
        facts = self.facts(tool)
        unhandled = facts.unhandled if payload is call.arguments else None
        runnable = tool if unhandled is None else unhandled
        try:
            if facts.is_async and not (prefer_sync and facts.has_sync):
                output = await self.threads.run_task(
                    tool.name, runnable.ainvoke(payload, config), timeout_s, abandoned_task,
                    cancel=not (facts.subagent and not call.policy.idempotent),
                    end_children=facts.own_processes,
                )  # fmt: skip
            else:
                output = await self.threads.run(
                    tool.name, partial(_crash_proof, runnable.invoke, payload, config), timeout_s,
                    abandoned,
                )  # fmt: skip
            artifact = None
            if payload is not call.arguments:
                if isinstance(output, ToolMessage) and output.status == "error":
                    raise ToolException(message_text(output))  # as the tool's handler wrote it
                output, artifact = unpack_output(output)
            if type(output) is not str or len(output) > LARGE_RESULT_CHARS:  # else small text
                limits = ReadLimits(
                    call.policy.max_result_items, call.policy.max_result_chars, deadline
                )
                output = await bound_output(
                    output, tool_name=tool.name, limits=limits, threads=self.threads,
                    on_abandoned=abandoned,
                )  # fmt: skip
        except TimeoutError as error:
            raise timed_out(tool, call.policy, timeout_s, error) from error
        except MCPTransportError as error:
            lost = cut_off(call.policy, error)
            if lost is error:
                raise
            raise lost from error
        except (ToolException, ValidationError) as error:
            handled = _handled(tool, error) if runnable is not tool else None
            if handled is None:
                raise
            raise handled from error
        except BaseException as error:
            if propagates(error) or isinstance(error, Exception):
                raise
            raise crashed(error) from None
        return output, artifact

    async def call_with_policy(
        self,
        call: ToolInvocation,
        emit: Emit,
        config: RunnableConfig | None = None,
        *,
        prefer_sync: bool = False,
    ) -> ToolOutcome:
        """Call the tool with its timeout, retrying by policy; never raises for tool errors.

        Only idempotent tools are retried automatically, timeouts included. Whatever the
        tool raises becomes a failed outcome (`tool_crashed` for a `BaseException` that
        is not an `Exception`), except what `propagates`.

        Args:
            call: The validated call.
            emit: Where `tool_retry`, `tool_thread_abandoned` and `tool_abandoned` go.
            config: The config the tool is invoked with.
            prefer_sync: Run a tool's sync implementation when it has both (under `invoke`).

        Returns:
            The outcome, with the number of attempts made.
        """
        policy = call.policy
        attempts = 1

        async def attempt() -> tuple[Any, Any]:  # a retry's
            nonlocal attempts
            attempts += 1
            return await self.invoke_once(call, emit, config, prefer_sync=prefer_sync)

        value: Any
        artifact: Any
        try:
            failed: Exception | None = None
            retry = policy.retry
            try:  # the first attempt, directly: a retrier is made only after a failure
                value, artifact = await self.invoke_once(
                    call, emit, config, prefer_sync=prefer_sync
                )
            except Exception as error:
                if retry is None or not policy.retryable or not _retryable(retry)(error):
                    raise
                failed = error
            if failed is not None and retry is not None:
                value, artifact = await retry_after(
                    failed, attempt, lambda: _retrying(retry, call, emit)
                )
        except BaseException as error:
            if propagates(error):
                raise
            message = str(error) or type(error).__name__
            outcome = ToolOutcome.failure(classify_tool_error(error), message, attempts=attempts)
            own = None if isinstance(error, ToolCallError) else error  # the tool's, not ours
            return outcome.with_changes(pending=getattr(error, "pending", None), exception=own)
        if isinstance(value, BoundedOutput):
            return ToolOutcome(
                value=value.value,
                attempts=attempts,
                artifact=artifact,
                truncated=value.truncated,
                notes=value.notes,
                whole=value.whole,
            )
        return ToolOutcome(value=value, attempts=attempts, artifact=artifact)
