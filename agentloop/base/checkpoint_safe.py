"""Values every LangGraph checkpoint serializer accepts, whatever a model or a tool produced.

LangGraph's serializers write msgpack (and JSON for metadata): an integer beyond 64
bits, a lone surrogate in a string, NaN or an infinity in JSON, bytes or an arbitrary
object make a checkpoint fail, and with it the whole run. What the loop writes to state
goes through `checkpoint_safe` first:

- an integer beyond 64 bits becomes its decimal text (coercion turns it back into an
  integer for a tool whose schema asks for one);
- a lone surrogate becomes U+FFFD, and so does U+0000 (NUL: PostgreSQL's JSON and
  text types cannot hold it, and PDF or scraped text often carries it);
- NaN and the infinities become `"NaN"`, `"Infinity"`, `"-Infinity"`;
- anything else that is not JSON data goes through `to_jsonable` (bytes, models, sets...).

The validated arguments a call carries to its task must stay exactly what the tool
receives, so `encode_arguments` wraps big integers and strings holding NUL reversibly
(`decode_arguments` restores them). A plan is state too, though: a NUL the planner
writes into an argument is U+FFFD before it becomes a call.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from enum import Enum
from typing import Any, TypeVar

from langchain_core.messages import BaseMessage
from langgraph.types import Overwrite

from agentloop.base.jsonable import to_jsonable

__all__ = [
    "BIG_INT_TAG",
    "NUL_TEXT_TAG",
    "checkpoint_safe",
    "decode_arguments",
    "encode_arguments",
    "safe_text",
    "safe_update",
    "UpdateT",
]

TextHook = Callable[[str], str]
UpdateT = TypeVar("UpdateT", bound=Mapping[str, Any])
"""A state update's type, which `safe_update` keeps."""

BIG_INT_TAG = "__agentloop_int__"
"""The key of `{BIG_INT_TAG: "digits"}`, how `encode_arguments` carries a big integer."""

NUL_TEXT_TAG = "__agentloop_nul_text__"
"""The key of `{NUL_TEXT_TAG: [parts]}`, how `encode_arguments` carries a string holding
NUL (its parts between the NULs)."""

_NUL = "\x00"
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_MAX_DEPTH = 64


def safe_text(text: str) -> str:
    """Return `text` with lone surrogates and U+0000 (NUL) replaced by U+FFFD."""
    if _NUL in text:
        text = text.replace(_NUL, "\ufffd")
    if text.isascii():  # no surrogate; and no copy, unlike encoding
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def _fits(value: int) -> bool:
    return _INT64_MIN <= value <= _INT64_MAX


def checkpoint_safe(
    value: Any,
    text: TextHook | None = None,
    _depth: int = 0,
    *,
    plain_keys: AbstractSet[str] = frozenset(),
    plain_values: AbstractSet[str] = frozenset(),
) -> Any:
    """Return JSON data every checkpoint serializer accepts (see the module docstring).

    Args:
        value: Any value.
        text: Applied to every string first (keys included), e.g. a redaction hook.
        plain_keys: Dict keys kept as they are, at any depth: names the loop declared
            (a record's fields), which are safe and hold no secret.
        plain_values: Keys of `value` itself (a dict; not of the dicts inside it) whose
            text the loop made from digests and counters (a record's `call_id`,
            `call_key`): kept as they are, as ASCII text in which `text` has nothing to
            find.

    Never raises; plain data comes back unchanged (the same objects when nothing needed
    changing).
    """
    if value is None or value is True or value is False:
        return value
    kind = type(value)
    if kind is str:
        return safe_text(text(value) if text is not None and value else value)
    if kind is int:
        return value if _fits(value) else _int_text(value)
    if kind is float:
        return value if math.isfinite(value) else _float_text(value)
    # containers before the subclass checks below: no `isinstance` call for them
    if kind is dict:
        if _depth >= _MAX_DEPTH:
            return "<too deep>"
        return _safe_dict(value, text, _depth, plain_keys, plain_values)
    if kind is list:
        if _depth >= _MAX_DEPTH:
            return "<too deep>"
        return _safe_list(value, text, _depth, plain_keys)
    if isinstance(value, str) and not isinstance(value, Enum):  # a `CutText` marker...
        return checkpoint_safe(str.__str__(value), text)
    if _depth >= _MAX_DEPTH:
        return "<too deep>"
    return checkpoint_safe(to_jsonable(value), text, _depth + 1, plain_keys=plain_keys)


def _safe_list(
    value: list[Any], text: TextHook | None, depth: int, plain_keys: AbstractSet[str]
) -> list[Any]:
    # a dict item (a record, a command) goes to `_safe_dict` directly: a call less each
    inner = depth + 1
    items = [
        _safe_dict(item, text, inner, plain_keys)
        if type(item) is dict and inner < _MAX_DEPTH
        else checkpoint_safe(item, text, inner, plain_keys=plain_keys)
        for item in value
    ]
    for safe_item, item in zip(items, value, strict=True):  # a loop: no `all`, no generator
        if safe_item is not item:
            return items
    return value


def _safe_dict(
    value: dict[Any, Any],
    text: TextHook | None,
    depth: int,
    plain_keys: AbstractSet[str],
    plain_values: AbstractSet[str] = frozenset(),
) -> dict[str, Any]:
    changed = False
    safe: dict[str, Any] = {}
    for key, item in value.items():
        if key in plain_keys:
            safe_key = key
        else:
            raw_key = key if type(key) is str else str(to_jsonable(key))
            safe_key = text(raw_key) if text is not None else raw_key
            if not safe_key.isascii() or _NUL in safe_key:
                safe_key = safe_text(safe_key)
        kind = type(item)
        # the common leaves inline: a record or an event is mostly short text and numbers
        if kind is str:
            if key in plain_values:  # digests and counters: ASCII, nothing to redact
                safe_item = item
            else:
                safe_item = text(item) if text is not None and item else item
                # what `safe_text` changes (an empty string, a record's unset field, needs
                # nothing)
                if safe_item and (not safe_item.isascii() or _NUL in safe_item):
                    safe_item = safe_text(safe_item)
        elif (
            item is None
            or kind is bool
            or (kind is int and _INT64_MIN <= item <= _INT64_MAX)
            or (kind is float and math.isfinite(item))  # usage counts, durations
        ):
            safe_item = item
        elif kind is dict and depth + 1 < _MAX_DEPTH:  # a nested dict: a call less
            safe_item = _safe_dict(item, text, depth + 1, plain_keys)
        else:
            safe_item = checkpoint_safe(item, text, depth + 1, plain_keys=plain_keys)
        changed = changed or safe_key != key or safe_item is not item
        safe[safe_key] = safe_item
    return safe if changed else value


def _safe_message(message: BaseMessage, text: TextHook | None) -> BaseMessage:
    content = checkpoint_safe(message.content, text)
    if content is message.content:
        return message
    return message.model_copy(update={"content": content})


def safe_update(
    update: UpdateT, text: TextHook | None = None, *, plain_keys: AbstractSet[str] = frozenset()
) -> UpdateT:
    """Make a node's state update checkpoint-safe (and pass its strings through `text`).

    Messages keep their type (their content is made safe) and `Overwrite` keeps wrapping
    its value. `plain_keys`: as for `checkpoint_safe` (not applied to message content).
    """
    safe: Any = {}  # the update's type, without `cast` (a call each time)
    for key, value in update.items():
        if type(value) is dict:  # the usual value, without the `isinstance` checks below
            safe[key] = checkpoint_safe(value, text, plain_keys=plain_keys)
        elif isinstance(value, Overwrite):
            safe[key] = Overwrite(checkpoint_safe(value.value, text, plain_keys=plain_keys))
        elif isinstance(value, list) and value and isinstance(value[0], BaseMessage):
            safe[key] = [_safe_message(message, text) for message in value]
        else:
            safe[key] = checkpoint_safe(value, text, plain_keys=plain_keys)
    made: UpdateT = safe
    return made


def _int_text(value: int) -> str:
    try:
        return str(value)
    except ValueError:  # more digits than Python prints
        return f"<int of {value.bit_length()} bits>"


def _float_text(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def encode_arguments(arguments: dict[str, Any]) -> dict[str, Any]:
    """Make validated arguments checkpoint-safe, reversibly for big integers and NUL."""
    encoded: dict[str, Any] = {}
    for key, value in arguments.items():  # a loop, and the usual values inline: no calls
        kind = type(value)
        if not (
            (kind is str and value.isascii() and _NUL not in value)
            or value is None
            or kind is bool
            or (kind is int and _INT64_MIN <= value <= _INT64_MAX)
        ):
            value = _encode(value, 0)
        encoded[key if key.isascii() and _NUL not in key else safe_text(key)] = value
    return encoded


def _encode(value: Any, depth: int) -> Any:
    kind = type(value)
    if kind is int:
        return value if _INT64_MIN <= value <= _INT64_MAX else {BIG_INT_TAG: _int_text(value)}
    if value is None or kind is bool or (kind is float and math.isfinite(value)):
        return value
    if isinstance(value, str) and _NUL in value:
        return {NUL_TEXT_TAG: [safe_text(part) for part in value.split(_NUL)]}
    if depth >= _MAX_DEPTH:
        return checkpoint_safe(value)
    if isinstance(value, dict):
        return {
            safe_text(key) if isinstance(key, str) else str(key): _encode(item, depth + 1)
            for key, item in value.items()
        }
    if isinstance(value, list):
        if _safe_as_it_is(value):  # a long list of plain numbers or text: no item walked
            return value
        return [_encode(item, depth + 1) for item in value]
    return checkpoint_safe(value)


def _safe_as_it_is(items: list[Any]) -> bool:
    """Whether a list of one plain type is stored as it is (checked in bulk, not item by item)."""
    types = set(map(type, items))
    if types == {float}:
        return all(map(math.isfinite, items))
    if types == {int}:
        return bool(min(items) >= _INT64_MIN and max(items) <= _INT64_MAX)
    if types == {str}:
        return _NUL not in "".join(items)
    return types <= {bool, type(None)}


def decode_arguments(arguments: dict[str, Any]) -> dict[str, Any]:
    """Restore what `encode_arguments` wrapped."""
    decoded: dict[str, Any] = {}
    for key, value in arguments.items():  # a loop, not a comprehension: a call less
        decoded[key] = value if type(value) in _PLAIN_SCALARS else _decode(value)
    return decoded


_PLAIN_SCALARS = frozenset({str, int, float, bool, type(None)})
"""Types `_decode` returns as they are (it only unwraps dicts and walks lists)."""


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if len(value) == 1 and isinstance(value.get(BIG_INT_TAG), str):
            try:
                return int(value[BIG_INT_TAG])
            except ValueError:
                return value
        parts = value.get(NUL_TEXT_TAG) if len(value) == 1 else None
        if isinstance(parts, list) and all(isinstance(part, str) for part in parts):
            return _NUL.join(parts)
        return {key: _decode(item) for key, item in value.items()}
    if isinstance(value, list):
        if set(map(type, value)) <= _PLAIN_SCALARS:  # nothing wrapped in it
            return value
        return [_decode(item) for item in value]
    return value
