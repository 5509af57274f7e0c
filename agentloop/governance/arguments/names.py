"""Repairing argument names: aliases, case and separators, close spellings.

A key the schema does not declare is renamed to a declared property when the match is
unambiguous: a declared alias, the same name up to case and separators (`timeZone`,
`time_zone`, `time-zone`), or one close spelling (`timezome`). Keys that match nothing
are left for validation, which names them and the accepted ones.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["NOT_AN_OBJECT", "NameIndex"]

NOT_AN_OBJECT = "arguments must be an object, got {kind}"

CLOSE_SPELLING = 0.8
"""How alike (difflib ratio) a key and a declared name must be to count as a misspelling."""

_WORD_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SEPARATORS = re.compile(r"[\s\-._]+")


def snake(name: str) -> str:
    """`timeZone` -> `time_zone`."""
    spaced = _WORD_BOUNDARY.sub("_", name)
    return _SEPARATORS.sub("_", spaced).strip("_").lower()


def compact(name: str) -> str:
    """`timeZone`, `time_zone`, `Time-Zone` -> `timezone`."""
    return _SEPARATORS.sub("", name).lower()


class NameIndex:
    """The declared argument names of one schema, indexed for repair (built once per tool).

    Args:
        names: The declared property names.
    """

    def __init__(self, names: Iterable[str]) -> None:
        self.names = list(names)
        self._declared = frozenset(self.names)
        self._by_snake = _index(self.names, snake)
        self._by_compact = _index(self.names, compact)

    def repair(
        self,
        kwargs: Mapping[str, Any],
        aliases: Mapping[str, Sequence[str] | str] | None = None,
    ) -> tuple[dict[str, Any], list[str]]:
        """Rename misspelt or aliased argument names to the declared ones.

        Args:
            kwargs: The arguments as the model sent them; not modified.
            aliases: Canonical argument names mapped to the other names models use.

        Returns:
            A new dict of arguments, and one note per renamed argument.
        """
        if type(kwargs) is not dict and not isinstance(kwargs, Mapping):  # no ABC check for a dict
            return {}, [NOT_AN_OBJECT.format(kind=type(kwargs).__name__)]
        arguments = dict(kwargs)
        notes: list[str] = []
        for canonical, names in (aliases or {}).items():
            if canonical in arguments:
                continue
            for alias in [names] if isinstance(names, str) else names:
                if alias in arguments and alias not in self._declared:
                    arguments = _renamed(arguments, alias, canonical, notes)
                    break
        for key in list(arguments):
            if not isinstance(key, str) or key in self._declared:
                continue
            target = self.match(key)
            if target is not None and target not in arguments:
                arguments = _renamed(arguments, key, target, notes)
        return arguments, notes

    def match(self, key: str) -> str | None:
        """Return the one declared name `key` stands for, or None when none or several do."""
        for index, form in ((self._by_snake, snake), (self._by_compact, compact)):
            found = index.get(form(key), [])
            if len(found) == 1:
                return found[0]
            if found:
                return None
        close = difflib.get_close_matches(
            compact(key), list(self._by_compact), n=2, cutoff=CLOSE_SPELLING
        )
        if len(close) == 1 and len(self._by_compact[close[0]]) == 1:
            return self._by_compact[close[0]][0]
        return None


def _index(names: Iterable[str], form: Any) -> dict[str, list[str]]:
    index: dict[str, list[str]] = {}
    for name in names:
        index.setdefault(form(name), []).append(name)
    return index


def _renamed(arguments: dict[str, Any], old: str, new: str, notes: list[str]) -> dict[str, Any]:
    notes.append(f"renamed argument {old!r} to {new!r}")
    return {(new if key == old else key): value for key, value in arguments.items()}
