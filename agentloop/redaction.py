"""Keeping secrets out of records, events, logs, prompts and checkpoints.

One `redact` hook (text in, text out) is applied to every tool error, result and note,
every event, every log line of the library, every prompt sent to a model and everything
the loop writes to state. The default `Redactor` replaces with `[REDACTED]`:

- the values of environment variables whose names look secret (KEY, TOKEN, SECRET,
  PASSWORD, CREDENTIAL, ...), read when the loop is built;
- values it is given, such as the `env` and `headers` of MCP server configs and the
  path and query values of their URLs;
- each of those literal secrets also in any letter case, URL-encoded and base64-encoded
  (standard or URL-safe, at any alignment inside a longer encoded text);
- common credential shapes: bearer tokens, `api_key=...`-style parameters, and provider
  key prefixes (`sk-`, `ghp_`, `github_pat_`, `xox?-`, `AKIA`, `AIza`, `glpat-`, JWTs).
"""

from __future__ import annotations

import base64
import logging
import os
import re
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import quote, quote_plus

__all__ = [
    "REDACTED",
    "REDACTED_LOGGERS",
    "EnvironmentRedactor",
    "Redact",
    "Redactor",
    "encoded_forms",
    "install_log_redaction",
    "redact_log_record",
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
_LONGEST_NAME = len("x-amz-signature=")
_MEMO_ENTRIES = 4096
SHAPE_TRIGGERS = (
    "bearer", "basic", "sk-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "xox",
    "akia", "aiza", "glpat-", "eyj", "key=", "token=", "secret=", "password=", "passwd=",
    "signature=",
)  # fmt: skip
"""Lower-case text without which no credential shape or parameter can match: a long text
holding none of them (nor a literal secret) is returned without running the pattern."""


def _base64_cores(secret: str) -> set[str]:
    """The parts of the base64 of any text holding `secret` that depend only on it.

    Base64 encodes three bytes as four characters, so the encoding of a secret inside a
    longer text depends on its offset modulo 3; for each offset, the characters made only
    of the secret's bits are the same whatever surrounds it.
    """
    data = secret.encode("utf-8")
    cores: set[str] = set()
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + data).decode("ascii")
        first = -(-offset * 8 // 6)
        last = (offset + len(data)) * 8 // 6
        core = encoded[first:last]
        if len(core) >= MIN_SECRET_LENGTH:
            cores.update({core, core.translate(str.maketrans("+/", "-_"))})
    return cores


def encoded_forms(secret: str) -> tuple[set[str], set[str]]:
    """The forms of a literal secret to redact.

    Returns:
        The forms matched in any letter case (the secret, URL-encoded), and the base64
        forms, matched exactly.
    """
    any_case = {secret, quote(secret, safe=""), quote_plus(secret)}
    return any_case, _base64_cores(secret)


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
        any_case: set[str] = set()
        exact: set[str] = set()
        for value in values:
            folded, encoded = encoded_forms(value)
            any_case |= folded
            exact |= encoded
        literals = [(form, True) for form in any_case] + [(form, False) for form in exact]
        literals.sort(key=lambda item: len(item[0]), reverse=True)
        alternatives = [
            *(f"(?i:{re.escape(form)})" if fold else re.escape(form) for form, fold in literals),
            *(f"(?:{shape})" for shape in self.shapes),
        ]
        # One pass: a parameter's value, else a literal secret in one of its forms (longest
        # first) or a shape.
        self._pattern = re.compile(f"{PARAMETER}|" + "|".join(alternatives))
        # a secret inside a parameter's name (`SIGNATURE=`) goes with the whole match
        self._in_names = tuple(
            form for form in {form.lower() for form, _ in literals} if len(form) <= _LONGEST_NAME
        )
        self._triggers: tuple[str, ...] | None = (
            (*SHAPE_TRIGGERS, *{form.lower() for form, _ in literals})
            if self.shapes == CREDENTIAL_SHAPES
            else None
        )
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
            if self._triggers is not None:
                lowered = text.lower()
                if not any(trigger in lowered for trigger in self._triggers):
                    return text
            return self._pattern.sub(self._replace, text)
        found = self._memo.get(text)
        if found is None:
            found = self._pattern.sub(self._replace, text)
            with self._lock:
                if len(self._memo) >= _MEMO_ENTRIES:
                    self._memo.clear()
                self._memo[text] = found
        return found

    def _replace(self, match: re.Match[str]) -> str:
        name = match.group("name")
        if name is None:
            return REDACTED
        if self._in_names and any(form in name.lower() for form in self._in_names):
            return REDACTED
        return _replace(match)


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


class EnvironmentRedactor:
    """A `Redactor` of the environment as it is now (made again when its secrets change).

    The default hook of log records: a secret exported after the library was imported is
    redacted from the next record on.
    """

    def __init__(self) -> None:
        self._values: tuple[str, ...] | None = None
        self._redactor = Redactor(environ={})
        self._lock = threading.Lock()

    def __call__(self, text: str) -> str:
        """Return `text` with the environment's secrets and credential shapes replaced."""
        values = tuple(secret_env_values())
        with self._lock:
            if values != self._values:
                self._values, self._redactor = values, Redactor(values, environ={})
            redactor = self._redactor
        return redactor(text)


# --- log lines -----------------------------------------------------------------------------

REDACTED_LOGGERS = ("agentloop", "mcp", "httpx", "httpcore")
"""Loggers (and their children) whose records are redacted: the library's, and those of the
MCP SDK and its HTTP client, which log server URLs and messages."""

_hooks: weakref.WeakSet[Any] = weakref.WeakSet()
_hooks_lock = threading.Lock()
_default: list[Any] = [EnvironmentRedactor()]
_installed: list[Callable[..., logging.LogRecord]] = []


def _redact_text(text: str) -> str:
    with _hooks_lock:
        hooks: list[Any] = [*_default, *list(_hooks)]
    for hook in hooks:
        try:
            text = hook(text)
        except Exception:
            continue
    return text


def redact_log_record(record: logging.LogRecord) -> logging.LogRecord:
    """Redact a record's message and exception text with every registered hook (in place)."""
    try:
        message = record.getMessage()
    except Exception:
        return record
    redacted = _redact_text(message)
    if redacted != message:
        record.msg, record.args = redacted, None
    if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
        text = logging.Formatter().formatException(record.exc_info)
        safe = _redact_text(text)
        if safe != text:
            record.exc_text = safe
    return record


def _redacted(name: object) -> bool:
    if not isinstance(name, str):  # `logging.makeLogRecord` makes records named None
        return False
    return any(name == root or name.startswith(root + ".") for root in REDACTED_LOGGERS)


def _install_factory() -> None:
    """Redact each record of `REDACTED_LOGGERS` where it is made, whatever handles it.

    Logger filters do not see records propagated from child loggers, and handlers may be
    added at any time; the record factory sees every record of every logger, once.
    """
    if _installed and logging.getLogRecordFactory() is _installed[0]:
        return
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        if _redacted(record.name):
            redact_log_record(record)
        return record

    _installed[:] = [factory]
    logging.setLogRecordFactory(factory)


def install_log_redaction(logger: logging.Logger, hook: Any = None) -> logging.Logger:
    """Redact the log records of the library, the MCP SDK and its HTTP client.

    Every record of the `agentloop`, `mcp`, `httpx` and `httpcore` loggers and their
    children is redacted when it is made (by the default `Redactor` and every hook
    registered here), before any filter or handler sees it.

    Args:
        logger: Returned as it is (`logger = install_log_redaction(getLogger(__name__))`).
        hook: A loop's (or an MCP toolset's) redaction hook, registered for all records.

    Returns:
        `logger`.
    """
    with _hooks_lock:
        if hook is not None:
            try:
                _hooks.add(hook)
            except TypeError:  # a hook that cannot be weakly referenced: keep it
                _default.append(hook)
    _install_factory()
    return logger
