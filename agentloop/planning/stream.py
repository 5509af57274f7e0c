"""Read a streamed planner reply: spot `next_action` early, then decode the whole reply."""

from __future__ import annotations

import copy
import json
import re
from typing import Any, Literal

import json_repair
from langchain_core.utils.json import parse_partial_json

__all__ = ["PlanMode", "PlanParseError", "PlanStreamParser", "extract_json_object"]

PlanMode = Literal["json", "tool", "native"]
"""How the planner writes its plan: JSON text, one plan tool call, or the tools' own calls."""

_STRUCTURAL = re.compile(r'[{}\[\]":,]')
"""The characters that change the scanner's state outside a string."""
_STRING_STOP = re.compile(r'["\\]')
"""The characters that matter inside a string."""
_FENCE = re.compile(r"```[ \t]*[\w+-]*[ \t]*\r?\n?(.*?)```", re.DOTALL)
"""A markdown code block, with an optional language tag; group 1 is its content."""

LENIENT_JSON = json.JSONDecoder(strict=False)
"""One decoder that allows control characters in strings (`json.loads(..., strict=False)`
builds a new decoder per call)."""

_TRIM_LIMIT = 2_000
"""How far from the end a syntax error may lie for a truncated object to be trimmed."""

_Expect = Literal["key", "colon", "value", "after_value"]
"""What the scanner expects next at depth 1 of the outermost object."""


class PlanParseError(ValueError):
    """The planner's reply holds no JSON value that could be decoded."""


class _ObjectScanner:
    """Follow the structure of the first JSON object of a text fed in chunks.

    Everything before the first `{` is skipped. The scanner tracks strings,
    escapes and nesting depth, remembers the last key read at depth 1, and
    records the value of a top-level `next_action` key once its string is
    complete. It stops when the outermost object closes. Each character is
    looked at a bounded number of times, so the work is linear in the text.
    """

    def __init__(self) -> None:
        self.started = False
        """Whether the first `{` was seen."""
        self.finished = False
        """Whether the outermost object was closed."""
        self.next_action: str | None = None
        """The complete string value of the top-level `next_action` key, as written."""
        self._closers: list[str] = []
        self._depth = 0  # len(self._closers), kept beside it: read at every character
        self._in_string = False
        self._escape = False
        self._expect: _Expect = "key"
        self._last_key: str | None = None
        self._string_is_key = False
        self._capture: list[str] | None = None
        self.command_spans: list[tuple[int, int]] = []
        """Where each complete object of the top-level `execution_commands` array lies in
        the text fed so far: (start, end) offsets, in the order they closed."""
        self._commands_depth = 0
        self._command_start = -1
        self._offset = 0

    def feed(self, chunk: str) -> int | None:
        """Scan one chunk.

        Returns:
            The offset in `chunk` just past the `}` that closed the outermost
            object, when it closed in this chunk, else None.
        """
        if self.finished:
            return None
        base, self._offset = self._offset, self._offset + len(chunk)
        index = 0
        if not self.started:
            brace = chunk.find("{")
            if brace < 0:
                return None
            self.started = True
            self._closers = ["}"]
            self._depth = 1
            self._expect = "key"
            index = brace + 1
        size = len(chunk)
        while index < size:
            if self._in_string:
                index = self._scan_string(chunk, index)
                continue
            match = _STRUCTURAL.search(chunk, index)
            stop = size if match is None else match.start()
            if self._expect == "value" and index < stop:  # else no scalar can be pending
                self._skip_scalar(chunk, index, stop)
            if match is None:
                return None
            index = stop + 1
            if self._structural(chunk[stop], base + stop):
                self.finished = True
                return index
        return None

    def closed_text(self, text: str) -> str:
        """Return `text`, the part scanned so far, with its open string and containers closed.

        A dangling backslash is dropped. The result is valid JSON when `text`
        was a well-formed object cut short between or inside values.
        """
        if self._escape:
            text = text[:-1]
        quote = '"' if self._in_string else ""
        return text + quote + "".join(reversed(self._closers))

    def _scan_string(self, chunk: str, index: int) -> int:
        """Consume string content from `index`; return where scanning resumes."""
        if self._escape:
            self._escape = False
            self._keep(chunk[index])
            return index + 1
        match = _STRING_STOP.search(chunk, index)
        if match is None:
            self._keep(chunk[index:])
            return len(chunk)
        stop = match.start()
        if self._capture is not None and index < stop:
            self._capture.append(chunk[index:stop])
        if chunk[stop] == "\\":
            self._escape = True
            self._keep("\\")
        else:
            self._in_string = False
            if self._capture is not None:  # else nothing to record (most strings)
                self._end_string()
        return stop + 1

    def _skip_scalar(self, chunk: str, start: int, stop: int) -> None:
        """Note a non-string value (number, literal) written between structural characters."""
        if (
            start < stop
            and self._expect == "value"
            and self._depth == 1
            and not chunk[start:stop].isspace()
        ):
            self._expect = "after_value"

    def _structural(self, char: str, position: int) -> bool:
        """Apply one structural character; return True when the outermost object closed.

        `position` is the character's offset in the whole text fed so far.
        """
        depth = self._depth
        top = depth == 1
        if char == '"':
            self._start_string(top)
        elif char in "{[":
            if top and self._expect == "value":
                self._expect = "after_value"
                if char == "[" and self._last_key == "execution_commands":
                    self._commands_depth = depth + 1
            elif char == "{" and depth == self._commands_depth:
                self._command_start = position
            self._closers.append("}" if char == "{" else "]")
            self._depth += 1
        elif char in "}]":
            self._closers.pop()
            self._depth -= 1
            if depth - 1 == self._commands_depth and self._command_start >= 0:
                self.command_spans.append((self._command_start, position + 1))
                self._command_start = -1
            elif depth == self._commands_depth:
                self._commands_depth = 0
            return not self._closers
        elif top and char == ":":
            self._expect = "value"
        elif top and char == ",":
            self._expect = "key"
        return False

    def _start_string(self, top: bool) -> None:
        """Open a string and decide whether its content must be kept."""
        self._in_string = True
        self._escape = False
        self._string_is_key = top and self._expect == "key"
        wanted = self._string_is_key or (
            top and self._expect == "value" and self._last_key == "next_action"
        )
        self._capture = [] if wanted else None
        if top and self._expect == "value":
            self._expect = "after_value"

    def _keep(self, text: str) -> None:
        """Append raw string content when the current string is being captured."""
        if self._capture is not None and text:
            self._capture.append(text)

    def _end_string(self) -> None:
        """Close a string: record a top-level key or the `next_action` value."""
        capture, self._capture = self._capture, None
        if capture is None:
            return
        value = _decode_string("".join(capture))
        if self._string_is_key:
            self._last_key = value
            self._expect = "colon"
        elif value is not None:
            self.next_action = value


def _decode_string(body: str) -> str | None:
    """Decode the raw content of a JSON string literal, or return None when invalid."""
    try:
        value = LENIENT_JSON.decode(f'"{body}"')
    except ValueError:
        return None
    return value if isinstance(value, str) else None


class PlanStreamParser:
    """Parse a planner reply as it streams in.

    Feed it the reply's text (message text or tool-call argument text) chunk
    by chunk. `next_action` becomes known as soon as the top-level
    `"next_action"` string is complete, so a caller can stop the stream early
    on `response`; `parse` decodes everything received so far.
    """

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._scanner = _ObjectScanner()
        self._commands: list[dict[str, Any]] | None = None
        """The objects of `execution_commands`, when the first chunk held the whole object."""

    def feed(self, text: str) -> None:
        """Append a chunk of the reply."""
        if not text:
            return
        first = not self._parts
        self._parts.append(text)
        if not (first and self._take_whole(text)):
            self._scanner.feed(text)

    def _take_whole(self, text: str) -> bool:
        """Read a first chunk that holds a whole object at once, instead of scanning it.

        The object from the first `{` to the last `}` must decode: it is then the object
        the scanner would have followed to its end, and its `next_action` and commands
        are read from the decoded value. Anything else is scanned as usual.
        """
        start = text.find("{")
        end = text.rfind("}")
        if start < 0 or end < start:
            return False
        ok, value = _loads(text[start : end + 1])
        if not ok or not isinstance(value, dict):
            return False
        scanner = self._scanner
        scanner.started = scanner.finished = True
        action = value.get("next_action")
        scanner.next_action = action if isinstance(action, str) else None
        commands = value.get("execution_commands")
        self._commands = (
            [command for command in commands if isinstance(command, dict)]
            if isinstance(commands, list)
            else []
        )
        return True

    @property
    def next_action(self) -> str | None:
        """The top-level `next_action`, lower-cased and stripped, once its string is complete."""
        value = self._scanner.next_action
        return None if value is None else value.strip().lower()

    def completed_commands(self, start: int = 0) -> list[tuple[int, Any]]:
        """The complete objects of `execution_commands` streamed so far, from `start`.

        Returns:
            (position in the array, decoded object) pairs; an object that does not
            decode is left out.
        """
        if self._commands is not None:
            whole = self._commands[start:]
            return [(start + index, copy.deepcopy(raw)) for index, raw in enumerate(whole)]
        spans = self._scanner.command_spans
        if start >= len(spans):
            return []
        text = self.text
        commands: list[tuple[int, Any]] = []
        for position in range(start, len(spans)):
            begin, end = spans[position]
            ok, value = _loads(text[begin:end])
            if ok and isinstance(value, dict):
                commands.append((position, value))
        return commands

    @property
    def finished(self) -> bool:
        """Whether the reply's outermost JSON object is closed."""
        return self._scanner.finished

    @property
    def commands_completed(self) -> int:
        """How many objects of `execution_commands` are complete so far."""
        if self._commands is not None:
            return len(self._commands)
        return len(self._scanner.command_spans)

    @property
    def wants_response(self) -> bool:
        """Whether the reply already says `next_action` is `response`."""
        return self.next_action == "response"

    @property
    def text(self) -> str:
        """Everything fed so far."""
        if len(self._parts) > 1:
            self._parts = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""

    def parse(self) -> Any:
        """Decode the reply received so far.

        Returns:
            The decoded JSON value (usually a dict; possibly of another type).

        Raises:
            PlanParseError: The text holds no decodable JSON.
        """
        return extract_json_object(self.text)


def extract_json_object(text: str) -> Any:
    """Decode the JSON value of a planner reply, repairing common damage.

    Tried in order: the whole text; the content of the first markdown code block; the
    first `{` up to its matching `}`; when that object is not closed (a truncated
    stream), a partial parse from the first `{`. When none decodes strictly, the same
    segment is repaired (`json_repair`: trailing commas, comments, single quotes,
    unquoted keys, unescaped quotes, unclosed brackets) and decoded.

    Args:
        text: The planner's reply; may hold prose and markdown fences.

    Returns:
        The decoded value. It may be something other than a dict.

    Raises:
        PlanParseError: No JSON could be decoded, even after repair.
    """
    stripped = text.strip()
    if not stripped:
        msg = "planner returned no text"
        raise PlanParseError(msg)
    ok, value = _loads(stripped)
    if ok:
        return value
    fence = _FENCE.search(text)
    segment = text
    if fence is not None:
        ok, value = _loads(fence.group(1).strip())
        if ok:
            return value
        if "{" in fence.group(1):
            segment = fence.group(1)
    start = segment.find("{")
    if start < 0:
        msg = "planner output holds no JSON object"
        raise PlanParseError(msg)
    scanner = _ObjectScanner()
    end = scanner.feed(segment)
    if end is not None:
        ok, value = _loads(segment[start:end])
    else:
        value = _parse_truncated(segment[start:], scanner.closed_text(segment[start:]))
        ok = value is not None
    if ok:
        return value
    repaired = _repair(segment[start:end] if end is not None else segment[start:])
    if repaired is None:
        msg = "planner output holds a JSON object that could not be decoded, even after repair"
        raise PlanParseError(msg)
    return repaired


def _repair(fragment: str) -> Any:
    """Decode damaged JSON with `json_repair`; None when nothing object-like comes out."""
    try:
        value = json_repair.loads(fragment, skip_json_loads=True)
    except (ValueError, RecursionError, IndexError, TypeError):
        return None
    return value if isinstance(value, dict) and value else None


def _parse_truncated(fragment: str, closed: str) -> Any:
    """Decode a JSON object cut short; return None when it cannot be decoded.

    `closed` is `fragment` with its open string and containers closed, which
    decodes directly when the cut fell inside a string value or between values.
    Otherwise `parse_partial_json` trims the fragment from the end until it
    decodes. That search costs one full decode per trimmed character, so it is
    skipped when the first syntax error lies far from the end: such a text is
    malformed, not merely cut short, and trimming would take quadratic time.
    """
    try:
        return LENIENT_JSON.decode(closed)
    except json.JSONDecodeError as error:
        if len(closed) - error.pos > _TRIM_LIMIT:
            return None
    except (ValueError, RecursionError):
        return None
    try:
        return parse_partial_json(fragment)
    except (ValueError, RecursionError):
        return None


def _loads(text: str) -> tuple[bool, Any]:
    """Decode JSON leniently (control characters allowed in strings); report success."""
    try:
        return True, LENIENT_JSON.decode(text)
    except (ValueError, RecursionError):
        return False, None
