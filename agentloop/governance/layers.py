"""The loop's own layers around a tool call, outside and inside the app's middleware.

A call goes, outermost first: `JudgeLayer` -> `FallbackLayer` -> `BoundLayer` -> the
app's `wrap_tool_call` middleware (in list order) -> `CacheLayer` -> `RateLimitLayer` ->
timeout and retries -> the tool (the cache and the rate limit only for the calls they
have work for). So the app's middleware sees what the tool did, and what it returns is
fallen back, bounded and judged as a tool's own outcome.

A layer is an async `(call, proceed) -> ToolOutcome` that awaits nothing but `proceed`
and `pause`, so under `invoke` a sync tool's call runs through them with no event loop.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property, partial
from typing import Any, Protocol

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool

from agentloop.base.sync import pause
from agentloop.errors import ToolCallError
from agentloop.governance.cache import ResultCache, canonical_key
from agentloop.governance.cache_scope import run_identity, scoped_key
from agentloop.governance.call_config import call_info
from agentloop.governance.freshness import StateTouch, state_touch
from agentloop.governance.judge import judge_result
from agentloop.governance.outcome import ToolOutcome, graceful_error
from agentloop.governance.output import bounded_json
from agentloop.governance.policy import ResolvedPolicy
from agentloop.governance.results import to_jsonable, truncate_result

__all__ = [
    "BoundLayer",
    "CacheLayer",
    "FallbackLayer",
    "JudgeLayer",
    "Layer",
    "Proceed",
    "RateLimitLayer",
    "ToolInvocation",
    "run_layers",
]


@dataclass(frozen=True)
class ToolInvocation:
    """One validated call on its way to a tool."""

    tool_name: str
    arguments: dict[str, Any]
    policy: ResolvedPolicy
    call_id: str
    tool: BaseTool
    tool_call_id: str = ""
    """The call's id in the transcript, as the tool sees it (`ToolRuntime.tool_call_id`,
    `InjectedToolCallId`); "" for the `call_id`."""
    purpose: str = ""
    round_index: int = 0
    index: int = 0
    config: RunnableConfig | None = field(default=None, compare=False)
    """The config the tool is invoked with (it names the call and whom it serves)."""
    as_tool_call: bool = False
    """Invoke the tool with a full `ToolCall`, as `ToolNode` does (it takes injected arguments)."""
    trace: list[str] = field(default_factory=list, compare=False)
    """Free-form notes the loop's layers leave on the call (copied into the record)."""

    @property
    def transcript_id(self) -> str:
        """The id the tool sees as its `tool_call_id`."""
        return self.tool_call_id or self.call_id

    def override(self, **changes: Any) -> ToolInvocation:
        """Return a copy of the call with some fields changed (the trace is shared)."""
        return replace(self, **changes)

    @cached_property
    def identity(self) -> str:
        """Who the call serves (`run_identity`): cached results are kept apart by it.

        As the loop named it in the tool config, else from the config; worked out for the
        calls that use the cache only.
        """
        info = call_info(self.config)
        if info is not None and "identity" in info:
            return info["identity"]
        return run_identity(self.config)

    @property
    def cache_key(self) -> str:
        """The cache key of this call: its identity (unless global), tool and sorted arguments."""
        key = canonical_key(self.tool_name, self.arguments)
        return scoped_key(key, self.identity, self.policy.cache_scope)

    @property
    def touch(self) -> StateTouch:
        """The part of the tools' state this call reads or writes."""
        return state_touch(self.policy, self.arguments)


Proceed = Callable[[ToolInvocation], Awaitable[ToolOutcome]]


class Layer(Protocol):
    """One of the loop's layers: runs a call, passing it on through `proceed` (or not)."""

    async def __call__(self, call: ToolInvocation, proceed: Proceed) -> ToolOutcome:
        """Run `call`: its outcome, from `proceed(call)` or of the layer's own making."""
        ...


async def run_layers(
    call: ToolInvocation, layers: Sequence[Layer], terminal: Proceed
) -> ToolOutcome:
    """Run `call` through `layers` (the first is outermost), ending in `terminal`."""
    proceed = terminal
    for layer in reversed(layers):  # each layer's `proceed` is the next one, bound
        proceed = partial(layer, proceed=proceed)
    return await proceed(call)


class CacheLayer:
    """Answer idempotent calls from the cache while their entry is fresh.

    An entry only answers calls of the identity that stored it (same thread, context and
    user configuration), unless the tool's policy says `cache_scope="global"`.

    Args:
        cache: The cache of the compiled loop.
    """

    def __init__(self, cache: ResultCache) -> None:
        self.cache = cache

    async def __call__(self, call: ToolInvocation, proceed: Proceed) -> ToolOutcome:
        """Look the call up, or run it and remember a success."""
        ttl = call.policy.cache_ttl_s
        if not (call.policy.idempotent and ttl):
            return await proceed(call)
        key = call.cache_key
        hit = self.cache.get(key)
        if hit is not None:
            call.trace.append(f"cache hit ({hit.age_s:.1f}s old)")
            return ToolOutcome(value=hit.value, attempts=0, from_cache=True)
        outcome = await proceed(call)
        if outcome.success and not outcome.fallback and not outcome.from_cache:
            budgeted = truncate_result(to_jsonable(outcome.value), call.policy.max_result_chars)
            self.cache.put(key, budgeted.value, ttl, call.touch)
        return outcome


class RateLimitLayer:
    """Space the calls of each tool to at most `policy.rate_limit_per_s` per second.

    Shared by every run of the compiled loop, across threads and event loops.
    """

    def __init__(self) -> None:
        self._next_slot: dict[str, float] = {}
        self._lock = threading.Lock()

    def reserve(self, tool_name: str, rate_per_s: float) -> float:
        """Reserve the next slot of a tool; return how long to wait for it (seconds)."""
        now = time.monotonic()
        with self._lock:
            slot = max(now, self._next_slot.get(tool_name, now))
            self._next_slot[tool_name] = slot + 1.0 / rate_per_s
        return slot - now

    async def __call__(self, call: ToolInvocation, proceed: Proceed) -> ToolOutcome:
        """Wait for the call's slot, then run it."""
        rate = call.policy.rate_limit_per_s
        if rate:
            delay = self.reserve(call.tool_name, rate)
            if delay > 0:
                call.trace.append(f"rate limited {delay * 1000:.0f}ms")
                await pause(delay)
        return await proceed(call)


class JudgeLayer:
    """Flag a successful result that did not help.

    An error in disguise (a text starting with "Error executing tool"...) or a result
    the tool's `check_result` rejects: the call then fails as `useless_result`, its
    result kept for the record.
    """

    async def __call__(self, call: ToolInvocation, proceed: Proceed) -> ToolOutcome:
        """Run the call and judge what it returned."""
        outcome = await proceed(call)
        useless = judge_result(outcome, call.policy.check_result) if outcome.success else ""
        if not useless:
            return outcome
        return outcome.with_changes(success=False, error=useless, error_type="useless_result")


class FallbackLayer:
    """Give a failed call a result: the last good one, its stub, or a graceful error.

    The last good result is opt-in and the call still fails; the declared stub makes it
    succeed; the graceful error tells the model what to do next. A call whose outcome is
    unknown gets only the error: it may have taken effect. The last good result of an
    idempotent tool with `stale_fallback_s` is kept here, bounded.

    Args:
        cache: The cache of the compiled loop (it keeps the last good results).
    """

    def __init__(self, cache: ResultCache) -> None:
        self.cache = cache

    async def __call__(self, call: ToolInvocation, proceed: Proceed) -> ToolOutcome:
        """Run the call; remember a fresh success, or fall back from a failure."""
        outcome = await proceed(call)
        policy = call.policy
        if not outcome.success:
            return self.fall_back(call, outcome)
        if (
            policy.stale_fallback_s
            and policy.idempotent
            and not (outcome.fallback or outcome.from_cache)
        ):
            self.cache.remember(call.cache_key, outcome.value, policy.stale_fallback_s, call.touch)
        return outcome

    def fall_back(self, call: ToolInvocation, failure: ToolOutcome) -> ToolOutcome:
        """The last good result, the declared stub, or a graceful error; bounded as a result."""
        policy, name = call.policy, call.tool_name
        reason = f"{failure.error_type}: {failure.error}"
        if failure.error_type != "unknown_outcome":
            stale = (
                self.cache.last_good(call.cache_key)
                if policy.idempotent and policy.stale_fallback_s
                else None
            )
            if stale is not None:  # kept bounded
                return failure.with_changes(
                    value=stale.value,
                    fallback="stale_cache",
                    stale_age_s=stale.age_s,
                    notes=(f"stale result ({stale.age_s:.0f}s old) after {reason}",),
                )
            if policy.has_stub:
                try:
                    stub = bounded_json(policy.stub_result, policy.max_result_chars, name)
                except ToolCallError as error:
                    failure = failure.with_changes(error=f"{failure.error}; stub: {error.message}")
                else:
                    return failure.with_changes(
                        value=stub.value,
                        success=True,
                        error="",
                        fallback="stub",
                        truncated=stub.truncated,
                        notes=(f"declared stub result after {reason}",),
                    )
        graceful = graceful_error(failure.error_type or "internal_error", name, failure.error)
        bounded = bounded_json(graceful, policy.max_result_chars, name)  # text and short keys
        return failure.with_changes(
            value=bounded.value, truncated=failure.truncated or bounded.truncated
        )


class BoundLayer:
    """Make a successful call's result JSON data within the tool's `max_result_chars`.

    A cut result keeps its whole value in the outcome (`whole`), for the references of
    later commands; a result that cannot be made JSON data fails the call
    (`unserializable_result`).
    """

    async def __call__(self, call: ToolInvocation, proceed: Proceed) -> ToolOutcome:
        """Run the call and bound what it returned."""
        outcome = await proceed(call)
        if not outcome.success:  # `FallbackLayer` gives it a result, bounded
            return outcome
        try:
            bounded = bounded_json(outcome.value, call.policy.max_result_chars, call.tool_name)
        except ToolCallError as error:
            failed = ToolOutcome.failure(error.error_type, error.message, attempts=outcome.attempts)
            return failed.with_changes(artifact=outcome.artifact)
        if bounded.value is outcome.value and not (bounded.truncated or outcome.whole is not None):
            return outcome
        if outcome.truncated:  # cut while it was read: `whole` is what was at hand, if any
            return outcome.with_changes(value=bounded.value)
        return outcome.with_changes(
            value=bounded.value, truncated=bounded.truncated, whole=bounded.whole
        )
