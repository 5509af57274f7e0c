"""Keeping secrets out of records, events, logs, prompts and checkpoints.

One `redact` hook (text in, text out) is applied to every tool error, result and note,
every event, every log line of the library, every prompt sent to a model and everything
the loop writes to state. The default `Redactor` replaces with `[REDACTED]`:

- the values of environment variables whose names look secret (KEY, TOKEN, SECRET,
  PASSWORD, CREDENTIAL, ...), read when the loop is built;
- values it is given, such as the `env` and `headers` of MCP server configs;
- common credential shapes: bearer tokens, `api_key=...`-style parameters, and provider
  key prefixes (`sk-`, `ghp_`, `github_pat_`, `xox?-`, `AKIA`, `AIza`, `glpat-`, JWTs).
"""

from __future__ import annotations

import logging
import os
import re
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = [
    "REDACTED",
    "Redact",
    "Redactor",
    "install_log_redaction",
    "redact_data",
    "secret_env_values",
]

REDACTED = "[REDACTED]"

Redact = Callable[[str], str]
"""A redaction hook: text in, text with secrets replaced out."""

SECRET_NAME = re.compile(
    r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|AUTH|PRIVATE|SESSION|COOKIE|DSN",
    re.IGNORECASE,
)
"""Environment variable names whose values are treated as secrets."""
MIN_SECRET_LENGTH = 8
"""Shorter values are not redacted as literal secrets (too many false hits)."""

CREDENTIAL_SHAPES: tuple[str, ...] = (
    r"\b(?i:bearer)\s+[A-Za-z0-9\-._~+/]{8,}=*",
    r"\b(?i:basic)\s+[A-Za-z0-9+/]{12,}=*",
    r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_\-]{16,}",
    r"\bgh[pousr]_[A-Za-z0-9]{20,}",
    r"\bgithub_pat_[A-Za-z0-9_]{20,}",
    r"\bxox[abposr]-[A-Za-z0-9\-]{10,}",
    r"\bAKIA[0-9A-Z]{16}\b",
    r"\bAIza[0-9A-Za-z\-_]{35}",
    r"\bglpat-[A-Za-z0-9\-_]{20,}",
    r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
)
"""Credential shapes redacted whole."""
PARAMETER = (
    r"(?P<name>\b(?i:api[_\-]?key|apikey|access[_\-]?token|auth[_\-]?token|"
    r"refresh[_\-]?token|token|secret|client[_\-]?secret|password|passwd|signature|"
    r"x-amz-signature)=)(?P<value>[^&\s\"',;]{4,})"
)
"""`name=value` parameters (query strings, form bodies) whose value is redacted."""
_SHORTEST_MATCH = 8
"""No literal secret, credential shape or parameter is shorter: shorter text is left alone."""
_MEMO_MAX_CHARS = 512
_MEMO_ENTRIES = 4096


def secret_env_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """The values of environment variables whose names look secret."""
    environ = os.environ if environ is None else environ
    return [value for name, value in environ.items() if SECRET_NAME.search(name) and value]


class Redactor:
    """The default redaction hook: literal secrets, then credential shapes.

    Args:
        secrets: Literal values to redact (shorter than 8 characters are ignored).
        environ: Where to read secret-looking variables from (default: `os.environ`;
            pass `{}` to read none).
        shapes: Regular expressions of credentials to redact whole.
    """

    def __init__(
        self,
        secrets: Iterable[str] = (),
        *,
        environ: Mapping[str, str] | None = None,
        shapes: Iterable[str] = CREDENTIAL_SHAPES,
    ) -> None:
        values = {
            value
            for value in [*secret_env_values(environ), *secrets]
            if isinstance(value, str) and len(value) >= MIN_SECRET_LENGTH
        }
        self.secrets = frozenset(values)
        self.shapes = tuple(shapes)
        ordered = sorted(values, key=len, reverse=True)
        alternatives = [*map(re.escape, ordered), *(f"(?:{shape})" for shape in self.shapes)]
        # One pass: a parameter's value, else a literal secret (longest first) or a shape.
        self._pattern = re.compile(f"{PARAMETER}|" + "|".join(alternatives))
        self._memo: dict[str, str] = {}
        self._lock = threading.Lock()

    def with_secrets(self, secrets: Iterable[str]) -> Redactor:
        """Return a redactor that also redacts `secrets`."""
        return Redactor(self.secrets | set(secrets), environ={}, shapes=self.shapes)

    def __call__(self, text: str) -> str:
        """Return `text` with secrets replaced by `[REDACTED]`."""
        if len(text) < _SHORTEST_MATCH:
            return text
        if len(text) > _MEMO_MAX_CHARS:
            return self._pattern.sub(_replace, text)
        found = self._memo.get(text)
        if found is None:
            found = self._pattern.sub(_replace, text)
            with self._lock:
                if len(self._memo) >= _MEMO_ENTRIES:
                    self._memo.clear()
                self._memo[text] = found
        return found


def _replace(match: re.Match[str]) -> str:
    name = match.group("name")
    if name is None:
        return REDACTED
    if match.group("value").startswith("[REDACTED"):
        return match.group(0)
    return f"{name}{REDACTED}"


def redact_data(value: Any, redact: Redact, _depth: int = 0) -> Any:
    """Apply `redact` to every string of JSON-like data (keys included); a new value."""
    if isinstance(value, str):
        return redact(value)
    if _depth > 64:
        return value
    if isinstance(value, dict):
        return {
            (redact(key) if isinstance(key, str) else key): redact_data(item, redact, _depth + 1)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return type(value)(redact_data(item, redact, _depth + 1) for item in value)
    return value


# --- log lines -----------------------------------------------------------------------------

_hooks: weakref.WeakSet[Any] = weakref.WeakSet()
_hooks_lock = threading.Lock()
_default: list[Redactor] = []


class _LogRedaction(logging.Filter):
    """Redacts the library's log lines with the default redactor and every loop's hook."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:
            return True
        with _hooks_lock:
            hooks: list[Any] = [*_default, *list(_hooks)]
        redacted = message
        for hook in hooks:
            try:
                redacted = hook(redacted)
            except Exception:
                continue
        if redacted != message:
            record.msg, record.args = redacted, None
        return True


_FILTER = _LogRedaction()


def install_log_redaction(logger: logging.Logger, hook: Any = None) -> logging.Logger:
    """Redact a library logger's lines (and register a loop's hook for all of them)."""
    with _hooks_lock:
        if not _default:
            _default.append(Redactor())
        if hook is not None:
            try:
                _hooks.add(hook)
            except TypeError:  # a hook that cannot be weakly referenced: keep it
                _default.append(hook)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
    return logger
