"""The client side of MCP: what a server may ask of the loop while a tool runs.

- progress notifications reach the call that asked for them (`CallHooks.on_progress`);
- sampling requests are answered by the model of the loop whose call they belong to
  (known as an elicitation's call is, below; else the call that started first), else the
  toolset's own, when the server's config allows it (`"sampling": true`), within the
  request's limits;
- elicitation requests reach the call they belong to, which answers them in flight: by
  the app's handler, or a LangGraph `interrupt(...)` a person answers. The call is known
  by its request id: over streamable HTTP the server sends its question on that call's
  response stream (the transport names the call in the question's `_meta`,
  `RELATED_REQUEST_META`); a server may also echo the call's `progressToken` in the
  question's `_meta` (the only way over stdio). A question that names no call goes to
  the one call that can answer it, and is declined when there are several;
- roots are declared from the server's config;
- the server's log messages go to its own Python logger, and a `tools/list_changed` or
  `resources/list_changed` notification makes the toolset fetch its lists again.

The mcp SDK only declares a capability when its callback is given, so each server gets
the callbacks its config allows. On protocol 2026-07-28 a server asks its questions by
answering a call "input required" (multi-round requests): they reach these same
callbacks, named by that call (`sdk.call_tool`). What the server sends is read as wire
data (`sdk.wire`), the same on both SDK majors.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from agentloop.base.messages import message_text
from agentloop.mcp.config import MCPServerSpec
from agentloop.mcp.output import ServerOutput
from agentloop.mcp.sdk import RELATED_REQUEST_META, ClientSession, request_meta, types, wire
from agentloop.observability.redaction import Redact, Redactor

__all__ = [
    "RELATED_REQUEST_META",
    "CallHooks",
    "ClientHandlers",
    "server_logger",
]

logger = logging.getLogger(__name__)

ProgressHook = Callable[[float, float | None, str | None], None]
LogHook = Callable[[types.LoggingMessageNotificationParams], None]
ElicitationHook = Callable[[types.ElicitRequestParams], Awaitable[types.ElicitResult]]


def server_logger(name: str) -> logging.Logger:
    """The logger of one server's stderr and log messages: `agentloop.mcp.server.<name>`."""
    return logging.getLogger(f"agentloop.mcp.server.{name}")


@dataclass
class CallHooks:
    """What one tool call wants to hear from its server while it runs."""

    on_progress: ProgressHook | None = None
    on_elicitation: ElicitationHook | None = None
    read_only: bool = True
    """Whether the tool only reads (an elicitation is attributed to a tool that writes)."""
    on_log: LogHook | None = None
    """Hears the server's log messages while the call runs."""
    model: BaseChatModel | None = None
    """Answers the server's sampling requests while the call runs (the loop's model)."""


_LIST_CHANGED = (types.ToolListChangedNotification, types.ResourceListChangedNotification)

_LOG_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}


class ClientHandlers:
    """The callbacks of one server's sessions.

    Args:
        spec: The server.
        sampler: Returns the model that answers sampling requests made while no call with
            a model of its own runs (None: refuse them).
        on_tools_changed: Called with the server's name on `tools/list_changed` and
            `resources/list_changed`.
        redact: Applied to the stderr lines failure reasons quote (default: the
            server's own secrets and secret-looking environment variables).
    """

    def __init__(
        self,
        spec: MCPServerSpec,
        sampler: Callable[[], BaseChatModel | None],
        on_tools_changed: Callable[[str], None],
        *,
        redact: Redact | None = None,
    ) -> None:
        self.spec = spec
        self.sampler = sampler
        self.on_tools_changed = on_tools_changed
        self.logger = server_logger(spec.name)
        self.output = ServerOutput(self.logger, redact or Redactor(spec.secrets))
        """The server's last stderr lines, quoted by failure reasons."""
        self.in_flight: dict[int, CallHooks] = {}
        self._sent: dict[int, tuple[ClientSession, str]] = {}
        """Where each call in flight sent its request: the session, and the request's id."""
        self._next = 0

    def register(self, hooks: CallHooks) -> int:
        """Note a call in flight; returns its token for `sending` and `unregister`."""
        self._next += 1
        self.in_flight[self._next] = hooks
        return self._next

    def sending(self, token: int, session: ClientSession, request_id: int | str) -> None:
        """The call's request is being sent on `session` with this id (again, on a new one)."""
        self._sent[token] = (session, str(request_id))

    def unregister(self, token: int) -> None:
        """The call ended."""
        self.in_flight.pop(token, None)
        self._sent.pop(token, None)

    def _call_of(self, context: Any) -> CallHooks | None:
        """The call a request of the server belongs to, when the request names it."""
        meta = request_meta(context)
        named = meta.get(RELATED_REQUEST_META, meta.get("progressToken"))
        if named is None:
            return None
        session = getattr(context, "session", None)
        for token, sent in self._sent.items():
            if sent == (session, str(named)):
                return self.in_flight.get(token)
        return None

    def session_kwargs(self) -> dict[str, Any]:
        """The `ClientSession` keyword arguments for this server."""
        kwargs: dict[str, Any] = {
            "logging_callback": self._log,
            "message_handler": self._message,
        }
        if self.spec.sampling:
            kwargs["sampling_callback"] = self._sample
        if self.spec.elicitation:
            kwargs["elicitation_callback"] = self._elicit
        if self.spec.roots:
            kwargs["list_roots_callback"] = self._roots
        return kwargs

    async def _log(self, params: types.LoggingMessageNotificationParams) -> None:
        level = _LOG_LEVELS.get(str(params.level), logging.INFO)
        source = f"{params.logger}: " if params.logger else ""
        self.logger.log(level, "%s%s", source, params.data)
        listening = [hooks.on_log for hooks in self.in_flight.values() if hooks.on_log]
        if listening:  # the call that started first hears it (an `mcp_log` event of its run)
            listening[0](params)

    async def _message(self, message: Any) -> None:
        if isinstance(message, Exception):
            self.logger.debug("unreadable message from the server: %s", message)
            return
        root = getattr(message, "root", message)  # mcp 1.x wraps it, 2.x does not
        if isinstance(root, _LIST_CHANGED):
            self.on_tools_changed(self.spec.name)

    async def _roots(self, context: Any) -> types.ListRootsResult:
        roots = [
            types.Root.model_validate({"uri": uri, "name": uri.rsplit("/", 1)[-1] or uri})
            for uri in self.spec.roots
        ]
        return types.ListRootsResult(roots=roots)

    async def _elicit(
        self, context: Any, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        call = self._call_of(context)
        if call is not None:
            candidates = [call] if call.on_elicitation is not None else []
        else:  # the question names no call: the one that can answer it, if only one can
            asking = [hooks for hooks in self.in_flight.values() if hooks.on_elicitation]
            writers = [hooks for hooks in asking if not hooks.read_only]
            candidates = writers if len(asking) > 1 and writers else asking
        if len(candidates) != 1:
            self.logger.warning(
                "declined an elicitation request: %s",
                "the call it belongs to takes no questions"
                if call is not None
                else f"it names no call, and {len(candidates)} calls were running on the server",
            )
            return types.ElicitResult(action="decline")
        hook = candidates[0].on_elicitation
        assert hook is not None
        return await hook(params)

    async def _sample(
        self, context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.ErrorData:
        call = self._call_of(context)
        if call is not None:  # the call the request belongs to
            model = call.model or self.sampler()
        else:  # else the call that started first
            calling = [hooks.model for hooks in self.in_flight.values() if hooks.model]
            model = calling[0] if calling else self.sampler()
        if model is None:
            return types.ErrorData(code=types.INVALID_REQUEST, message="no model to sample with")
        asked = wire(params)
        messages: list[BaseMessage] = []
        if asked.get("systemPrompt"):
            messages.append(SystemMessage(asked["systemPrompt"]))
        for message in asked.get("messages", []):
            text = _sampling_text(message.get("content"))
            user = message.get("role") == "user"
            messages.append(HumanMessage(text) if user else AIMessage(text))
        options: dict[str, Any] = {"max_tokens": asked.get("maxTokens")}
        if asked.get("stopSequences"):
            options["stop"] = list(asked["stopSequences"])
        if asked.get("temperature") is not None:
            options["temperature"] = asked["temperature"]
        try:
            reply = await _bound(model, options).ainvoke(messages)
        except Exception as error:
            self.logger.warning("sampling failed: %s", error)
            return types.ErrorData(code=types.INTERNAL_ERROR, message=f"sampling failed: {error}")
        stop = (reply.response_metadata or {}).get("finish_reason") or ""
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=message_text(reply)),
            model=str((reply.response_metadata or {}).get("model_name") or type(model).__name__),
            stopReason="maxTokens" if stop in ("length", "max_tokens") else "endTurn",
        )


def _sampling_text(content: Any) -> str:
    blocks = content if isinstance(content, list) else [content]
    texts = [
        block["text"] for block in blocks if isinstance(block, dict) and block.get("type") == "text"
    ]
    skipped = len(blocks) - len(texts)
    return "\n".join(texts) + (f"\n[{skipped} non-text content blocks omitted]" if skipped else "")


def _bound(model: BaseChatModel, options: dict[str, Any]) -> Any:
    """The model with the request's limits, dropping the ones it does not accept."""
    try:
        return model.bind(**options)
    except (TypeError, ValueError):
        return model.bind(max_tokens=options["max_tokens"])
