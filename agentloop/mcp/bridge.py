"""One tool call's link between the loop's task and the toolset's session thread.

The MCP sessions live on the toolset's own event loop; a tool call runs on the loop's.
While the call is in flight, its server may report progress or ask a person something
(elicitation). `CallBridge` carries both across:

- progress becomes a `tool_progress` event on LangGraph's custom stream, and a log
  message the server sends meanwhile an `mcp_log` event;
- an elicitation is answered while the call is in flight, never by sending the call
  again: by the app's handler (`MCPToolset(elicitation_handler=...)`), or else by a
  LangGraph `interrupt(...)` raised in the tool's task, whose value holds the server's
  message and requested schema. The run pauses with the call still waiting on the
  server; the toolset keeps it (`Suspensions`, by the call's thread and stable key).
  Resumed with `Command(resume={"action": "accept" | "decline" | "cancel",
  "content": {...}})`, the tool's task finds that same call, answers the server's
  request with the value, and awaits the call's result. A resume that finds no such
  call (the process that held it has ended) reports `unknown_outcome` for a call with
  side effects instead of sending it again.

An accepted form's fields the person left out get the `default` the requested schema
gives them (SEP-1034).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import inspect
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from langchain_core.language_models import BaseChatModel
from langgraph.config import get_stream_writer
from langgraph.errors import GraphBubbleUp
from langgraph.types import interrupt
from pydantic import ValidationError

from agentloop.durability import current_checkpointer
from agentloop.errors import ToolCallError
from agentloop.mcp.client import CallHooks
from agentloop.mcp.pools import Started, mark_retrieved
from agentloop.mcp.sdk import types, wire
from agentloop.observability.events import (
    Emit,
    LoopEvent,
    McpLog,
    ToolProgress,
    make_emitter,
    null_emit,
)
from agentloop.observability.redaction import Redact, redact_data

__all__ = [
    "ELICITATION_INTERRUPT",
    "CallBridge",
    "ElicitationHandler",
    "Suspensions",
    "elicit_result",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

ELICITATION_INTERRUPT = "mcp_elicitation"
"""The `type` of the value of an elicitation's interrupt (and of a handler's request)."""
CANCEL_GRACE_S = 10.0
"""How long a call told "cancel" may take to end before it is cancelled here."""
_ACTIONS = ("accept", "decline", "cancel")

ElicitationHandler = Callable[[dict[str, Any]], Any]
"""Answers a server's question during a call: given the same dict an interrupt's value
holds, returns (or, when async, resolves to) what a resume would give:
`{"action": ..., "content": {...}}`, just the action, or an `mcp.types.ElicitResult`."""


def elicit_result(reply: Any, schema: dict[str, Any] | None = None) -> types.ElicitResult:
    """Turn a resume value (or a handler's reply) into the answer to an elicitation.

    Args:
        reply: `{"action": "accept" | "decline" | "cancel", "content": {...}}` (content
            only with "accept"), just the action as a string, or an `ElicitResult`.
        schema: The requested schema: an accepted answer gets the `default` of each
            property it leaves out (SEP-1034).

    Raises:
        ValueError: The value has another shape, or content the MCP spec does not allow.
    """
    if isinstance(reply, types.ElicitResult):
        reply = reply.model_dump(exclude_none=True)
    if isinstance(reply, str):
        reply = {"action": reply}
    action = reply.get("action") if isinstance(reply, dict) else None
    if action not in _ACTIONS:
        msg = (
            "an elicitation is answered with {'action': 'accept' | 'decline' | 'cancel', "
            f"'content': {{...}}}}, got {reply!r}"
        )
        raise ValueError(msg)
    content = reply.get("content") if action == "accept" else None
    if action == "accept" and schema is not None:
        content = _with_defaults(content, schema)
    try:
        return types.ElicitResult(action=action, content=content)
    except ValidationError as error:
        problem = "; ".join(e["msg"] for e in error.errors())
        msg = f"the content must be flat fields of text, numbers or booleans: {problem}"
        raise ValueError(msg) from None


def _with_defaults(content: Any, schema: dict[str, Any]) -> Any:
    """An accepted form's content, with the schema's defaults for the fields left out."""
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not (content is None or isinstance(content, dict)):
        return content
    filled = dict(content or {})
    for name, field in properties.items():
        if name not in filled and isinstance(field, dict) and "default" in field:
            filled[name] = field["default"]
    return filled if filled or content is not None else None


def _stream_emitter(loop_name: str, redact: Redact | None) -> Emit:
    try:
        writer = get_stream_writer()
    except RuntimeError:  # not inside a graph run
        return null_emit
    return make_emitter(writer, loop_name=loop_name, redact=redact)


async def _handle(handler: ElicitationHandler, request: dict[str, Any]) -> Any:
    """Call an app's handler: an async one on this loop, a sync one on a worker thread."""
    if inspect.iscoroutinefunction(handler):
        return await handler(request)
    reply = await asyncio.to_thread(handler, request)
    return await reply if inspect.isawaitable(reply) else reply


class CallBridge:
    """Progress and elicitation of one tool call, carried to the task that awaits it.

    Create it in the task that runs the tool; its `hooks` are called on the session's
    event loop. A call suspended by an interrupt keeps its bridge: the resumed task
    attaches to it again (`run` with the same bridge).

    Args:
        server: The server's name.
        tool: The tool's name.
        call_id: The loop's id of the call ("" outside a loop).
        read_only: Whether the tool only reads.
        loop_name: The loop's name, for events.
        redact: Applied to event text, and to the question a handler or a person is asked
            (the interrupt's value, which the checkpoint keeps): the server may quote a
            secret in it.
        model: Answers the server's sampling requests during the call (the loop's model).
        handler: Answers the server's questions (else a person, through an interrupt).
    """

    def __init__(
        self,
        *,
        server: str,
        tool: str,
        call_id: str = "",
        read_only: bool = False,
        loop_name: str = "",
        redact: Redact | None = None,
        model: BaseChatModel | None = None,
        handler: ElicitationHandler | None = None,
    ) -> None:
        self.server, self.tool, self.call_id = server, tool, call_id
        self.read_only = read_only
        self._loop_name, self._redact = loop_name, redact
        self._handler = handler
        self._lock = threading.Lock()
        self._question: tuple[types.ElicitRequestParams, concurrent.futures.Future[Any]] | None
        self._question = None
        self._asked: list[dict[str, Any]] = []
        """The questions a person answered so far (each resume replays their interrupts)."""
        self.hooks = CallHooks(
            on_progress=self._progress,
            on_elicitation=self._elicit,
            read_only=read_only,
            on_log=self._log,
            model=model,
        )
        self._attach()

    def _attach(self) -> None:
        """Send events and questions to the task running now (a resume's, after a pause)."""
        emit = _stream_emitter(self._loop_name, self._redact)
        with self._lock:
            self._loop = asyncio.get_running_loop()
            self._context = contextvars.copy_context()  # LangGraph's writer reads its config
            self._emit = emit
            self._wake = asyncio.Event()
            if self._question is not None:
                self._wake.set()

    # -- on the session's loop -------------------------------------------------------------

    def _post(self, event: LoopEvent) -> None:
        """Emit an event in the tool's task (dropped if that loop has ended meanwhile)."""
        with contextlib.suppress(RuntimeError):  # "Event loop is closed"
            self._loop.call_soon_threadsafe(self._emit, event, context=self._context)

    def _progress(self, progress: float, total: float | None, message: str | None) -> None:
        self._post(
            ToolProgress(
                call_id=self.call_id,
                tool_name=self.tool,
                server=self.server,
                progress=progress,
                total=total,
                message=message,
            )
        )

    def _log(self, params: types.LoggingMessageNotificationParams) -> None:
        self._post(
            McpLog(
                call_id=self.call_id,
                tool_name=self.tool,
                server=self.server,
                level=params.level,
                logger=params.logger,
                data=params.data,
            )
        )

    async def _elicit(self, params: types.ElicitRequestParams) -> types.ElicitResult:
        if self._handler is not None:
            return await self._ask_handler(self._handler, params)
        answer: concurrent.futures.Future[Any] = concurrent.futures.Future()
        with self._lock:
            self._question = (params, answer)
            loop, wake = self._loop, self._wake
        with contextlib.suppress(RuntimeError):  # the task's loop ended: a resume wakes it
            loop.call_soon_threadsafe(wake.set)
        try:
            result: types.ElicitResult = await asyncio.wrap_future(answer)
            return result
        finally:
            with self._lock:
                if self._question is not None and self._question[1] is answer:
                    self._question = None

    async def _ask_handler(
        self, handler: ElicitationHandler, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        try:
            reply = await _handle(handler, self.request(params))
            return elicit_result(reply, _schema(params))
        except Exception as error:
            logger.warning(
                "the elicitation handler failed for %r of MCP server %r; answered cancel: %s",
                self.tool,
                self.server,
                error,
            )
            return types.ElicitResult(action="cancel")

    def request(self, params: types.ElicitRequestParams) -> dict[str, Any]:
        """What a person (or a handler) is asked: the interrupt's value, redacted."""
        asked = wire(params)
        value: dict[str, Any] = {
            "type": ELICITATION_INTERRUPT,
            "server": self.server,
            "tool": self.tool,
            "call_id": self.call_id,
            "mode": asked.get("mode", "form"),
            "message": asked.get("message", ""),
        }
        if isinstance(params, types.ElicitRequestURLParams):
            value["url"] = asked.get("url")
        else:
            value["requested_schema"] = asked.get("requestedSchema")
        redacted: dict[str, Any] = redact_data(value, self._redact) if self._redact else value
        return redacted

    def cancel_question(self) -> None:
        """Answer a pending question "cancel" (the call was given up while it waited)."""
        with self._lock:
            question, self._question = self._question, None
        if question is not None and not question[1].done():
            question[1].set_result(types.ElicitResult(action="cancel"))

    # -- in the tool's task ----------------------------------------------------------------

    async def run(
        self,
        call: Started[T],
        *,
        on_pause: Callable[[], object] = lambda: None,
    ) -> T:
        """Await the call, answering its server's questions on the way.

        Args:
            call: The call, running on the toolset's loop.
            on_pause: Called when the run pauses for a person's answer, before the
                interrupt propagates: the call stays in flight (the caller keeps it for
                the resume); otherwise the call is cancelled when this task stops.

        Raises:
            GraphInterrupt: The server asked a person something (the run pauses).
            ToolCallError: The resume value is not a valid answer.
        """
        self._attach()
        for asked in self._asked:  # a resumed task meets its earlier interrupts again
            interrupt(asked)
        done = asyncio.wrap_future(call.future)
        done.add_done_callback(mark_retrieved)  # also when this task is gone before it ends
        paused = False
        try:
            while True:
                wake: asyncio.Future[Any] = asyncio.ensure_future(self._wake.wait())
                waiting: set[asyncio.Future[Any]] = {done, wake}
                try:
                    await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    if not wake.done():
                        wake.cancel()
                        await asyncio.wait({wake})
                if done.done():
                    return done.result()
                self._wake.clear()
                with self._lock:
                    question = self._question
                if question is None or question[1].done():
                    continue
                try:
                    answer = self._ask(question[0])
                except GraphBubbleUp:
                    paused = True
                    on_pause()
                    raise
                except BaseException:
                    self.cancel_question()
                    await _finish(done)
                    raise
                question[1].set_result(answer)
        finally:
            if not paused:
                self.cancel_question()  # nobody will answer it now
                if not done.done() and call.stop():  # cancelled on the server too
                    await asyncio.wait({done})

    def _ask(self, params: types.ElicitRequestParams) -> types.ElicitResult:
        if current_checkpointer() is None:
            logger.warning(
                "MCP server %r asked for input during %r; declined: the run has no "
                "checkpointer, so it cannot pause for an answer",
                self.server,
                self.tool,
            )
            return types.ElicitResult(action="decline")
        value = self.request(params)
        reply = interrupt(value)
        self._asked.append(value)
        try:
            return elicit_result(reply, _schema(params))
        except ValueError as error:
            message = f"unusable answer to {self.server!r}: {error}"
            raise ToolCallError("invalid_arguments", message) from None


def _schema(params: types.ElicitRequestParams) -> dict[str, Any] | None:
    if isinstance(params, types.ElicitRequestURLParams):
        return None
    schema = wire(params).get("requestedSchema")
    return schema if isinstance(schema, dict) else None


async def _finish(done: asyncio.Future[Any]) -> None:
    """Let a call told "cancel" end, so its server is not left waiting."""
    with contextlib.suppress(BaseException):
        await asyncio.wait_for(asyncio.shield(done), CANCEL_GRACE_S)


@dataclass
class Suspended:
    """A call waiting on its server for a person's answer while its run is paused."""

    bridge: CallBridge
    call: Started[Any]


class Suspensions:
    """The calls of a toolset whose runs paused on an elicitation, by thread and call key.

    A call waits at most `expire_s` for its run to resume: then its question is
    answered "cancel" and it is forgotten (a later resume reports `unknown_outcome`).

    Args:
        expire_s: How long a paused call waits for its resume.
        schedule: Calls a function after a delay (on the toolset's loop).
    """

    def __init__(
        self, expire_s: float, schedule: Callable[[float, Callable[[], None]], None]
    ) -> None:
        self.expire_s = expire_s
        self._schedule = schedule
        self._calls: dict[tuple[str, str], Suspended] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._calls)

    def keep(self, key: tuple[str, str], call: Suspended) -> None:
        """Keep a paused call for its resume."""
        with self._lock:
            self._calls[key] = call
        self._schedule(self.expire_s, lambda: self._expire(key, call))

    def take(self, key: tuple[str, str]) -> Suspended | None:
        """The paused call of a resumed task, or None (never paused, or given up)."""
        with self._lock:
            return self._calls.pop(key, None)

    def _expire(self, key: tuple[str, str], call: Suspended) -> None:
        with self._lock:
            if self._calls.get(key) is not call:
                return  # resumed meanwhile
            del self._calls[key]
        call.bridge.cancel_question()
        logger.warning(
            "a call to %r of MCP server %r waited %gs for its run to resume; its "
            "question was answered cancel",
            call.bridge.tool,
            call.bridge.server,
            self.expire_s,
        )
