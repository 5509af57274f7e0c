"""A cut text that remembers how long the whole text was."""

from __future__ import annotations

__all__ = ["CutText"]


class CutText(str):
    """The first characters of a longer text, which remembers how long the whole was.

    A tool's huge text output is cut to this before it is redacted inside the tool's run
    (a bounded cost); truncation then reports the whole text's length.
    """

    original_chars: int

    def __new__(cls, text: str, original_chars: int) -> CutText:
        """Keep `text`, the start of a text of `original_chars` characters."""
        cut = super().__new__(cls, text)
        cut.original_chars = original_chars
        return cut
