"""Prompt templates: files shipped with the package, rendered strictly.

Templates use `$name` placeholders (`string.Template`), so JSON braces need no escaping.
Rendering fails on a missing variable and on an unknown one, so a typo never reaches a model.
"""

from __future__ import annotations

import json
import string
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from agentloop._deprecation import deprecated_alias
from agentloop.errors import PromptTemplateError

__all__ = [
    "PromptFile",
    "load_prompt",
    "prompts_dir",
    "quote_user_text",
    "render_prompt",
    "to_prompt_json",
]

_SOURCE_DIR = Path(__file__).resolve().parent.parent / "prompts"


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

    def render(self, **values: Any) -> str:
        """Fill every placeholder.

        Raises:
            PromptTemplateError: A variable is missing, or one is given that the template
                does not use.
        """
        missing = sorted(self.variables - values.keys())
        unknown = sorted(values.keys() - self.variables)
        if missing or unknown:
            msg = f"prompt {self.name!r}: missing variables {missing}, unknown {unknown}"
            raise PromptTemplateError(msg)
        return self.template.substitute({key: str(value) for key, value in values.items()})


def to_prompt_json(value: Any) -> str:
    """Serialize data for a prompt, so it cannot close the tag it is delimited by."""
    text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)
    return text.replace("</", "<\\/")


def quote_user_text(text: str) -> str:
    """Quote a user's text for a prompt section: one JSON string, no line breaks, no tags.

    The text becomes a JSON string literal whose `<` and `>` are escaped, so it can
    neither close the section it is in nor open a new one.
    """
    quoted = json.dumps(text, ensure_ascii=False)
    return quoted.replace("<", "\\u003c").replace(">", "\\u003e")


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


def render_prompt(name: str, **values: Any) -> str:
    """Load and render a template in one call."""
    return load_prompt(name).render(**values).strip()


def __getattr__(name: str) -> Any:
    if name == "PromptTemplate":
        return deprecated_alias("agentloop.prompts.PromptTemplate", PromptFile)
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)
