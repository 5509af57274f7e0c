"""The arguments a planner wrote, for its tools, where the redact hook changed them.

Everything the loop writes to state is redacted (`GovernanceOptions(redact=...)`), the
plan's commands included, so a checkpoint never holds a secret. A tool, though, gets the
arguments the planner wrote, as under `create_agent`: the `plan` node keeps the planner's
own arguments of each command the hook changed here, in the memory of the compiled
loop, and the tool's function gets them at the last moment (`restored`), inside the
tool's redacted run, so callbacks, records, events and the ledger still see the
redacted ones. They are kept under the run's invocation (`RunBook.invocation`, which
two runs never share) and the call id, and released when the run ends. A call
streaming dispatch starts before the plan ends is prepared from the command as the
state will keep it, and gets the planner's own arguments the same way
(`own_arguments`), so `execute` adopts it as the call it prepares.

Memory is not durable: when the run resumes in another process, or the call waits
longer than `KEPT_FOR_S` (an interrupt before it), the planner's own arguments are gone
and the call is refused (`arguments_unavailable`) rather than run with the redacted ones.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Callable, Sequence
from typing import Any, cast

from cachetools import TTLCache
from pydantic import BaseModel

from agentloop.base.call_shapes import PreparedCall, ToolCommand
from agentloop.governance.call_id import kept_under

__all__ = [
    "KEPT_FOR_S",
    "NOTHING_PLANNED",
    "PlannedArguments",
    "own_arguments",
    "planned",
    "restored",
    "unavailable_message",
]

KEPT_FOR_S = 900.0
"""How long the planner's own arguments are kept for a call that has not run yet."""

_KEPT_CALLS = 4096
"""At most this many calls' arguments are kept (the oldest go first)."""

Planned = tuple[dict[str, Any], dict[str, Any]]
"""A call's arguments as the planner wrote them, and as the state keeps them."""

_PLANNED: contextvars.ContextVar[Planned | None] = contextvars.ContextVar(
    "agentloop_planned_arguments", default=None
)


def unavailable_message(tool_name: str) -> str:
    """What the planner reads when a call's own arguments are gone."""
    return (
        f"The arguments of this {tool_name} call held text the redact hook removes, and "
        "the loop keeps the planner's own only in memory: they were gone when the call "
        "was to run (the run resumed in another process, or waited too long), so it was "
        "not run with the redacted ones. Plan it again if it is still wanted."
    )


class PlannedArguments:
    """The planner's own arguments of the commands the redact hook changed (thread-safe).

    One per compiled loop: `keep` in the `plan` node, `take` in the call's task.
    """

    def __init__(self, kept_for_s: float = KEPT_FOR_S) -> None:
        """Keep each call's arguments for `kept_for_s` seconds at most."""
        self._kept: TTLCache[tuple[str, str], Planned] = TTLCache(_KEPT_CALLS, kept_for_s)
        self._lock = threading.Lock()

    def keep(
        self,
        invocation: str,
        call_id: Callable[[int], str],
        written: Sequence[ToolCommand],
        kept: Sequence[ToolCommand],
        clean: Callable[[dict[str, Any]], dict[str, Any]],
    ) -> list[int]:
        """Keep the arguments of each command that redaction changed.

        Args:
            invocation: The run's invocation (`RunBook.invocation`).
            call_id: The call id of a command's position (asked only for the kept ones).
            written: The commands as the planner wrote them.
            kept: The same commands as the state keeps them (redacted, checkpoint-safe).
            clean: Makes arguments checkpoint-safe without redacting them: what a tool
                gets is never less safe than the state (no lone surrogate, for one).

        Returns:
            The positions whose arguments were kept (the ones redaction changed).
        """
        changed: list[tuple[int, dict[str, Any]]] = []
        for position, (mine, safe) in enumerate(zip(written, kept, strict=False)):
            own = own_arguments(mine, safe, clean)
            if own is not None:
                changed.append((position, own))
        if changed:
            with self._lock:
                for position, own in changed:
                    planned = (own, dict(kept[position]["tool_kwargs"]))
                    self._kept[(invocation, call_id(position))] = planned
        return [position for position, _ in changed]

    def take(self, call: PreparedCall) -> Planned | None:
        """The planner's own arguments of a call, and the kept ones (None: gone)."""
        with self._lock:
            return self._kept.pop((kept_under(call), call["call_id"]), None)

    def release(self, invocation: str) -> None:
        """Drop what is kept for a run's calls (the run ended)."""
        with self._lock:
            for key in [key for key in self._kept if key[0] == invocation]:
                del self._kept[key]

    def __len__(self) -> int:
        with self._lock:
            return len(self._kept)


def own_arguments(
    written: ToolCommand, kept: ToolCommand, clean: Callable[[dict[str, Any]], dict[str, Any]]
) -> dict[str, Any] | None:
    """The planner's own arguments of a command, when redaction changed them.

    Args:
        written: The command as the planner wrote it.
        kept: The same command as the state keeps it (redacted, checkpoint-safe).
        clean: Makes arguments checkpoint-safe without redacting them.

    Returns:
        The arguments the tool gets (`written`'s, made checkpoint-safe), or None when
        they are the kept ones: only `clean` changed them, or nothing did.
    """
    if written["tool_kwargs"] == kept["tool_kwargs"]:
        return None
    own = clean(written["tool_kwargs"])
    return own if own != kept["tool_kwargs"] else None


class _Planned:
    """The block of `planned`: `arguments` are the context's for its length."""

    __slots__ = ("_arguments", "_token")

    def __init__(self, arguments: Planned | None) -> None:
        self._arguments = arguments

    def __enter__(self) -> None:
        self._token = _PLANNED.set(self._arguments)

    def __exit__(self, *_: object) -> None:
        _PLANNED.reset(self._token)


NOTHING_PLANNED: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
"""The block of `planned(None)` where no arguments are set already: nothing to change
(a caller may leave it unentered)."""


def planned(arguments: Planned | None) -> contextlib.AbstractContextManager[None]:
    """Within this block, a tool's function gets `arguments` where redaction changed them."""
    if arguments is None and _PLANNED.get() is None:  # the usual call: nothing redacted
        return NOTHING_PLANNED
    return _Planned(arguments)


def restored(kwargs: dict[str, Any]) -> dict[str, Any]:
    """A tool function's arguments with the planner's own text where the hook changed it.

    Only text is put back, where the tool got the text the state keeps (a text the
    loop's repair changed stays as repaired), at its place in the arguments the tool
    parsed (its schema's types kept: a nested model stays a model).
    """
    arguments = _PLANNED.get()
    if not arguments:
        return kwargs
    written, kept = arguments
    return cast(dict[str, Any], _restore(kwargs, written, kept))


def _restore(parsed: Any, written: Any, kept: Any) -> Any:
    if isinstance(parsed, str):
        return written if parsed == kept and isinstance(written, str) else parsed
    if isinstance(parsed, BaseModel):
        parsed_fields = {name: getattr(parsed, name) for name in type(parsed).model_fields}
        changes = _restore(parsed_fields, written, kept)
        return parsed.model_copy(update=changes) if changes != parsed_fields else parsed
    if isinstance(parsed, dict):
        if not (isinstance(written, dict) and isinstance(kept, dict)):
            return parsed
        return {
            key: _restore(value, written[key], kept[key])
            if key in written and key in kept
            else value
            for key, value in parsed.items()
        }
    if isinstance(parsed, list | tuple):
        if not (isinstance(written, list | tuple) and isinstance(kept, list | tuple)):
            return parsed
        if not len(parsed) == len(written) == len(kept):
            return parsed
        items = [_restore(*trio) for trio in zip(parsed, written, kept, strict=True)]
        return tuple(items) if isinstance(parsed, tuple) else items
    return parsed
