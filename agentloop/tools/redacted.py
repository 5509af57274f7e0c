"""Tools whose output and errors are redacted inside the tool run, before any callback.

LangChain reports a tool's output and its exception to the run's callbacks
(`on_tool_end`, `on_tool_error`: LangSmith, `astream_events`, any `BaseCallbackHandler`)
from inside `BaseTool.run`, before the loop sees them. The loop therefore invokes a copy
of each tool whose implementation returns its output redacted and raises its exception
redacted: the tool's own run stays where it was in the run tree, and every sink sees
what the records show.
"""

from __future__ import annotations

import asyncio
import copy
import functools
from collections.abc import Callable
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool, Tool
from langgraph.errors import GraphBubbleUp

from agentloop.errors import ToolCallError, classify_tool_error
from agentloop.planned_arguments import restored
from agentloop.redaction import Redact, UnreadableValueError, redact_data
from agentloop.tools.output import weigh
from agentloop.tools.results import CutText

__all__ = ["MIN_REDACTED_CHARS", "redacted_error", "redacted_output", "redacting"]

MIN_REDACTED_CHARS = 1_000_000
"""A text output longer than this (and than four times the tool's result budget) is cut
before it is redacted, so redaction costs a bounded time; the record keeps less anyway,
and its `truncated` flag and marker still count every character the tool returned."""


def _bounded(output: Any, max_chars: int) -> Any:
    if isinstance(output, str) and len(output) > max_chars:
        # a plain cut, no parsing: the pipeline truncates it later, counting every character
        return CutText(output[:max_chars], len(output))
    if isinstance(output, tuple) and len(output) == 2 and isinstance(output[0], str):
        return (_bounded(output[0], max_chars), output[1])  # content and artifact
    return output


def redacted_output(
    output: Any, redact: Redact, max_chars: int = MIN_REDACTED_CHARS, tool_name: str = ""
) -> Any:
    """A tool's output with secrets redacted by the one pass (`redact_data`).

    Text longer than `max_chars` is cut first (with the truncation marker). An object the
    pass walks keeps its type when it holds no secret; one it cannot walk is replaced by
    its serialized form, redacted (see `redact_data`).

    Raises:
        ToolCallError: The output can be neither walked nor serialized
            (`unserializable_result`).
    """
    if output is None or isinstance(output, bool | int | float):
        return output
    try:
        return redact_data(_bounded(output, max_chars), redact, strict=True)
    except UnreadableValueError as error:
        source = f"{tool_name} returned" if tool_name else "the result is"
        cause = f"{type(error.error).__name__}: {error.error}"
        msg = f"{source} a {error.type_name} that cannot be converted to JSON data ({cause})"
        raise ToolCallError("unserializable_result", redact(msg)) from None


def _chain_texts(error: BaseException) -> list[str]:
    texts: list[str] = []
    current: BaseException | None = error
    while current is not None and len(texts) < 16:
        try:
            texts.append(str(current))
        except Exception:
            texts.append(type(current).__name__)
        current = current.__cause__ or (
            None if current.__suppress_context__ else current.__context__
        )
    return texts


def redacted_error(error: Exception, redact: Redact) -> Exception:
    """The exception with secrets redacted from its message, attributes and chain.

    The same exception when it holds no secret; otherwise a copy of the same type with
    redacted arguments and no chained exceptions (or a `ToolCallError` of the same
    error type when the copy would still show a secret).
    """
    if isinstance(error, GraphBubbleUp):
        return error
    if all(redact(text) == text for text in _chain_texts(error)):
        return error
    try:
        clone = copy.copy(error)
        clone.args = redact_data(tuple(error.args), redact)
        for name, value in vars(error).items():
            if isinstance(value, str | list | dict | tuple):
                setattr(clone, name, redact_data(value, redact))
        clone.__cause__ = None
        clone.__context__ = None
        clone.__suppress_context__ = True
        shown = str(clone)
    except Exception:
        shown = None
    if shown is not None and redact(shown) == shown:
        return clone
    return ToolCallError(classify_tool_error(error), redact(str(error)))


def _sync(
    function: Callable[..., Any], redact: Redact, max_chars: int, name: str
) -> Callable[..., Any]:
    @functools.wraps(function)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            output = function(*args, **restored(kwargs))
        except Exception as error:
            safe = redacted_error(error, redact)
            if safe is error:
                raise
            raise safe from None
        return redacted_output(output, redact, max_chars, name)

    return run


def _async(
    function: Callable[..., Any], redact: Redact, max_chars: int, name: str
) -> Callable[..., Any]:
    @functools.wraps(function)
    async def run(*args: Any, **kwargs: Any) -> Any:
        try:
            output = await function(*args, **restored(kwargs))
        except Exception as error:
            safe = redacted_error(error, redact)
            if safe is error:
                raise
            raise safe from None
        if weigh(output) == "large":  # walking it would hold the event loop: a worker thread
            return await asyncio.to_thread(redacted_output, output, redact, max_chars, name)
        return redacted_output(output, redact, max_chars, name)

    return run


def redacting(tool: BaseTool, redact: Redact | None, max_result_chars: int = 0) -> BaseTool:
    """Return a copy of `tool` whose output and exceptions are redacted before callbacks.

    Args:
        tool: The tool (a `StructuredTool`, a `Tool` or any `BaseTool` subclass).
        redact: The loop's redaction hook (None: the tool is returned as it is).
        max_result_chars: The tool's result budget: text beyond four times as much (and
            beyond `MIN_REDACTED_CHARS`) is cut before redaction.
    """
    if redact is None:
        return tool
    cap = max(4 * max_result_chars, MIN_REDACTED_CHARS)
    if isinstance(tool, StructuredTool | Tool):
        update: dict[str, Any] = {}
        if tool.func is not None:
            update["func"] = _sync(tool.func, redact, cap, tool.name)
        if tool.coroutine is not None:
            update["coroutine"] = _async(tool.coroutine, redact, cap, tool.name)
        return tool.model_copy(update=update)
    cls = type(tool)
    methods: dict[str, Any] = {"_run": _sync(cls._run, redact, cap, tool.name)}
    if cls._arun is not BaseTool._arun:
        methods["_arun"] = _async(cls._arun, redact, cap, tool.name)
    subclass = type(cls.__name__, (cls,), methods)
    clone = tool.model_copy()
    try:
        clone.__class__ = subclass
    except TypeError:  # a tool class that cannot be extended: redacted after the call only
        return tool
    return clone
