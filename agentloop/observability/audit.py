"""`AuditLog`: a `wrap_tool_call` middleware that remembers every tool call and how it ended.

Put it first in `create_tool_loop(middleware=[audit, ...])` so that it wraps the others
and sees every call, those a later middleware answers or refuses without running the
tool included. It sees a call as its place in the stack does: the arguments as the
middleware before it passed them on, the `ToolMessage` the handler returned (the loop
sets `response_metadata["from_cache"]` on a result the loop's cache gave) or the error
it raised. A fallback (a stale result, a declared stub) is chosen after the stack, so
it shows in the call's record (`fallback`), not here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from agentloop.errors import ToolCallError, classify_tool_error

__all__ = ["AuditEntry", "AuditLog"]


@dataclass(frozen=True)
class AuditEntry:
    """One audited call."""

    call_id: str
    """The id of the call's `ToolCall`."""
    tool_name: str
    arguments: dict[str, Any]
    success: bool
    error: str
    error_type: str
    """Why it failed (`ErrorType`; `refused` when a middleware answered with an error
    `ToolMessage` without running the tool), or ""."""
    from_cache: bool
    duration_ms: float


class AuditLog(AgentMiddleware[Any, Any, Any]):
    """A middleware that remembers every tool call and how it ended (thread-safe).

    Pass it first in `create_tool_loop(middleware=[audit, ...])` and read `audit.entries`.

    Args:
        max_entries: Oldest entries are dropped past this bound.
    """

    def __init__(self, max_entries: int = 10_000) -> None:
        super().__init__()
        self.max_entries = max_entries
        self._entries: list[AuditEntry] = []
        self._lock = threading.Lock()

    @property
    def entries(self) -> list[AuditEntry]:
        """A copy of the audited calls, oldest first."""
        with self._lock:
            return list(self._entries)

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """Audit one call."""
        started = time.perf_counter()
        try:
            result = handler(request)
        except Exception as error:
            self._record(request, started, error)
            raise
        self._record(request, started, result)
        return result

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """Audit one call."""
        started = time.perf_counter()
        try:
            result = await handler(request)
        except Exception as error:
            self._record(request, started, error)
            raise
        self._record(request, started, result)
        return result

    def _record(self, request: ToolCallRequest, started: float, ended: Any) -> None:
        error, error_type, from_cache = "", "", False
        if isinstance(ended, Exception):
            error_type = classify_tool_error(ended)
            error = ended.message if isinstance(ended, ToolCallError) else str(ended)
        elif isinstance(ended, ToolMessage):
            from_cache = bool(ended.response_metadata.get("from_cache"))
            if ended.status == "error":
                error, error_type = str(ended.content), "refused"
        call = request.tool_call
        entry = AuditEntry(
            call_id=call.get("id") or "",
            tool_name=call["name"],
            arguments=dict(call["args"]),
            success=not error_type,
            error=error or (type(ended).__name__ if error_type else ""),
            error_type=error_type,
            from_cache=from_cache,
            duration_ms=(time.perf_counter() - started) * 1000,
        )
        with self._lock:
            self._entries.append(entry)
            del self._entries[: max(0, len(self._entries) - self.max_entries)]
