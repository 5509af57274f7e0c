"""Keeping secrets out of records, events, logs, prompts and checkpoints.

One `redact` hook (text in, text out) is applied to every tool error, result and note,
every event, every prompt sent to a model and everything the loop writes to state; log
records are redacted once the app installs it (`install_log_redaction`). The default
`Redactor` replaces with `[REDACTED]`:

- the values of environment variables whose names look secret (KEY, TOKEN, SECRET,
  PASSWORD, CREDENTIAL, ...), read when the loop is built;
- values it is given, such as the `env` and `headers` of MCP server configs and the
  path and query values of their URLs;
- each of those literal secrets also in any letter case, URL-encoded and base64-encoded
  (standard or URL-safe, at any alignment inside a longer encoded text);
- credential shapes: provider key prefixes (`sk-`, `ghp_`, `github_pat_`, `xox?-`,
  `AKIA`, `AIza`, `glpat-`, `sk_live_`/`rk_live_`, `SG.`, `SK` and 32 hex digits, `npm_`,
  `hf_`), JWTs and PEM private keys, redacted whole, and a bare AWS secret access key
  (40 characters of base64 that look random, `looks_random`);
- the value after a credential's name (`Bearer`, `Basic`, `password=`, `token: `,
  `"client_secret": "..."`, `AccountKey=`, `aws_secret_access_key = `,
  `"private_key_id": "..."`), only when it looks like a credential (`credential_like`):
  `token=True`, `tokens=128` and `api_key=${API_KEY}` are left alone;
- the password of a URL (`postgresql://user:PASSWORD@host/db`, any scheme): the scheme,
  user and host stay.

`redact_data` is the one pass that applies a hook to every string of any value (the
record, callbacks, tracers, `astream_events` and log `extra=` fields all see its output).
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import itertools
import logging
import math
import os
import re
import threading
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from enum import Enum
from typing import Any
from urllib.parse import quote, quote_plus

from langchain_core.messages import BaseMessage
from langgraph.types import Command

from agentloop.base.jsonable import (
    CYCLE_MARKER,
    MAX_DEPTH,
    TOO_DEEP_MARKER,
    CutText,
    serialize,
)

__all__ = [
    "REDACTED",
    "REDACTED_LOGGERS",
    "EnvironmentRedactor",
    "UnreadableValueError",
    "Redact",
    "Redactor",
    "credential_like",
    "encoded_forms",
    "looks_random",
    "LogRedaction",
    "install_log_redaction",
    "installed_log_redaction",
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
    r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_\-]{16,}",
    r"\bgh[pousr]_[A-Za-z0-9]{20,}",
    r"\bgithub_pat_[A-Za-z0-9_]{20,}",
    r"\bxox[abposr]-[A-Za-z0-9\-]{10,}",
    r"\bAKIA[0-9A-Z]{16}\b",
    r"\bAIza[0-9A-Za-z\-_]{35}",
    r"\bglpat-[A-Za-z0-9\-_]{20,}",
    r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----[\s\S]*?"
    r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|\Z)",
    r"\b[rs]k_(?:live|test|prod)_[A-Za-z0-9]{16,}",
    r"\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}",
    r"\bSK[0-9a-f]{32}\b",
    r"\bnpm_[A-Za-z0-9]{36}\b",
    r"\bhf_[A-Za-z0-9]{30,}\b",
)
"""Credential shapes redacted whole: provider key prefixes (OpenAI, Anthropic, GitHub,
Slack, AWS key ids, Google, GitLab, Stripe secret and restricted keys, SendGrid, Twilio
API key SIDs, npm, Hugging Face), JWTs, PEM private keys (an unterminated block to the
end of the text)."""
PARAMETER = (
    r"(?P<name>(?:\b(?i:bearer|basic)\s+)|"
    r"(?:\b(?:[A-Za-z0-9]+[_\-])*(?:"
    r"(?i:api[_\-]?key|apikey|access[_\-]?token|auth[_\-]?token|refresh[_\-]?token|token|"
    r"secret|client[_\-]?secret|password|passwd|signature|x-amz-signature|"
    r"secret[_\-]?key|(?:shared[_\-]?)?access[_\-]?key|account[_\-]?key|"
    r"private[_\-]?key[_\-]?id)(?:=|\"?\s*:\s*\"?)|"
    r"(?i:secret[_\-]?access[_\-]?key|session[_\-]?token)\"?[ \t]*[=:][ \t]*\"?)))"
    r"(?P<value>(?!-----BEGIN)[^&\s\"',;]{8,})"
)
"""A credential after its name: `Bearer ...`, `Basic ...`, or `name=value`, `name: value`
and `"name": "value"` for a secret-looking name (`password`, `api_key`, `client_secret`,
`*_token`, `SECRET_KEY`, Azure's `AccountKey` and `SharedAccessKey`, a GCP service
account's `private_key_id`...), and `name = value` as in `~/.aws/credentials` for
`aws_secret_access_key` and `aws_session_token`. Only a value that looks like a
credential is redacted (`credential_like`); a PEM block after the name is left to its
own shape, which takes it whole."""
URL_PASSWORD = re.compile(
    r"(?P<user>://[^\s:/?#@\"'<>\\]{0,128}:)"
    r"(?P<password>[^\s/?#\"'<>\\]{1,256})(?=@[^\s/?#@\"'<>\\])"
)
"""The password of a URL's user (`postgresql://user:PASSWORD@host`, `redis://:PASSWORD@`,
any scheme), up to the last `@` before the host: the scheme, user and host stay."""
BARE_KEY = re.compile(
    r"(?<![A-Za-z0-9/+=_\-.])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=_\-]|\.[A-Za-z0-9])"
)
"""A bare AWS secret access key: 40 characters of base64 standing alone, redacted when
they look random (`looks_random`: not a hex digest, a path or a CamelCase name)."""
PLACEHOLDER = re.compile(
    r"[$%<{\[*]|(?i:x{4,}|\.{3,}|true|false|none|null|nil|undefined|required|optional|"
    r"disabled|enabled|redacted|hidden|unset|empty|changeme|example|placeholder|your[_\-])"
)
"""Values that stand for a credential rather than being one: `${API_KEY}`, `<token>`,
`{{secret}}`, `%(password)s`, `****`, `xxxx`, `[REDACTED]`, `none`, `required`..."""
_SHORTEST_MATCH = 8
"""No literal secret, credential shape or parameter is shorter: shorter text is left alone."""
_MEMO_MAX_CHARS = 512
_LONGEST_NAME = len("x-amz-signature=")
_MEMO_ENTRIES = 4096
SHAPE_TRIGGERS = (
    "bearer", "basic", "sk-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "xox",
    "akia", "aiza", "glpat-", "eyj", "key", "token", "secret", "passw", "signature",
    "private key", "sk_", "rk_", "sg.", "npm_", "hf_",
)  # fmt: skip
"""Lower-case text without which no credential shape or parameter can match: a long text
holding none of them (nor a literal secret, nor `SK`, which starts a Twilio SID) is not
searched for them."""
_BASE64_RUN = b"+" * 40
_AS_BASE64 = bytes(
    ord("+") if chr(byte).isascii() and (chr(byte).isalnum() or chr(byte) in "/+") else ord(" ")
    for byte in range(256)
)
"""Turns each base64 character of UTF-8 text into `+` and any other byte into a space: a
text whose translation holds no `_BASE64_RUN` holds no bare key (a fast test in C)."""
_WORDS = re.compile(r"[a-z]{4,}")
_MOST_WORD_CHARS = 15
"""A bare 40-character key with more characters in lower-case runs of 4 or more is words
(a path, a CamelCase name): random base64 has as many in fewer than 3 keys in 1,000."""
_LEAST_ENTROPY = 4.0
"""Bits per character below which a bare 40-character key is a repeated pattern."""


def looks_random(key: str) -> bool:
    """Tell whether a bare 40-character base64 text looks like a random key.

    It does when it mixes upper case, lower case and digits (a hex digest does not),
    holds few lower-case words (at most 15 characters in runs of 4 or more: a path or a
    CamelCase name holds more) and has 4 bits of entropy per character or more (a
    repeated pattern has less). AWS's documented example key
    `wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY` does.
    """
    if not (
        any(c.isupper() for c in key)
        and any(c.islower() for c in key)
        and any(c.isdigit() for c in key)
    ):
        return False
    if sum(len(word) for word in _WORDS.findall(key)) > _MOST_WORD_CHARS:
        return False
    size = len(key)
    entropy = -sum(n / size * math.log2(n / size) for n in Counter(key).values())
    return entropy >= _LEAST_ENTROPY


def credential_like(value: str) -> bool:
    """Tell whether the value of a secret-looking parameter looks like a credential.

    It does when it has 8 characters or more, is no placeholder (`PLACEHOLDER`) and either
    mixes two kinds of characters (lower case, upper case, digits, other symbols; `_`,
    `-` and `.` are not counted) or has 20 characters or more. So `token=True`,
    `tokens=128`, `password=required` and `api_key=${API_KEY}` stay as they are, while
    `password=hunter22` and `token=8f14e45fceea167a5a36` do not.
    """
    if len(value) < _SHORTEST_MATCH or PLACEHOLDER.match(value):
        return False
    if len(value) >= 20:
        return True
    kinds = (
        any(c.islower() for c in value)
        + any(c.isupper() for c in value)
        + any(c.isdigit() for c in value)
        + any(not c.isalnum() and c not in "_-." for c in value)
    )
    return kinds >= 2


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
            *_grouped(self.shapes),
            re.escape(REDACTED),
        ]
        # One pass: a parameter's value, else a literal secret in one of its forms (longest
        # first) or a shape, else the marker itself, kept whole (a secret that matches
        # inside it in another case, `rEDACTED`, would mark it again at every pass). Then
        # URL passwords and bare AWS keys, each only in a text that can hold one (they
        # would slow the one pass down for every text).
        self._pattern = re.compile(f"{PARAMETER}|" + "|".join(alternatives))
        # a parameter's value that is no credential is still searched for literal secrets
        # and shapes (`token=true_SECRET`)
        self._inner = re.compile("|".join(alternatives))
        # a secret inside a parameter's name (`SIGNATURE=`) goes with the whole match
        self._in_names = tuple(
            form for form in {form.lower() for form, _ in literals} if len(form) <= _LONGEST_NAME
        )
        self._triggers: tuple[str, ...] | None = (
            (*SHAPE_TRIGGERS, *{form.lower() for form, _ in literals})
            if self.shapes == CREDENTIAL_SHAPES
            else None
        )
        # read and written without a lock: each dict operation is atomic, and a race can
        # only clear the memo once more or let it pass its bound by an entry
        self._memo: dict[str, str] = {}
        self._memo_stored = 0
        """Entries stored since the memo was last cleared (no `len` call per store; a race
        can only miscount by an entry)."""

    def with_secrets(self, secrets: Iterable[str]) -> Redactor:
        """Return a redactor that also redacts `secrets`."""
        return Redactor(self.secrets | set(secrets), environ={}, shapes=self.shapes)

    def __call__(self, text: str) -> str:
        """Return `text` with secrets replaced by `[REDACTED]`."""
        size = len(text)
        if size < _SHORTEST_MATCH:
            return text
        if size > _MEMO_MAX_CHARS:  # not hashed: it may be megabytes, and is seldom seen again
            found = text
            if self._triggers is None or self._announced(text):
                found = self._pattern.sub(self._replace, text)
            return _without_bare_keys(_without_url_passwords(found))
        try:
            return self._memo[text]
        except KeyError:
            pass
        found = self._pattern.sub(self._replace, text)
        found = _without_bare_keys(_without_url_passwords(found))
        if self._memo_stored >= _MEMO_ENTRIES:
            self._memo.clear()
            self._memo_stored = 0
        self._memo[text] = found
        self._memo_stored += 1
        return found

    def _announced(self, text: str) -> bool:
        """Tell whether a trigger (`SHAPE_TRIGGERS`, a literal secret) or `SK` is in `text`."""
        lowered = text.lower()
        return "SK" in text or any(trigger in lowered for trigger in self._triggers or ())

    def _replace(self, match: re.Match[str]) -> str:
        value = match.group("value")
        if value is not None:  # a parameter
            name = match.group("name")
            if self._in_names and any(form in name.lower() for form in self._in_names):
                return REDACTED
            if credential_like(value):
                return f"{name}{REDACTED}"
            return f"{name}{self._inner.sub(REDACTED, value)}"
        return REDACTED


def _grouped(shapes: Iterable[str]) -> list[str]:
    r"""The shapes as alternatives, those starting with `\b` in a row sharing one `\b`.

    The same matches in the same order of preference, in fewer steps: most positions of
    a text are inside a word, where one test of the shared `\b` rules them all out.
    """
    alternatives: list[str] = []
    bounded: list[str] = []
    for shape in [*shapes, ""]:
        if shape.startswith(r"\b"):
            bounded.append(f"(?:{shape[2:]})")
            continue
        if bounded:
            alternatives.append(r"\b(?:" + "|".join(bounded) + ")")
            bounded = []
        if shape:
            alternatives.append(f"(?:{shape})")
    return alternatives


def _without_url_passwords(text: str) -> str:
    """`text` with the password of each URL (`URL_PASSWORD`) redacted.

    A placeholder (`${PGPASSWORD}`) stays; a password partly redacted already (a literal
    secret inside it) goes whole.
    """
    if "://" not in text:
        return text
    return URL_PASSWORD.sub(_url_password, text)


def _url_password(match: re.Match[str]) -> str:
    password = match.group("password")
    if password == REDACTED or (REDACTED not in password and PLACEHOLDER.match(password)):
        return match.group(0)
    return f"{match.group('user')}{REDACTED}"


def _without_bare_keys(text: str) -> str:
    """`text` with each bare AWS secret key (`BARE_KEY` that `looks_random`) redacted."""
    if len(text) < 40 or _BASE64_RUN not in text.encode("utf-8", "replace").translate(_AS_BASE64):
        return text
    return BARE_KEY.sub(_bare_key, text)


def _bare_key(match: re.Match[str]) -> str:
    key = match.group(0)
    return REDACTED if looks_random(key) else key


class UnreadableValueError(ValueError):
    """A value `redact_data(..., strict=True)` could neither walk nor serialize.

    Args:
        value: The value (only its type is kept).
        error: What reading it raised.
    """

    def __init__(self, value: Any, error: Exception) -> None:
        self.type_name = type(value).__name__
        self.error = error
        super().__init__(f"{self.type_name} ({type(error).__name__}: {error})")


def redact_data(value: Any, redact: Redact, *, strict: bool = False) -> Any:
    """Apply `redact` to every string of any value: the one redaction pass.

    What it walks keeps its shape, and comes back as the same object when nothing in it
    changed:

    - strings (a `CutText` stays one), numbers, None;
    - mappings (a `dict` afterwards), lists, tuples (named ones too), sets and frozensets
      (a list when a member became unhashable), keys included (two keys redacted alike
      both stay: the later one numbered, `"[REDACTED] (2)"`);
    - LangChain messages (content, artifact, additional kwargs) and LangGraph `Command`
      updates, which keep their type;
    - dataclasses and pydantic models, through their fields as JSON data: the same object
      when no field held a secret, else that JSON data, redacted.

    Anything else (an object known only by its `repr`, bytes, a value whose conversion
    fails) is replaced by its serialized form, redacted: never passed on as it is.
    Nesting deeper than `MAX_DEPTH` (50) levels becomes `TOO_DEEP_MARKER` and a container
    inside itself `CYCLE_MARKER`, as in the record. Iterators and async iterators a tool
    returns are passed on unread: the loop reads them later, within the call's bounds.

    Args:
        value: Any value.
        redact: The hook applied to every string.
        strict: Raise `UnreadableValueError` for a value that can be neither walked nor
            serialized (a mapping whose `items` raises...), instead of replacing it by
            `<unreadable TYPE>`.
    """
    return _Redaction(redact, strict).walk(value, 0)


_SCALARS = frozenset({int, float, bool, type(None)})


def _unused_key(mapping: Mapping[Any, Any], key: Any) -> str:
    """`key` numbered (`"[REDACTED] (2)"`, ...) so that it is not yet in `mapping`."""
    number = 2
    while (numbered := f"{key} ({number})") in mapping:
        number += 1
    return numbered


class _Redaction:
    """One walk of `redact_data`: the hook, and the containers it is inside."""

    __slots__ = ("ancestors", "redact", "strict")

    def __init__(self, redact: Redact, strict: bool) -> None:
        self.redact = redact
        self.strict = strict
        self.ancestors: set[int] = set()

    def walk(self, value: Any, depth: int) -> Any:
        kind = type(value)
        if kind is str:
            redacted = self.redact(value)
            return value if redacted == value else redacted
        if kind in _SCALARS:
            return value
        if isinstance(value, str | int | float) and not isinstance(value, Enum):
            return self.text(value) if isinstance(value, str) else value
        if isinstance(value, Iterator | AsyncIterator | range):
            return value
        if depth >= MAX_DEPTH:
            return CutText(TOO_DEEP_MARKER, len(TOO_DEEP_MARKER))
        if id(value) in self.ancestors:
            return CYCLE_MARKER
        self.ancestors.add(id(value))
        try:
            return self.container(value, depth + 1)
        except UnreadableValueError:
            raise
        except Exception:  # a container that cannot be read: its serialized form
            return self.serialized(value, depth)
        finally:
            self.ancestors.discard(id(value))

    def text(self, value: str) -> str:
        plain = str.__str__(value)
        redacted = self.redact(plain)
        if redacted == plain:
            return value
        if isinstance(value, CutText):
            return CutText(redacted, value.original_chars)
        return redacted

    def container(self, value: Any, depth: int) -> Any:
        if isinstance(value, Mapping):
            return self.mapping(value, depth)
        if isinstance(value, list):
            items = [self.walk(item, depth) for item in value]
            return value if _same(items, value) else items
        if isinstance(value, tuple):
            items = [self.walk(item, depth) for item in value]
            if _same(items, value):
                return value
            make = getattr(type(value), "_make", None)  # a named tuple
            return make(items) if callable(make) else tuple(items)
        if isinstance(value, set | frozenset):
            return self.members(value, depth)
        if isinstance(value, BaseMessage):
            return self.message(value, depth)
        if isinstance(value, Command):
            update = self.walk(value.update, depth)
            return value if update is value.update else dataclasses.replace(value, update=update)
        if isinstance(value, bytes | bytearray | memoryview):  # text, or only its size
            return self.walk(serialize(value).value, depth)
        return self.serialized(value, depth)

    def mapping(self, value: Mapping[Any, Any], depth: int) -> Any:
        redact, walk = self.redact, self.walk
        walked: dict[Any, Any] | None = None  # made at the first change only
        for index, (key, item) in enumerate(value.items()):
            if type(key) is str:  # the common cases inline: short text keys and leaves
                redacted = redact(key)
                safe_key = key if redacted == key else redacted
            else:
                safe_key = self.key(key, depth)
            kind = type(item)
            if kind is str:
                redacted = redact(item)
                safe_item = item if redacted == item else redacted
            elif kind in _SCALARS:
                safe_item = item
            else:
                safe_item = walk(item, depth)
            if walked is None:
                if safe_key is key and safe_item is item:
                    continue
                walked = dict(itertools.islice(value.items(), index))
            if safe_key in walked:  # two keys redacted alike: keep both entries
                safe_key = _unused_key(walked, safe_key)
            walked[safe_key] = safe_item
        return value if walked is None else walked

    def key(self, key: Any, depth: int) -> Any:
        if type(key) is str:
            redacted = self.redact(key)
            return key if redacted == key else redacted
        walked = self.walk(key, depth)
        try:
            hash(walked)
        except TypeError:
            return str(walked)
        return walked

    def members(self, value: set[Any] | frozenset[Any], depth: int) -> Any:
        items = [self.walk(item, depth) for item in value]
        if all(a is b for a, b in zip(items, value, strict=True)):
            return value
        try:
            return type(value)(items) if type(value) in (set, frozenset) else set(items)
        except TypeError:  # a member became unhashable JSON data
            return items

    def message(self, value: BaseMessage, depth: int) -> BaseMessage:
        update: dict[str, Any] = {}
        for name in ("content", "artifact", "additional_kwargs"):
            if hasattr(value, name):
                current = getattr(value, name)
                walked = self.walk(current, depth)
                if walked is not current:
                    update[name] = walked
        return value.model_copy(update=update) if update else value

    def serialized(self, value: Any, depth: int) -> Any:
        """An object as JSON data, redacted; the object itself when that changed nothing."""
        try:
            converted = serialize(value)
        except Exception as error:  # a broken container: only its type can be shown safely
            if self.strict:
                raise UnreadableValueError(value, error) from error
            return f"<unreadable {type(value).__name__}>"
        walked = self.walk(converted.value, depth)
        if walked is converted.value and not (converted.cut or converted.opaque):
            return value
        return walked


def _same(items: list[Any], value: list[Any] | tuple[Any, ...]) -> bool:
    return all(a is b for a, b in zip(items, value, strict=True))


class EnvironmentRedactor:
    """A `Redactor` of the environment as it is now (made again when its secrets change).

    The first hook of installed log redaction (`install_log_redaction`): a secret exported
    after it was installed is redacted from the next record on.
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

REDACTED_LOGGERS = ("agentloop", "mcp", "client", "httpx", "httpcore", "httpx2", "httpcore2")
"""Loggers (and their children) whose records are redacted: the library's, and those of the
MCP SDK and its HTTP client, which log server URLs and messages (mcp 2.x's session logs as
`client`, its HTTP client as `httpx2` and `httpcore2`)."""


def _redact_text(text: str, hooks: Iterable[Any]) -> str:
    for hook in hooks:
        try:
            text = hook(text)
        except Exception:
            continue
    return text


def redact_log_record(record: logging.LogRecord, hooks: Iterable[Any]) -> logging.LogRecord:
    """Redact a record's message and exception text with each hook in turn (in place)."""
    chain = list(hooks)
    try:
        message = record.getMessage()
    except Exception:
        return record
    redacted = _redact_text(message, chain)
    if redacted != message:
        record.msg, record.args = redacted, None
    if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
        text = logging.Formatter().formatException(record.exc_info)
        safe = _redact_text(text, chain)
        if safe != text:
            record.exc_text = safe
    return record


class _RedactedAttributes(dict):  # type: ignore[type-arg]
    """A log record's attributes: a field added with `extra=` is redacted as it is set.

    `Logger.makeRecord` adds `extra` fields to the record's `__dict__` after the record
    factory made it; this `__dict__` redacts them there (any shape, `redact_data`), so no
    handler, filter or formatter sees them raw. Copies and pickles are plain dicts.
    """

    def __init__(self, attributes: Mapping[str, Any], redact: Callable[[str], str]) -> None:
        super().__init__(attributes)
        self._redact = redact

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, redact_data(value, self._redact))

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (dict(self),))


def _redacted(name: object) -> bool:
    if not isinstance(name, str):  # `logging.makeLogRecord` makes records named None
        return False
    return any(name == root or name.startswith(root + ".") for root in REDACTED_LOGGERS)


class LogRedaction:
    """Log redaction as installed by `install_log_redaction`: its hooks, and its undoing.

    It is the process's log record factory (wrapping the one it found) while installed.
    """

    def __init__(self, previous: Callable[..., logging.LogRecord]) -> None:
        self._previous = previous
        self._environment = EnvironmentRedactor()
        self._hooks: list[Any] = []
        self._lock = threading.Lock()
        self.installed = False
        """Whether it is the log record factory now (or wrapped by a later one)."""

    def __call__(self, *args: Any, **kwargs: Any) -> logging.LogRecord:
        """Make a record (with the factory found) and redact it if its logger is covered."""
        record = self._previous(*args, **kwargs)
        if self.installed and _redacted(record.name):
            chain = [self._environment, *self.hooks]
            redact_log_record(record, chain)
            # a record class with slots or a fixed `__dict__`: its message only
            with contextlib.suppress(TypeError):
                record.__dict__ = _RedactedAttributes(
                    record.__dict__, lambda text: _redact_text(text, chain)
                )
        return record

    @property
    def hooks(self) -> list[Any]:
        """The hooks applied after the environment's secrets, in the order added."""
        with self._lock:
            return list(self._hooks)

    def add(self, *hooks: Any) -> LogRedaction:
        """Apply more hooks (an MCP toolset's `redact`, a loop's); one added twice counts once.

        Returns:
            This handle.
        """
        with self._lock:
            self._hooks.extend(
                hook for hook in hooks if all(hook is not known for known in self._hooks)
            )
        return self

    def remove(self, hook: Any) -> None:
        """Stop applying a hook (one never added is ignored)."""
        with self._lock:
            self._hooks = [known for known in self._hooks if known is not hook]

    def uninstall(self) -> None:
        """Stop redacting: the factory found at install time is restored.

        When another factory was installed over this one since, this one stays in the
        chain but passes every record through unchanged.
        """
        self.installed = False
        if logging.getLogRecordFactory() is self:
            logging.setLogRecordFactory(self._previous)


def installed_log_redaction() -> LogRedaction | None:
    """The log redaction installed now (None when `install_log_redaction` was not called)."""
    factory = logging.getLogRecordFactory()
    return factory if isinstance(factory, LogRedaction) and factory.installed else None


def install_log_redaction(*hooks: Any) -> LogRedaction:
    """Redact the log records of the library, the MCP SDK and its HTTP client.

    The library changes no process-wide logging by itself: an application (the
    `agentloop` command does) calls this once. From then on every record of the
    `agentloop` and `mcp` loggers, the MCP SDK's HTTP client's (`httpx`, `httpcore`, or
    `httpx2`, `httpcore2` and `client` on mcp 2.x) and their children is redacted
    when it is made, before any filter or handler sees it: its message, its exception
    text and every field given with `extra=` (walked by `redact_data`, whatever its
    shape), by an `EnvironmentRedactor` (the secrets the environment holds at that
    moment, and credential shapes), then by each hook given here or added later.

    Calling it again installs nothing more: the hooks are added to the redaction already
    installed, and the same handle is returned.

    Args:
        *hooks: Redaction hooks for all records, such as an MCP toolset's `redact`
            (its servers' secrets and the tokens its OAuth flows obtained) or the
            `redact` given to `GovernanceOptions`.

    Returns:
        The installed redaction: `add` and `remove` hooks, `uninstall` to undo it.
    """
    current = installed_log_redaction()
    if current is None:
        current = LogRedaction(logging.getLogRecordFactory())
        current.installed = True
        logging.setLogRecordFactory(current)
    return current.add(*hooks)
