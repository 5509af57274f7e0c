"""The governance pipeline of one command.

resolve -> repair argument names -> validate and coerce -> the layers (judge -> fallback
-> bound -> the app's `wrap_tool_call` middleware -> result cache -> rate limit, in
`agentloop.governance.layers`) -> timeout and retries -> the tool; then the record.

`prepare` does the pure first half when a round starts (so duplicates are found on
validated arguments and bad calls never reach a tool); `run` does the rest in a call task.
A command whose arguments refer to other commands' results is only resolved when the
round starts (`defer`) and validated in its call task, once they are known (`validate`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from langchain_core.runnables import RunnableConfig

from agentloop.base.checkpoint_safe import decode_arguments, encode_arguments
from agentloop.base.sync import has_running_loop, run_without_loop
from agentloop.durability.identity import IDEMPOTENCY_ARGUMENT
from agentloop.governance.app_layers import AppToolLayers
from agentloop.governance.artifacts import AGENT_USAGE_ARTIFACT, ATTACHMENTS_ARTIFACT
from agentloop.governance.cache import ResultCache, canonical_key
from agentloop.governance.call_id import CallId, kept_under, tool_call_id
from agentloop.governance.catalog import ToolCatalog
from agentloop.governance.injected import command_outcome
from agentloop.governance.invoke import ToolInvoker, propagates
from agentloop.governance.late import LateOutcome, watch_late_outcome
from agentloop.governance.layers import (
    BoundLayer,
    CacheLayer,
    FallbackLayer,
    JudgeLayer,
    Layer,
    Proceed,
    RateLimitLayer,
    ToolInvocation,
    run_layers,
)
from agentloop.governance.outcome import ToolOutcome
from agentloop.governance.records import emit_settled, make_record
from agentloop.governance.whole_results import WholeResults
from agentloop.observability.events import Emit, ToolCompleted, ToolFailed, ToolStarted, null_emit
from agentloop.state import PreparedCall, ToolCommand, ToolExecutionRecord

__all__ = ["AGENT_USAGE_ARTIFACT", "PreparedCall", "ToolRunner", "emit_settled", "make_record"]


class ToolRunner:
    """Runs commands through the governance pipeline of one compiled loop.

    Args:
        tools: The tools and their policies (a catalog: they may change between rounds).
        cache: Results shared by every run of the loop.
        invoker: Calls the tools (default: one with its own pool of sync-tool threads).
        retried_elsewhere: Whether the app's middleware retries a tool's calls (its
            `ToolRetryMiddleware`): the loop's own retry of that tool is then off, so
            the two never stack.
        middleware: The app's middleware, when some wraps tool calls: it runs around
            the loop's own layers (cache, rate limit, timeout and retries).
        state_keys: The state keys a tool's `Command(update=...)` may write (`messages`
            and the app's and middleware's own keys); the rest is left out, noted.
    """

    def __init__(
        self,
        tools: ToolCatalog,
        cache: ResultCache,
        invoker: ToolInvoker | None = None,
        retried_elsewhere: Callable[[str], bool] | None = None,
        state_keys: frozenset[str] = frozenset({"messages"}),
        middleware: AppToolLayers | None = None,
    ) -> None:
        self.tools = tools
        self._state_keys = state_keys
        self._retried_elsewhere = retried_elsewhere
        self.cache = cache
        cached, limited = CacheLayer(cache), RateLimitLayer()
        self.outer_layers: tuple[Layer, ...] = (JudgeLayer(), FallbackLayer(cache), BoundLayer())
        """The loop's own layers outside the app's middleware (first outermost)."""
        self.layers: tuple[Layer, ...] = (cached, limited)
        """The loop's own layers inside the app's middleware (first outermost)."""
        # by (the cache, the rate limit) has work to do for a call: a layer with none
        # only passes the call on, so it is left out of the call's stack
        self._needed: dict[tuple[bool, bool], tuple[Layer, ...]] = {
            (True, True): (cached, limited),
            (True, False): (cached,),
            (False, True): (limited,),
            (False, False): (),
        }
        self._middleware = middleware if middleware and middleware.tool_calls else None
        self.invoker = invoker or ToolInvoker()
        self.whole_results = WholeResults()
        """The whole results of calls whose records hold a cut one (for `$N` references)."""

    # -- first half: when the round starts ---------------------------------------------

    def unprepared(
        self, command: ToolCommand, *, call_id: CallId, round_index: int, keyed: bool = True
    ) -> PreparedCall:
        """A command as a call that will not run (nothing resolved or validated).

        Without `keyed`, its `query_key` is left empty, for `validate` to write.
        """
        name = command["tool_name"]
        kwargs = dict(command["tool_kwargs"])
        return {
            "call_id": str(call_id),
            "call_key": "",
            "tool_call_id": command.get("tool_call_id") or call_id.tool_call_id,
            "run_id": call_id.run_id,
            "round_label": call_id.round_label,
            "index": call_id.position,
            "round_index": round_index,
            "purpose": command["purpose"],
            "tool_name": name,
            "kwargs": kwargs,
            "arguments": {},
            "todo_suggestion": command["todo_suggestion"],
            "query_key": canonical_key(name, kwargs) if keyed else "",
            "concurrency_safe": True,
            "notes": [],
            "batch": -1,
        }

    def prepare(
        self, command: ToolCommand, *, call_id: CallId, round_index: int
    ) -> tuple[PreparedCall, ToolExecutionRecord | None]:
        """Resolve, repair and validate a command.

        Returns:
            The prepared call, and a finished (failed) record when the command must not
            run: unknown tool or invalid arguments.
        """
        call = self.unprepared(command, call_id=call_id, round_index=round_index, keyed=False)
        return self.validate(call)  # which writes its query key

    def defer(
        self,
        command: ToolCommand,
        *,
        call_id: CallId,
        round_index: int,
        depends_on: Sequence[int],
    ) -> tuple[PreparedCall, ToolExecutionRecord | None]:
        """Resolve a command whose arguments refer to other commands' results.

        Its arguments are validated later (`validate`), once those results are known.

        Args:
            command: The command, with its references as written.
            call_id: The call's identity (its run, round and position).
            round_index: The round.
            depends_on: Positions of the commands it refers to.

        Returns:
            The call, and a finished (failed) record when its tool is unknown.
        """
        call = self.unprepared(command, call_id=call_id, round_index=round_index)
        call["depends_on"] = list(depends_on)
        spec = self.tools.registry.spec(call["tool_name"])
        if spec is None:
            return call, self._unknown_tool(call)
        call["concurrency_safe"] = spec.policy.concurrency_safe
        return call, None

    def validate(
        self, call: PreparedCall, kwargs: dict[str, Any] | None = None
    ) -> tuple[PreparedCall, ToolExecutionRecord | None]:
        """Repair and validate a call's arguments (a new call; the given one is unchanged).

        Args:
            call: The call.
            kwargs: Arguments that replace the call's `kwargs` (its resolved references).

        Returns:
            The call with its validated `arguments`, and a finished (failed) record when
            it must not run: unknown tool or invalid arguments.
        """
        call = PreparedCall(**call)  # a copy
        if kwargs is not None:
            call["kwargs"] = kwargs
        name, kwargs = call["tool_name"], call["kwargs"]
        spec = self.tools.registry.spec(name)
        if spec is None:
            call["query_key"] = canonical_key(name, kwargs)
            return call, self._unknown_tool(call)
        policy = spec.policy
        call["concurrency_safe"] = policy.concurrency_safe
        validated, repairs = spec.check(kwargs)
        call["notes"] = [*repairs, *validated.coercions]
        call["arguments"] = encode_arguments(validated.arguments)
        call["query_key"] = _query_key(name, validated.arguments, policy.dedup_keys)
        if not validated.ok:
            message = f"Invalid arguments for {name}: {validated.error_message()}"
            return call, make_record(call, ToolOutcome.refused("invalid_arguments", name, message))
        return call, None

    def _unknown_tool(self, call: PreparedCall) -> ToolExecutionRecord:
        name = call["tool_name"]
        available = ", ".join(self.tools.registry.names) or "(none)"
        unknown = f"Unknown tool: {name!r}." if name.strip() else "A tool call with no tool name."
        message = f"{unknown} Available tools: {available}"
        outcome = ToolOutcome.refused("tool_not_found", name, message)
        return make_record(call, outcome, flagged=True)

    # -- second half: in the call task ---------------------------------------------------

    def run_sync(
        self,
        call: PreparedCall,
        emit: Emit,
        config: RunnableConfig | None = None,
        *,
        on_late: LateOutcome | None = None,
    ) -> ToolExecutionRecord:
        """Run a prepared call from sync code: `run`, driven with no event loop when it needs none.

        It needs one for an async-only tool, an app's `wrap_tool_call` middleware with
        only the async hook, or when a loop runs in this thread already: it then runs on
        the loop's one event loop (`ToolThreads.run_coroutine`).
        """
        running = self.run(call, emit, config, prefer_sync=True, on_late=on_late)
        if self._needs_loop(call):
            return self.invoker.threads.run_coroutine(running)
        return run_without_loop(running)

    def _needs_loop(self, call: PreparedCall) -> bool:
        spec = self.tools.registry.spec(call["tool_name"])
        loop_free = self._middleware is None or self._middleware.sync_tool_calls
        sync_tool = spec is None or self.invoker.facts(spec.runnable).has_sync  # None: settled
        return not (loop_free and sync_tool) or has_running_loop()

    async def run(
        self,
        call: PreparedCall,
        emit: Emit,
        config: RunnableConfig | None = None,
        *,
        prefer_sync: bool = False,
        on_late: LateOutcome | None = None,
    ) -> ToolExecutionRecord:
        """Run a prepared call: middleware, layers, timeout, retries, fallback, truncation, judge.

        Never raises for anything the tool does (interrupts raised by a tool propagate).

        Args:
            call: The prepared call.
            emit: Where progress events go.
            config: The config the tool is invoked with (it carries the call's identity).
            prefer_sync: Run a tool's sync implementation when it has both (under `invoke`,
                whose checkpointer may be sync-only).
            on_late: Given the record of a call that timed out as `unknown_outcome` and
                finished later, when it finishes.
        """
        name = call["tool_name"]
        spec = self.tools.registry.spec(name)
        if spec is None:  # its MCP server withdrew it after the round was planned
            message = f"Tool {name!r} is no longer available."
            gone = make_record(call, ToolOutcome.refused("tool_not_found", name, message))
            emit_settled(emit, gone)
            return gone
        tool, policy = spec.runnable, spec.policy
        if policy.retry is not None and self._retried_elsewhere and self._retried_elsewhere(name):
            policy = replace(policy, retry=None)  # the app's middleware retries it instead
        arguments = decode_arguments(call["arguments"])
        if spec.accepts_idempotency_key and not arguments.get(IDEMPOTENCY_ARGUMENT):
            arguments[IDEMPOTENCY_ARGUMENT] = call["call_key"]
        tool_call = ToolInvocation(
            tool_name=name,
            arguments=arguments,
            policy=policy,
            call_id=call["call_id"],
            tool_call_id=tool_call_id(call),
            tool=tool,
            purpose=call["purpose"],
            round_index=call["round_index"],
            index=call["index"],
            config=config,
        )
        listening = emit is not null_emit  # else the events are not made at all
        if listening:
            emit(
                ToolStarted(
                    call_id=call["call_id"],
                    tool_name=name,
                    index=call["index"],
                    kwargs=call["kwargs"],
                )
            )
        started = time.perf_counter()

        async def terminal(current: ToolInvocation) -> ToolOutcome:
            if spec.injected:
                try:
                    current = spec.injected.into(current, config, self.tools.registry.tools)
                except (KeyError, ValueError) as error:
                    message = f"cannot supply the injected arguments of {name}: {error!r}"
                    return ToolOutcome.failure("internal_error", message)
            outcome = await self.invoker.call_with_policy(
                current, emit, config, prefer_sync=prefer_sync
            )
            if type(outcome.value) is str:  # text, the usual result, is no `Command`
                return outcome
            return command_outcome(outcome, name, current.transcript_id, self._state_keys)

        async def governed(current: ToolInvocation) -> ToolOutcome:
            # the app's middleware and the layers inside it; what they raise is a failure
            writes = current.policy.writes_state
            if writes:  # what earlier reads of this state said may change from now on
                self.cache.invalidate(current.touch)
            try:
                middleware = self._middleware
                if middleware is None:  # the loop's layers alone (often none: then the tool)
                    layers = self._layers_for(current)
                    running = run_layers(current, layers, terminal) if layers else terminal(current)
                    return await running
                return await self._through_stack(middleware, current, config, terminal)
            except BaseException as error:
                if propagates(error):
                    raise
                return ToolOutcome.failure("internal_error", f"middleware failed: {error!r}")
            finally:
                if writes:  # reads cached while it ran may hold what it changed
                    self.cache.invalidate(current.touch)

        outcome = await run_layers(tool_call, self.outer_layers, governed)
        duration_ms = (time.perf_counter() - started) * 1000
        if outcome.pending is not None and on_late is not None:
            late = on_late

            def deliver(late_outcome: ToolOutcome, truncated: bool) -> None:
                late(make_record(call, late_outcome, truncated=truncated))

            watch_late_outcome(outcome.pending, name, policy.max_result_chars, deliver)
        if tool_call.trace:
            outcome = outcome.with_changes(notes=(*outcome.notes, *tool_call.trace))
        record = make_record(
            call,
            outcome,
            duration_ms=duration_ms,
            truncated=outcome.truncated,
            flagged=outcome.error_type == "useless_result",
        )
        whole = outcome.whole
        if whole is not None and record["success"] and record["truncated"] and not outcome.fallback:
            self.whole_results.keep(kept_under(call), call["call_id"], whole)
        artifact = outcome.artifact
        if artifact is not None:
            record["artifact"] = artifact
        if isinstance(artifact, dict):
            if isinstance(artifact.get(AGENT_USAGE_ARTIFACT), dict):
                record["agent_usage"] = artifact[AGENT_USAGE_ARTIFACT]
            if artifact.get(ATTACHMENTS_ARTIFACT) and outcome.success and not outcome.from_cache:
                record["attachments"] = list(artifact[ATTACHMENTS_ARTIFACT])
        if not listening:
            return record
        completed = ToolCompleted(
            call_id=call["call_id"],
            tool_name=name,
            index=call["index"],
            duration_ms=record["duration_ms"],
            success=record["success"],
            attempts=outcome.attempts,
            from_cache=outcome.from_cache,
            fallback=outcome.fallback,
        )
        if not record["success"]:
            emit(ToolFailed.of(completed, error=record["error"], error_type=outcome.error_type))
        emit(completed)
        return record

    async def _through_stack(
        self,
        middleware: AppToolLayers,
        call: ToolInvocation,
        config: RunnableConfig | None,
        terminal: Proceed,
    ) -> ToolOutcome:
        """A call through the app's middleware, then the loop's own layers, to `terminal`.

        With no event loop running (`run_sync`), the middleware's sync hooks run here and
        the layers are driven with no event loop (the tool is sync: `_needs_loop`).
        """
        layers = self._layers_for
        tools, keys = self.tools.registry.tools, self._state_keys
        if has_running_loop():
            inner: Proceed = lambda current: run_layers(current, layers(current), terminal)  # noqa: E731
            return await middleware.acall_tool(call, config, inner, tools=tools, state_keys=keys)
        return middleware.call_tool(
            call,
            config,
            lambda current: run_without_loop(run_layers(current, layers(current), terminal)),
            tools=tools,
            state_keys=keys,
        )

    def _layers_for(self, call: ToolInvocation) -> tuple[Layer, ...]:
        """The loop's layers with work to do for a call (the others would only pass it on).

        The cache for a call of an idempotent tool with a cache TTL, the rate limit for a
        call of a tool with a rate.
        """
        policy = call.policy
        return self._needed[
            (bool(policy.idempotent and policy.cache_ttl_s), bool(policy.rate_limit_per_s))
        ]


def _query_key(
    tool_name: str, arguments: Mapping[str, Any], dedup_keys: Sequence[str] | None
) -> str:
    if dedup_keys:
        arguments = {key: arguments.get(key) for key in dedup_keys}
    return canonical_key(tool_name, arguments)
