"""The loop's own layers around a tool call, inside the app's `wrap_tool_call` middleware.

A call goes: the app's middleware (outermost first) -> `CacheLayer` -> `RateLimitLayer`
-> timeout and retries -> the tool (the cache and the rate limit only for the calls they
have work for). A layer is an async `(call, proceed) -> ToolOutcome`
that awaits nothing but `proceed` and `pause`, so under `invoke` a sync tool's call runs
through them with no event loop.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool

from agentloop._sync import pause
from agentloop.tools.cache import ResultCache, canonical_key
from agentloop.tools.cache_scope import run_identity, scoped_key
from agentloop.tools.call_config import call_info
from agentloop.tools.freshness import StateTouch, state_touch
from agentloop.tools.outcome import ToolOutcome
from agentloop.tools.policy import ResolvedPolicy
from agentloop.tools.results import to_jsonable, truncate_result

__all__ = [
    "CacheLayer",
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
Layer = Callable[[ToolInvocation, Proceed], Awaitable[ToolOutcome]]


async def run_layers(
    call: ToolInvocation, layers: Sequence[Layer], terminal: Proceed
) -> ToolOutcome:
    """Run `call` through `layers` (the first is outermost), ending in `terminal`."""
    if not layers:
        return await terminal(call)
    first, rest = layers[0], layers[1:]
    return await first(call, lambda current: run_layers(current, rest, terminal))


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
