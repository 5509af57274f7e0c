"""Old names and options that still work, each with one `DeprecationWarning` naming its new home."""

from __future__ import annotations

import warnings
from typing import Any, TypeVar

__all__ = ["deprecated_alias", "warn_deprecated"]

T = TypeVar("T")


def warn_deprecated(old: str, new: str, *, stacklevel: int = 3) -> None:
    """Warn that `old` is deprecated in favour of `new`."""
    warnings.warn(
        f"{old} is deprecated and will be removed in a future release; use {new}",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


def deprecated_alias(old: str, value: T) -> T:
    """Return `value` for an old module attribute name, warning that it moved."""
    new = f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', value)}"
    warn_deprecated(old, new.lstrip("."), stacklevel=4)
    return value


def __getattr__(name: str) -> Any:  # pragma: no cover - nothing else lives here
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)
