"""Tools whose output and errors are redacted inside the tool run, before any callback.

LangChain reports a tool's output and its exception to the run's callbacks
(`on_tool_end`, `on_tool_error`: LangSmith, `astream_events`, any `BaseCallbackHandler`)
from inside `BaseTool.run`, before the loop sees them. The loop therefore invokes a copy
of each tool whose implementation returns its output redacted and raises its exception
redacted: the tool's own run stays where it was in the run tree, and every sink sees
what the records show. An exception that holds a secret (in its text, its arguments,
its attributes or the exceptions chained to it) is raised as a redacted copy
(`redacted_error`), so a callback that reads `error.response_body` finds no secret.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import types
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool, Tool
from langgraph.errors import GraphBubbleUp

from agentloop.errors import ToolCallError, classify_tool_error
from agentloop.governance.output import weigh
from agentloop.governance.planned_arguments import restored
from agentloop.governance.results import MAX_DEPTH, CutText
from agentloop.observability.redaction import Redact, UnreadableValueError, redact_data

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


_MAX_SCANNED = 10_000
"""Values `_holds_secret` reads at most; past them it assumes a secret is there."""
_MAX_SCANNED_BYTES = 1_000_000
_NOT_READ = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType)
"""Values whose attributes are code, not data: only their `repr` is read."""


def _holds_secret(value: Any, redact: Redact) -> bool:
    """Tell whether any text reachable from `value` holds a secret.

    Reads strings, bytes, the keys and members of containers, and of any other object
    its `repr` and its attributes (`__dict__`; for an exception also its arguments, its
    text and the exceptions chained to it), without calling anything else on it. A value
    too large or too deep to read (`_MAX_SCANNED` values, 50 levels) or whose reading
    fails is assumed to hold one.
    """
    stack: list[tuple[Any, int]] = [(value, 0)]
    seen: set[int] = set()
    scanned = 0
    while stack:
        item, depth = stack.pop()
        scanned += 1
        if scanned > _MAX_SCANNED or depth > MAX_DEPTH:
            return True
        if isinstance(item, str):
            text = str.__str__(item)
            if redact(text) != text:
                return True
            continue
        if item is None or isinstance(item, bool | int | float | complex):
            continue
        if id(item) in seen:
            continue
        seen.add(id(item))
        try:
            if isinstance(item, bytes | bytearray | memoryview):
                if len(item) > _MAX_SCANNED_BYTES:
                    return True
                stack.append((bytes(item).decode("utf-8", "replace"), depth))
            elif isinstance(item, Mapping):
                stack.extend((member, depth + 1) for member in (*item.keys(), *item.values()))
            elif isinstance(item, list | tuple | set | frozenset | deque):
                stack.extend((member, depth + 1) for member in item)
            else:
                stack.extend(_parts(item, depth))
        except Exception:  # an object that cannot be read may hide one
            return True
    return False


def _parts(item: Any, depth: int) -> list[tuple[Any, int]]:
    """What `_holds_secret` reads of an object other than text, a number or a container."""
    parts: list[tuple[Any, int]] = [(repr(item), depth)]
    if isinstance(item, _NOT_READ):
        return parts
    if isinstance(item, BaseException):
        parts += [(str(item), depth), (item.args, depth + 1)]
        parts += [(chained, depth + 1) for chained in (item.__cause__, item.__context__)]
    fields = getattr(item, "__dict__", None)
    if isinstance(fields, Mapping):
        parts.append((fields, depth + 1))
    return parts


def _redacted(value: Any, redact: Redact) -> Any:
    """The value as it is when it holds no secret, else redacted by the one pass."""
    return redact_data(value, redact) if _holds_secret(value, redact) else value


def redacted_error(error: Exception, redact: Redact) -> Exception:
    """The exception with secrets redacted from its text, arguments, attributes and chain.

    The same exception when none of them holds a secret (`_holds_secret`). Otherwise a
    copy of the same type: each argument and attribute that holds a secret is redacted
    by `redact_data` (an object known only by its `repr` becomes that text, redacted),
    the others are the same objects, and nothing is chained to it (no `__cause__`,
    `__context__` or traceback of the tool's). The tool's own exception is not changed.
    When no such copy can be made, or it would still show a secret, a `ToolCallError`
    of the same error type, with the redacted text, stands in for it.
    """
    if isinstance(error, GraphBubbleUp) or not _holds_secret(error, redact):
        return error
    try:
        clone = _copy(error)
        clone.args = tuple(_redacted(argument, redact) for argument in error.args)
        fields = vars(clone)
        for name, value in vars(error).items():
            fields[name] = _redacted(value, redact)
        clone.__cause__ = None
        clone.__context__ = None
        clone.__suppress_context__ = True
        clone.__traceback__ = None
        if not _holds_secret(clone, redact):
            return clone
    except Exception:
        pass
    return ToolCallError(classify_tool_error(error), redact(str(error)))


def _copy(error: Exception) -> Exception:
    """A copy of an exception: as `copy.copy` makes it, else without calling `__init__`."""
    try:
        return copy.copy(error)
    except Exception:
        clone: Exception = type(error).__new__(type(error), *error.args)
        return clone


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
        else:
            return redacted_output(output, redact, max_chars, name)
        raise safe  # outside the handler: its context is not the tool's own exception

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
        else:
            if weigh(output) == "large":  # walking it would hold the event loop: a thread
                return await asyncio.to_thread(redacted_output, output, redact, max_chars, name)
            return redacted_output(output, redact, max_chars, name)
        raise safe  # outside the handler: its context is not the tool's own exception

    return run


def redacting(tool: BaseTool, redact: Redact | None, max_result_chars: int = 0) -> BaseTool:
    """Return a copy of `tool` whose output and exceptions are redacted before callbacks.

    An exception that holds a secret is raised as a redacted copy of the same type
    (`redacted_error`): callbacks, events, records and the app's `wrap_tool_call`
    middleware see the copy; the exception the tool raised is left as it was.

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
