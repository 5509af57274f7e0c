"""One tool call's link between the loop's task and the toolset's session thread.

The MCP sessions live on the toolset's own event loop; a tool call runs on the loop's.
While the call is in flight, its server may report progress or ask a person something
(elicitation). `CallBridge` carries both across:

- progress becomes a `tool_progress` event on LangGraph's custom stream, and a log
  message the server sends meanwhile an `mcp_log` event;
- an elicitation becomes a LangGraph `interrupt(...)` raised in the tool's task, whose
  value holds the server's message and requested schema. The server is told "cancel"
  so its call ends, and the run pauses. Resumed with
  `Command(resume={"action": "accept" | "decline" | "cancel", "content": {...}})`,
  the call is sent again and the server's question is answered with that value.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import logging
from collections.abc import Awaitable
from typing import Any, TypeVar

from langchain_core.language_models import BaseChatModel
from langgraph.config import get_stream_writer
from langgraph.types import interrupt
from mcp import types
from pydantic import ValidationError

from agentloop.durability import current_checkpointer
from agentloop.errors import ToolCallError
from agentloop.events import Emit, LoopEvent, McpLog, ToolProgress, make_emitter, null_emit
from agentloop.mcp.client import CallHooks
from agentloop.redaction import Redact

__all__ = ["ELICITATION_INTERRUPT", "CallBridge", "elicit_result"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

ELICITATION_INTERRUPT = "mcp_elicitation"
"""The `type` of the value of an elicitation's interrupt."""
CANCEL_GRACE_S = 10.0
"""How long a call told "cancel" may take to end before it is cancelled here."""
_ACTIONS = ("accept", "decline", "cancel")


def elicit_result(reply: Any) -> types.ElicitResult:
    """Turn a resume value into the answer to an elicitation.

    Args:
        reply: `{"action": "accept" | "decline" | "cancel", "content": {...}}` (content
            only with "accept"), or just the action as a string.

    Raises:
        ValueError: The value has another shape, or content the MCP spec does not allow.
    """
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
    try:
        return types.ElicitResult(action=action, content=content)
    except ValidationError as error:
        problem = "; ".join(e["msg"] for e in error.errors())
        msg = f"the content must be flat fields of text, numbers or booleans: {problem}"
        raise ValueError(msg) from None


def _stream_emitter(loop_name: str, redact: Redact | None) -> Emit:
    try:
        writer = get_stream_writer()
    except RuntimeError:  # not inside a graph run
        return null_emit
    return make_emitter(writer, loop_name=loop_name, redact=redact)


class CallBridge:
    """Progress and elicitation of one tool call, carried to the task that awaits it.

    Create it in the task that runs the tool; its `hooks` are called on the session's
    event loop.

    Args:
        server: The server's name.
        tool: The tool's name.
        call_id: The loop's id of the call ("" outside a loop).
        read_only: Whether the tool only reads.
        loop_name: The loop's name, for events.
        redact: Applied to event text.
        model: Answers the server's sampling requests during the call (the loop's model).
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
    ) -> None:
        self.server, self.tool, self.call_id = server, tool, call_id
        self._loop = asyncio.get_running_loop()
        self._context = contextvars.copy_context()  # LangGraph's writer reads its config
        self._emit = _stream_emitter(loop_name, redact)
        self._questions: asyncio.Queue[
            tuple[types.ElicitRequestParams, concurrent.futures.Future[types.ElicitResult]]
        ] = asyncio.Queue()
        self.hooks = CallHooks(
            on_progress=self._progress,
            on_elicitation=self._elicit,
            read_only=read_only,
            on_log=self._log,
            model=model,
        )

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
        answer: concurrent.futures.Future[types.ElicitResult] = concurrent.futures.Future()
        self._loop.call_soon_threadsafe(self._questions.put_nowait, (params, answer))
        return await asyncio.wrap_future(answer)

    # -- in the tool's task ----------------------------------------------------------------

    async def run(self, call: Awaitable[T]) -> T:
        """Await the call, answering its server's questions on the way.

        Raises:
            GraphInterrupt: The server asked a person something (the run pauses).
            ToolCallError: The resume value is not a valid answer.
        """
        task = asyncio.ensure_future(call)
        question: asyncio.Future[Any] | None = None
        try:
            while True:
                question = asyncio.ensure_future(self._questions.get())
                await asyncio.wait({task, question}, return_when=asyncio.FIRST_COMPLETED)
                if task.done():
                    return task.result()
                params, answer = question.result()
                try:
                    answer.set_result(self._ask(params))
                except BaseException:
                    answer.set_result(types.ElicitResult(action="cancel"))
                    await self._finish(task)
                    raise
        finally:
            if question is not None and not question.done():
                question.cancel()  # a pending `get` must not outlive the call
                await asyncio.wait({question})
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task

    @staticmethod
    async def _finish(task: asyncio.Future[Any]) -> None:
        """Let a call told "cancel" end, so its server is not left waiting."""
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(asyncio.shield(task), CANCEL_GRACE_S)

    def _ask(self, params: types.ElicitRequestParams) -> types.ElicitResult:
        if current_checkpointer() is None:
            logger.warning(
                "MCP server %r asked for input during %r; declined: the run has no "
                "checkpointer, so it cannot pause for an answer",
                self.server,
                self.tool,
            )
            return types.ElicitResult(action="decline")
        value: dict[str, Any] = {
            "type": ELICITATION_INTERRUPT,
            "server": self.server,
            "tool": self.tool,
            "call_id": self.call_id,
            "mode": getattr(params, "mode", "form"),
            "message": params.message,
        }
        if isinstance(params, types.ElicitRequestURLParams):
            value["url"] = params.url
        else:
            value["requested_schema"] = params.requestedSchema
        reply = interrupt(value)
        try:
            return elicit_result(reply)
        except ValueError as error:
            message = f"unusable answer to {self.server!r}: {error}"
            raise ToolCallError("invalid_arguments", message) from None
