"""The base of the progress events, the registry their declarations fill, and emitters.

Events are declared in `agentloop.observability.events` only (a subclass anywhere else is
refused), each under a `type` no other event has.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from agentloop.base.checkpoint_safe import checkpoint_safe

__all__ = [
    "Emit",
    "HeldEvents",
    "LoopEvent",
    "check_declared",
    "declared_events",
    "is_optional",
    "make_emitter",
    "null_emit",
    "optional",
]

DECLARING_MODULE = "agentloop.observability.events"
_OPTIONAL = "omitted_when_none"
_declared: dict[str, type[LoopEvent]] = {}
_declared_classes: set[type[LoopEvent]] = set()
_optional_names: dict[type[LoopEvent], frozenset[str]] = {}


def optional() -> Any:
    """Declare a payload field that is left out of the payload when it is None."""
    return dataclasses.field(default=None, metadata={_OPTIONAL: True})


def is_optional(field: dataclasses.Field[Any]) -> bool:
    """Tell whether a payload field is left out of the payload when it is None."""
    return bool(field.metadata.get(_OPTIONAL))


@dataclass(frozen=True, kw_only=True)
class LoopEvent:
    """One progress event. Declared events subclass it in `observability.events` and set `type`."""

    type: ClassVar[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Register a declared event under its `type`.

        Raises:
            TypeError: The event is declared outside `agentloop.observability.events`,
                without a `type`, or under the `type` of another event.
        """
        super().__init_subclass__(**kwargs)
        name = cls.__dict__.get("type")
        if cls.__module__ != DECLARING_MODULE or not isinstance(name, str) or name in _declared:
            msg = (
                f"events are declared once, with a new `type`, in {DECLARING_MODULE}: "
                f"{cls.__module__}.{cls.__qualname__}"
            )
            raise TypeError(msg)
        _declared[name] = cls
        _declared_classes.add(cls)

    def payload(self) -> dict[str, Any]:
        """Return the event's fields, in declaration order (unset optional ones left out)."""
        kind = type(self)
        omitted = _optional_names.get(kind)
        if omitted is None:
            fields = dataclasses.fields(kind)
            omitted = _optional_names[kind] = frozenset(f.name for f in fields if is_optional(f))
        # the instance dict holds exactly the fields, set by __init__ in declaration order
        if not omitted:
            return dict(self.__dict__)
        return {k: v for k, v in self.__dict__.items() if v is not None or k not in omitted}


def declared_events() -> dict[str, type[LoopEvent]]:
    """Return every declared event class by its `type`, in declaration order."""
    return dict(_declared)


def check_declared(event: object) -> LoopEvent:
    """Return `event` if it is a declared event.

    Raises:
        TypeError: It is not (a string, a dict, or an instance of no declared class).
    """
    if type(event) in _declared_classes:  # each is the one class declared under its `type`
        return event  # type: ignore[return-value]  # a declared class is a LoopEvent
    msg = f"not a declared event (see agentloop.observability.events.EVENT_TYPES): {event!r:.120}"
    raise TypeError(msg)


class Emit(Protocol):
    """`emit(event)`: send one declared event."""

    def __call__(self, event: LoopEvent, /) -> None:
        """Send one event."""


class HeldEvents(list[LoopEvent]):
    """Events held back until `release` sends them, in order, to `emit`.

    A node that may run again from its start (a hook's `interrupt()`, answered on
    resume) holds what it says before that point, so a resumed run does not say it twice.
    """

    def __init__(self, emit: Emit) -> None:
        super().__init__()
        self.emit = emit

    def release(self) -> None:
        """Send the held events and forget them."""
        for event in self:
            self.emit(event)
        self.clear()


def null_emit(event: LoopEvent, /) -> None:
    """Drop an event (used when nothing listens); an undeclared one is still refused."""
    if type(event) not in _declared_classes:  # `check_declared`, inline: the usual case
        check_declared(event)


def _empty(_: Any) -> None:
    pass


_EMPTY_BODY = _empty.__code__.co_code


def make_emitter(
    writer: Callable[[Any], None] | None,
    *,
    loop_name: str,
    redact: Callable[[str], str] | None = None,
) -> Emit:
    """Build an emitter that writes `{"type", "loop", "ts", **payload}` to a stream writer.

    Fields are redacted and made serializable (`checkpoint_safe`); a failing writer never
    breaks the loop: the event is dropped. An undeclared event is refused (`TypeError`).
    When the writer does nothing (no one streams `custom`), events are
    checked and dropped without being built.

    Args:
        writer: LangGraph's stream writer (`runtime.stream_writer`), or None.
        loop_name: The `name` of the tool loop, so composed loops can be told apart.
        redact: Applied to every string of every event.

    Returns:
        The emitter.
    """
    if writer is None:
        return null_emit
    # LangGraph gives a run's nodes a function whose body does nothing when nothing
    # streams the `custom` mode (the default `Runtime` has one too): events written to it
    # go nowhere, so they need not be made. A writer of any other shape (a method, a
    # `partial`, an object) counts as listening. Checked inline, by attribute: no call
    # for each node's scope.
    try:
        silent = writer.__code__.co_code == _EMPTY_BODY
    except AttributeError:
        silent = False
    if silent:
        return null_emit
    safe_name = checkpoint_safe(loop_name, redact)

    def emit(event: LoopEvent, /) -> None:
        check_declared(event)
        # the keys are declared field names and `type` a declared literal: only the
        # values need making safe
        written = {"type": event.type, "loop": safe_name, "ts": time.time()}
        try:
            for key, value in event.payload().items():
                written[key] = checkpoint_safe(value, redact)
            writer(written)
        except Exception:
            return

    return emit
