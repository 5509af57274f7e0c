"""The interceptor chain around a tool call, and the built-in interceptors.

An interceptor is an async callable `(call, proceed) -> result`. It may pass the call
through (`await proceed(call)`), change it (`await proceed(call.override(arguments=...))`),
or answer without calling the tool (return a value or a `ToolOutcome`). Mandatory
interceptors wrap optional ones, so they always run, even when an optional one answers.

Under `invoke`, a call of a sync tool runs without an event loop when every interceptor
of its chain says it awaits nothing an event loop must resume (`RUNS_WITHOUT_LOOP` set
to True on it: the loop's own cache and rate limiter and `AuditLog` do); a chain with
any other interceptor gets an event loop for that call.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from langchain_core.tools import BaseTool

from agentloop._sync import pause
from agentloop.tools.cache import ResultCache, canonical_key
from agentloop.tools.cache_scope import scoped_key
from agentloop.tools.freshness import StateTouch, state_touch
from agentloop.tools.outcome import ToolOutcome
from agentloop.tools.policy import ResolvedPolicy
from agentloop.tools.results import to_jsonable, truncate_result

__all__ = [
    "RUNS_WITHOUT_LOOP",
    "AuditLog",
    "CacheInterceptor",
    "Interceptor",
    "Proceed",
    "RateLimitInterceptor",
    "ToolInvocation",
    "run_chain",
    "runs_without_loop",
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
    identity: str = ""
    """Who the call serves (`run_identity`): cached results are kept apart by it."""
    context: Any = field(default=None, compare=False)
    """The run's context (`graph.invoke(..., context=...)`: the app's, with `context_schema`)."""
    as_tool_call: bool = False
    """Invoke the tool with a full `ToolCall`, as `ToolNode` does (it takes injected arguments)."""
    trace: list[str] = field(default_factory=list, compare=False)
    """Free-form notes interceptors leave on the call (copied into the record)."""

    @property
    def transcript_id(self) -> str:
        """The id the tool sees as its `tool_call_id`."""
        return self.tool_call_id or self.call_id

    def override(self, **changes: Any) -> ToolInvocation:
        """Return a copy of the call with some fields changed (the trace is shared)."""
        return replace(self, **changes)

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
Interceptor = Callable[[ToolInvocation, Proceed], Awaitable[Any]]

RUNS_WITHOUT_LOOP = "runs_without_loop"
"""The attribute by which an interceptor says it awaits only `proceed` (and `pause`)."""


def runs_without_loop(interceptors: Sequence[Interceptor]) -> bool:
    """Whether a chain can be driven with no event loop (see the module docstring)."""
    return all(getattr(interceptor, RUNS_WITHOUT_LOOP, False) for interceptor in interceptors)


def _as_outcome(result: Any) -> ToolOutcome:
    return result if isinstance(result, ToolOutcome) else ToolOutcome(value=result)


async def run_chain(
    call: ToolInvocation,
    interceptors: Sequence[Interceptor],
    terminal: Proceed,
) -> ToolOutcome:
    """Run `call` through `interceptors` (first is outermost), ending in `terminal`.

    Args:
        call: The call.
        interceptors: Mandatory ones first, then optional ones.
        terminal: What actually calls the tool (with timeout, retries).

    Returns:
        The outcome; a plain value returned by an interceptor is a success.
    """

    def link(position: int) -> Proceed:
        if position == len(interceptors):
            return terminal
        interceptor = interceptors[position]
        following = link(position + 1)

        async def proceed(current: ToolInvocation) -> ToolOutcome:
            return _as_outcome(await interceptor(current, following))

        return proceed

    return await link(0)(call)


@dataclass(frozen=True)
class AuditEntry:
    """One audited call."""

    call_id: str
    tool_name: str
    arguments: dict[str, Any]
    success: bool
    error: str
    error_type: str
    """Why it failed (`ErrorType`; `refused` when an interceptor refused it), or ""."""
    from_cache: bool
    fallback: str
    duration_ms: float


class AuditLog:
    """A mandatory interceptor that remembers every call and how it ended.

    Pass it as `GovernanceOptions(mandatory_interceptors=[audit])` and read
    `audit.entries`. Thread-safe.

    Args:
        max_entries: Oldest entries are dropped past this bound.
    """

    runs_without_loop = True

    def __init__(self, max_entries: int = 10_000) -> None:
        self.max_entries = max_entries
        self._entries: list[AuditEntry] = []
        self._lock = threading.Lock()

    @property
    def entries(self) -> list[AuditEntry]:
        """A copy of the audited calls, oldest first."""
        with self._lock:
            return list(self._entries)

    async def __call__(self, call: ToolInvocation, proceed: Proceed) -> ToolOutcome:
        """Audit one call."""
        started = time.perf_counter()
        outcome = await proceed(call)
        entry = AuditEntry(
            call_id=call.call_id,
            tool_name=call.tool_name,
            arguments=dict(call.arguments),
            success=outcome.success,
            error=outcome.error,
            error_type=outcome.error_type,
            from_cache=outcome.from_cache,
            fallback=outcome.fallback,
            duration_ms=(time.perf_counter() - started) * 1000,
        )
        with self._lock:
            self._entries.append(entry)
            del self._entries[: max(0, len(self._entries) - self.max_entries)]
        call.trace.append("audited")
        return outcome


class CacheInterceptor:
    """Answer idempotent calls from the cache while their entry is fresh.

    An entry only answers calls of the identity that stored it (same thread, context and
    user configuration), unless the tool's policy says `cache_scope="global"`.

    Args:
        cache: The cache of the compiled loop.
    """

    runs_without_loop = True

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


class RateLimitInterceptor:
    """Space the calls of each tool to at most `policy.rate_limit_per_s` per second.

    Shared by every run of the compiled loop, across threads and event loops.
    """

    runs_without_loop = True

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
