"""Prompt templates: files shipped with the package, or a user's own, rendered strictly.

Templates use `$name` placeholders (`string.Template`), so JSON braces need no escaping.
Rendering fails on a missing variable and on an unknown one, so a typo never reaches a
model. `PromptSet` holds one loop's templates: the shipped ones, with any of them
replaced by text or a file (`PlanningOptions(prompts=...)`), checked when the loop is
built against the variables each template may use.
"""

from __future__ import annotations

import json
import string
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from agentloop.errors import ConfigurationError, PromptTemplateError

__all__ = [
    "PROMPT_VARIABLES",
    "PromptFile",
    "PromptSet",
    "compact_schema",
    "load_prompt",
    "prompts_dir",
    "quote_user_text",
    "tool_list_json",
    "render_prompt",
    "result_notes",
    "tagged_section",
    "to_prompt_json",
]

_SOURCE_DIR = Path(__file__).resolve().parents[2] / "prompts"


def prompts_dir() -> Path:
    """Return the folder of the prompt templates: inside the package, or the source tree."""
    packaged = resources.files("agentloop") / "_prompts"
    if packaged.is_dir():
        return Path(str(packaged))
    if _SOURCE_DIR.is_dir():
        return _SOURCE_DIR
    msg = "prompt templates not found: the agentloop installation is incomplete"
    raise PromptTemplateError(msg)


class PromptFile:
    """A strict `string.Template`.

    Args:
        name: The template's name (for errors).
        text: The template text.
    """

    def __init__(self, name: str, text: str) -> None:
        self.name = name
        self.template = string.Template(text)
        try:
            self.variables = frozenset(self.template.get_identifiers())
        except ValueError as error:
            msg = f"prompt {name!r} is not a valid template: {error}"
            raise PromptTemplateError(msg) from error
        if not self.template.is_valid():
            msg = f"prompt {name!r} has an invalid placeholder"
            raise PromptTemplateError(msg)
        # the text cut once at its placeholders: `render` fills the slots and joins
        self._pieces: list[str] = []
        self._slots: list[tuple[int, str]] = []
        end = 0
        for match in self.template.pattern.finditer(text):
            self._pieces.append(text[end : match.start()])
            variable = match.group("named") or match.group("braced")
            if variable is None:  # `$$`
                self._pieces.append(self.template.delimiter)
            else:
                self._slots.append((len(self._pieces), variable))
                self._pieces.append("")
            end = match.end()
        self._pieces.append(text[end:])

    def render(self, **values: Any) -> str:
        """Fill every placeholder (with `str` of its value, as `string.Template` does).

        Raises:
            PromptTemplateError: A variable is missing, or one is given that the template
                does not use.
        """
        if values.keys() != self.variables:
            missing = sorted(self.variables - values.keys())
            unknown = sorted(values.keys() - self.variables)
            msg = f"prompt {self.name!r}: missing variables {missing}, unknown {unknown}"
            raise PromptTemplateError(msg)
        pieces = self._pieces.copy()
        for position, variable in self._slots:
            pieces[position] = str(values[variable])
        return "".join(pieces)


_PROMPT_ESCAPES = str.maketrans(
    {
        "<": "\\u003c",
        ">": "\\u003e",
        "&": "\\u0026",
        "\u0085": "\\u0085",
        "\u2028": "\\u2028",
        "\u2029": "\\u2029",
    }
)
"""What JSON leaves as it is but a prompt could read as markup or a line break."""

_PROMPT_JSON = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": "), default=str)
"""`json.dumps` with the options of `to_prompt_json`, its encoder built once."""


def to_prompt_json(value: Any) -> str:
    """Quote tool-, model- or user-originated data for a prompt: the one quoting function.

    The value becomes JSON (a string becomes one JSON string literal) with `<`, `>`, `&`,
    U+0085, U+2028 and U+2029 escaped as JSON `u` escapes, so it stays valid JSON, holds no
    line break, and can neither close the tag it is delimited by nor open a new one.
    """
    text = _PROMPT_JSON.encode(value)
    return text.translate(_PROMPT_ESCAPES)


_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
"""Keywords whose value maps names to schemas."""
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
"""Keywords whose value is a list of schemas."""
_SCHEMA_VALUES = ("items", "additionalProperties", "not", "if", "then", "else", "contains")
"""Keywords whose value is one schema (or a boolean)."""


def _untitled(schema: Any) -> Any:
    """A JSON schema without its `title` annotations (keywords only, never data)."""
    if not isinstance(schema, dict):
        return schema
    compact: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            value = {name: _untitled(item) for name, item in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            value = [_untitled(item) for item in value]
        elif key in _SCHEMA_VALUES:
            many = isinstance(value, list)
            value = [_untitled(item) for item in value] if many else _untitled(value)
        compact[key] = value
    return compact


def compact_schema(schema: dict[str, Any], tool_description: str | None) -> dict[str, Any]:
    """A tool's argument schema as a model needs it: what validates, what explains.

    `title` annotations (pydantic's, derived from names) are left out at every level,
    and so is the schema's own `description` when it repeats the tool's (pydantic copies
    the docstring there). Everything else, defaults, enums and nested schemas, stays.
    """
    compact = _untitled(schema)
    if isinstance(compact, dict) and compact.get("description") == tool_description:
        compact.pop("description")
    return compact  # type: ignore[no-any-return]


def _compact_tool(description: Mapping[str, Any]) -> dict[str, Any]:
    """One tool of the planner's list, with only what the planner needs."""
    schema = compact_schema(description.get("args_schema") or {}, description.get("description"))
    if schema.get("type") == "object" and "properties" in schema:
        schema.pop("type")
    tool: dict[str, Any] = {
        "name": description.get("name"),
        **({"title": description["title"]} if description.get("title") else {}),
        "description": description.get("description"),
        "args_schema": schema,
        "side_effects": bool(description.get("side_effects")),
    }
    if tool["side_effects"]:
        tool["idempotent"] = bool(description.get("idempotent"))
    return tool


def tool_list_json(descriptions: Sequence[Mapping[str, Any]]) -> str:
    """The planner's tool list: a JSON array, one tool per line, quoted for a prompt.

    Each tool is its name, display title (where it has one, as an MCP tool's `title`),
    description, argument schema (without `title` annotations, the repeated description,
    or `"type": "object"` around its properties), and `side_effects`; `idempotent` is
    given for tools with side effects only (a read-only tool is always safe to repeat).
    Tool text is quoted as by `to_prompt_json`.
    """
    lines = ",\n".join(to_prompt_json(_compact_tool(tool)) for tool in descriptions)
    return f"[{lines}]"


def quote_user_text(text: str) -> str:
    """Quote a user's text for a prompt section (`to_prompt_json` of the string)."""
    return to_prompt_json(text)


@cache
def load_prompt(name: str) -> PromptFile:
    """Load `prompts/<name>.md`.

    Raises:
        PromptTemplateError: No such template.
    """
    path = prompts_dir() / f"{name}.md"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        msg = f"prompt template {name!r} not found at {path}"
        raise PromptTemplateError(msg) from error
    return PromptFile(name, text)


_RESULT_NOTES = (
    ('"error": ', 'A value with an "error" key is a failed call: do not invent its result.'),
    (
        '"fallback": ',
        'A value with a "fallback" key is degraded (stale or default) data: say so if you use it.',
    ),
    (
        ": attachment ",
        'Media appear as "[image ...: attachment HANDLE]"; those you can see follow this '
        "message, each after a line naming its handle.",
    ),
)
"""What the answer model is told about results, each only when the results need it."""


def tagged_section(tag: str, body: str) -> str:
    """`body` inside `<tag>` lines, ending with a line break; "" for an empty body."""
    return f"<{tag}>\n{body}\n</{tag}>\n" if body else ""


def result_notes(results: str) -> str:
    """`$result_notes`: how to read failed calls, fallbacks and media, when there are any.

    Args:
        results: The action results as prompt JSON.

    Returns:
        The notes, each after a space, or "".
    """
    return "".join(f" {note}" for marker, note in _RESULT_NOTES if marker in results)


def render_prompt(name: str, **values: Any) -> str:
    """Load and render a template in one call."""
    return load_prompt(name).render(**values).strip()


_ROUND_VARIABLES = frozenset(
    {"round_number", "round_index", "round_section", "max_rounds", "rollback_note"}
)
"""What the message after the transcript tells a JSON or tool planner: the round, the
limit and, after a rollback, why. `round_section` is the round and the limit in `<round>`
tags, asking in the last round for only what is essential."""

_REQUIREMENT_VARIABLES = frozenset({"user_extra_requirement", "user_extra_requirement_section"})
"""The run's extra instructions (`user_extra_requirement`): the text, "(none)" without
one; or in `<user_extra_requirement>` tags, "" without one."""

PROMPT_VARIABLES: dict[str, frozenset[str]] = {
    "plan_system": frozenset({"plan_example", "reference_example", "max_rounds"})
    | _REQUIREMENT_VARIABLES
    | {"available_tools"},
    "plan_user": _ROUND_VARIABLES,
    "plan_reask": frozenset({"problem", "reply", "plan_example"}),
    "plan_native_system": frozenset({"max_rounds"}) | _REQUIREMENT_VARIABLES,
    "plan_native_reask": frozenset({"problem", "reply"}),
    "rollback_note": frozenset({"reasons"}),
    "answer_system": frozenset({"user_extra_requirement"}),
    "answer_results": frozenset({"action_results", "result_notes"}),
}
"""Each template the loop renders, and the variables a template of that name may use.

The planner's and the answer's requests are the run's transcript (`messages`) after
these system messages: `plan_system` (JSON and tool plans, with the tool list) or
`plan_native_system`, and `answer_system`; a JSON or tool planner then gets `plan_user`
(the round), the answer model `answer_results` (when a tool ran)."""

PromptSource = str | Path
"""A template's text, or the path of a file holding it."""


class PromptSet:
    """The prompt templates of one loop: the shipped ones, some replaced by the user's.

    Args:
        overrides: `{template name: text or file path}`; a `Path`, or a string naming an
            existing file, is read from disk.

    Raises:
        ConfigurationError: An unknown template name, a file that cannot be read, an
            invalid template, or a `$name` the template may not use.
    """

    def __init__(self, overrides: Mapping[str, PromptSource] | None = None) -> None:
        self._templates = {name: load_prompt(name) for name in PROMPT_VARIABLES}
        for name, source in (overrides or {}).items():
            if name not in PROMPT_VARIABLES:
                known = ", ".join(sorted(PROMPT_VARIABLES))
                msg = f"prompts: no template named {name!r}; the templates are {known}"
                raise ConfigurationError(msg)
            self._templates[name] = _user_template(name, source)
        self.overridden = frozenset(overrides or ())

    def render(self, name: str, **values: Any) -> str:
        """Render a template with the variables it uses (others are not shown).

        Raises:
            PromptTemplateError: The template uses a variable that was not given.
        """
        template = self._templates[name]
        return template.render(
            **{key: values[key] for key in template.variables if key in values}
        ).strip()


def _user_template(name: str, source: PromptSource) -> PromptFile:
    text = _read_source(name, source)
    try:
        template = PromptFile(name, text)
    except PromptTemplateError as error:
        raise ConfigurationError(str(error)) from error
    unknown = sorted(template.variables - PROMPT_VARIABLES[name])
    if unknown:
        allowed = ", ".join(f"${variable}" for variable in sorted(PROMPT_VARIABLES[name]))
        names = ", ".join(f"${variable}" for variable in unknown)
        msg = f"prompt {name!r} uses {names}, which it may not; it may use {allowed}"
        raise ConfigurationError(msg)
    return template


def _read_source(name: str, source: PromptSource) -> str:
    if isinstance(source, Path) or _looks_like_path(source):
        try:
            return Path(source).read_text(encoding="utf-8")
        except OSError as error:
            msg = f"prompt {name!r}: cannot read {source}: {error}"
            raise ConfigurationError(msg) from error
    if not isinstance(source, str) or not source.strip():
        msg = f"prompt {name!r} must be non-empty text or a file path, got {source!r}"
        raise ConfigurationError(msg)
    return source


def _looks_like_path(source: object) -> bool:
    """A one-line string naming a `.md` / `.txt` file, or any existing file."""
    if not isinstance(source, str) or "\n" in source or len(source) > 1024:
        return False
    path = Path(source)
    return path.suffix in (".md", ".txt") or path.is_file()
