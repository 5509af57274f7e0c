"""Reading MCP server configs: the common `mcpServers` JSON / YAML shape."""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast, get_args
from urllib.parse import parse_qsl, urlsplit

import yaml

from agentloop.errors import ConfigurationError
from agentloop.governance.policy import ToolPolicy
from agentloop.mcp.auth import MCPAuth, auth_from_config
from agentloop.observability.redaction import REDACTED, Redactor, redact_data

__all__ = [
    "INHERITED_ENV",
    "LogLevel",
    "MCPServerSpec",
    "SessionScope",
    "is_pattern",
    "load_mcp_config",
    "matches",
]

SessionScope = Literal["toolset", "thread", "run"]
"""`toolset`: one session per server, shared by every run and thread of the toolset;
`run`: one session per run (for servers that keep state per conversation)."""

LogLevel = Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
"""The MCP log levels (RFC 5424 severities), least severe first."""

INHERITED_ENV = (
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LC_ALL", "LC_CTYPE",
    "TMPDIR", "TEMP", "TMP", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV",
    "SYSTEMROOT", "SYSTEMDRIVE", "WINDIR", "COMSPEC", "PATHEXT", "APPDATA",
    "LOCALAPPDATA", "USERPROFILE", "HOMEDRIVE", "HOMEPATH",
)  # fmt: skip
"""The only parent variables a stdio server inherits; its own `env` goes on top."""

_HTTP_TRANSPORTS = {"http", "streamable_http", "streamable-http", "streamable http"}
_ALLOW_KEYS = ("allow", "allowTools", "include")
_DENY_KEYS = ("deny", "denyTools", "exclude")


@dataclass(frozen=True)
class MCPServerSpec:
    """One MCP server to connect to."""

    name: str
    """The server's name in the config; also `metadata["mcp_server"]` of its tools."""
    connection: dict[str, Any]
    """A connection in langchain-mcp-adapters' shape: stdio (`command`, `args`, `env`,
    `cwd`), `streamable_http` or `sse` (`url`, `headers`, and `auth`: an `Auth` of the
    SDK's HTTP library, which `MCPToolset` builds from the `auth` entry)."""
    allow: frozenset[str] | None = None
    """The tool names to keep, or glob patterns of them (`"git_*"`); `None` keeps all."""
    deny: frozenset[str] = frozenset()
    """The tool names (or glob patterns) to drop; wins over `allow`."""
    secrets: frozenset[str] = field(default=frozenset(), repr=False)
    """The values of the server's own `env` and `headers` (and the credential of a
    `Bearer ...` header alone), its URL's path and query values and its `auth` secrets,
    redacted wherever they appear (its `repr` included)."""
    scope: SessionScope = "toolset"
    """Who shares a session: every run and thread (`toolset`: server state is shared by
    every user), each thread its own, reused by its runs (`thread`), or each run its own
    (`run`)."""
    required: bool = False
    """A server that cannot start makes the toolset fail, instead of leaving it out."""
    sampling: bool = False
    """Answer the server's sampling requests with the loop's model."""
    elicitation: bool = True
    send_owner: bool = False
    """Send whom each call serves as `_meta["agentloop/owner"]` (a digest of the run's user
    context, stable across its threads), for a server that keeps users' data apart."""
    """Turn the server's elicitation requests into LangGraph interrupts a person answers."""
    roots: tuple[str, ...] = ()
    """The `file://` roots declared to the server."""
    policies: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per-tool policies (`ToolPolicy` fields) that win over the tools' annotations."""
    log_level: LogLevel | None = None
    """The level asked of the server with `logging/setLevel` (None: the server's own)."""
    auth: MCPAuth | None = None
    """How to authorize with an HTTP server (OAuth or a static bearer token); `MCPToolset`
    runs it. `None`: only the `headers` given."""

    def __repr__(self) -> str:
        """The spec as its fields show it, each of its secrets as `[REDACTED]`.

        A value that is a secret is hidden whole, whatever its length; a secret inside a
        longer value (a URL's query) as the library's `Redactor` finds it.
        """
        within = Redactor(self.secrets, environ={})

        def hide(text: str) -> str:
            return REDACTED if text in self.secrets else within(text)

        shown = (
            f"{item.name}={redact_data(getattr(self, item.name), hide)!r}"
            for item in dataclasses.fields(self)
            if item.repr
        )
        return f"{type(self).__name__}({', '.join(shown)})"


def load_mcp_config(source: str | os.PathLike[str] | Mapping[str, Any]) -> list[MCPServerSpec]:
    """Read MCP servers from a JSON / YAML file or a mapping.

    The shape is `{"mcpServers": {name: {...}}}` or the bare `{name: {...}}`.
    A server with `command` (and `args`, `env`, `cwd`) runs over stdio, with
    only `INHERITED_ENV` from this process under its own `env`; one with `url`
    (and `headers`) is reached over streamable HTTP, or SSE when
    `transport: sse`. `allow` / `allowTools` / `include` and `deny` /
    `denyTools` / `exclude` (or `"tools": {"include": [...], "exclude": [...]}`)
    filter its tools by name or glob pattern (`"search_*"`); `disabled: true` skips it. A
    relative `cwd` (or root) is taken from the config file's folder.
    agentloop's own keys: `scope` (`toolset`, the default: one session shared by
    every run and user; `thread`: one per thread; or `run`),
    `required` (a server that cannot start fails the toolset), `sampling` (the
    loop's model answers the server's sampling requests), `elicitation` (false:
    decline them instead of asking a person), `send_owner` (send whom each call
    serves as `_meta["agentloop/owner"]`), `roots` (paths declared as the
    client's roots) and `policies` (tool name -> `ToolPolicy` fields, such as
    `{"git_log": {"timeout_s": 10}}`, winning over the tool's annotations) and
    `log_level` (the least severe log message the server should send, such as
    `"warning"`, asked with `logging/setLevel`) and `auth` (an HTTP server's
    authorization: `{"flow": "client_credentials", "client_id": ..., "client_secret":
    ..., "scopes": [...]}`, see `MCPAuth`). Other
    keys are ignored, so configs written for other MCP clients load as they are.

    Args:
        source: A `.json`, `.yaml` or `.yml` path, or the parsed mapping.

    Returns:
        The enabled servers, in config order.

    Raises:
        ConfigurationError: The file is missing or unreadable, or a server is
            malformed; the message names the file and the server.
    """
    if isinstance(source, Mapping):
        return _parse_config(source, origin="MCP config", base_dir=None)
    path = Path(source)
    return _parse_config(_read_config_file(path), origin=str(path), base_dir=path.parent)


def _read_config_file(path: Path) -> Any:
    suffix = path.suffix.lower()
    if suffix not in {".json", ".yaml", ".yml"}:
        msg = f"{path}: MCP config must be a .json, .yaml or .yml file"
        raise ConfigurationError(msg)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        msg = f"{path}: MCP config file not found"
        raise ConfigurationError(msg) from None
    except (OSError, UnicodeDecodeError) as exc:
        msg = f"{path}: cannot read MCP config: {exc}"
        raise ConfigurationError(msg) from None
    try:
        if suffix == ".json":
            return json.loads(text)
        return yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        msg = f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        raise ConfigurationError(msg) from None
    except yaml.YAMLError as exc:
        problem = " ".join(str(exc).split())
        msg = f"{path}: invalid YAML: {problem}"
        raise ConfigurationError(msg) from None


def _parse_config(data: Any, *, origin: str, base_dir: Path | None) -> list[MCPServerSpec]:
    if not isinstance(data, Mapping):
        msg = f"{origin}: expected a mapping of MCP servers, got {type(data).__name__}"
        raise ConfigurationError(msg)
    servers = data.get("mcpServers", data)
    if not isinstance(servers, Mapping):
        msg = f"{origin}: 'mcpServers' must be a mapping, got {type(servers).__name__}"
        raise ConfigurationError(msg)
    specs: list[MCPServerSpec] = []
    for name, entry in servers.items():
        where = f"{origin}: server {name!r}"
        if not isinstance(name, str) or not name:
            msg = f"{where}: a server name must be a non-empty string"
            raise ConfigurationError(msg)
        if not isinstance(entry, Mapping):
            msg = f"{where}: expected a mapping, got {type(entry).__name__}"
            raise ConfigurationError(msg)
        disabled = entry.get("disabled", False)
        if not isinstance(disabled, bool):
            msg = f"{where}: 'disabled' must be true or false"
            raise ConfigurationError(msg)
        if not disabled:
            specs.append(_parse_server(name, entry, where=where, base_dir=base_dir))
    return specs


def _parse_server(
    name: str, entry: Mapping[str, Any], *, where: str, base_dir: Path | None
) -> MCPServerSpec:
    transport = entry.get("transport", entry.get("type"))
    if transport is not None and not isinstance(transport, str):
        msg = f"{where}: 'transport' must be a string"
        raise ConfigurationError(msg)
    transport = transport.lower() if transport else None
    has_command, has_url = entry.get("command") is not None, entry.get("url") is not None
    if has_command and has_url:
        msg = f"{where}: give either 'command' (stdio) or 'url' (HTTP), not both"
        raise ConfigurationError(msg)
    if has_command:
        if transport not in (None, "stdio"):
            msg = f"{where}: transport {transport!r} needs a 'url', not a 'command'"
            raise ConfigurationError(msg)
        connection = _stdio_connection(entry, where=where, base_dir=base_dir)
    elif has_url:
        if transport not in (None, "sse", *_HTTP_TRANSPORTS):
            msg = f"{where}: unknown transport {transport!r} (use 'http' or 'sse')"
            raise ConfigurationError(msg)
        connection = _http_connection(entry, sse=transport == "sse", where=where)
    else:
        msg = f"{where}: needs either 'command' (stdio) or 'url' (HTTP)"
        raise ConfigurationError(msg)
    selection = _tool_selection(entry, where=where)
    allow = _tool_names(selection, _ALLOW_KEYS, where=where)
    deny = _tool_names(selection, _DENY_KEYS, where=where)
    headers = _string_map(entry, "headers", where=where, allow_numbers=False)
    own = {
        **_string_map(entry, "env", where=where, allow_numbers=True),
        **headers,
        **_credentials(headers),
        **_url_secrets(connection.get("url")),
    }
    auth = None
    if entry.get("auth") is not None:
        if has_command:
            msg = f"{where}: 'auth' is for HTTP servers (a stdio server gets its secrets in 'env')"
            raise ConfigurationError(msg)
        auth = auth_from_config(entry["auth"], where=where)
    scope = entry.get("scope", "toolset")
    if scope not in ("toolset", "thread", "run"):
        msg = f"{where}: 'scope' must be 'toolset', 'thread' or 'run', got {scope!r}"
        raise ConfigurationError(msg)
    return MCPServerSpec(
        name,
        connection,
        allow,
        deny or frozenset(),
        frozenset(own.values()) | (auth.secrets if auth else frozenset()),
        scope=scope,
        required=_flag(entry, "required", False, where=where),
        sampling=_flag(entry, "sampling", False, where=where),
        elicitation=_flag(entry, "elicitation", True, where=where),
        send_owner=_flag(entry, "send_owner", False, where=where),
        roots=_roots(entry, where=where, base_dir=base_dir),
        policies=_policies(entry, where=where),
        log_level=_log_level(entry, where=where),
        auth=auth,
    )


def _log_level(entry: Mapping[str, Any], *, where: str) -> LogLevel | None:
    level = entry.get("log_level")
    if level is None:
        return None
    if level not in get_args(LogLevel):
        msg = f"{where}: 'log_level' must be one of {', '.join(get_args(LogLevel))}"
        raise ConfigurationError(msg)
    return cast(LogLevel, level)


def _policies(entry: Mapping[str, Any], *, where: str) -> dict[str, dict[str, Any]]:
    raw = entry.get("policies") or {}
    if not isinstance(raw, Mapping):
        msg = f"{where}: 'policies' must map tool names to policies"
        raise ConfigurationError(msg)
    policies: dict[str, dict[str, Any]] = {}
    for tool, fields in raw.items():
        if not isinstance(fields, Mapping):
            msg = f"{where}: the policy of {tool!r} must be a mapping of ToolPolicy fields"
            raise ConfigurationError(msg)
        try:
            ToolPolicy(**fields)
        except (TypeError, ValueError) as error:
            problem = " ".join(str(error).split())
            msg = f"{where}: invalid policy of {tool!r}: {problem}"
            raise ConfigurationError(msg) from None
        policies[str(tool)] = dict(fields)
    return policies


def _flag(entry: Mapping[str, Any], key: str, default: bool, *, where: str) -> bool:
    value = entry.get(key, default)
    if not isinstance(value, bool):
        msg = f"{where}: {key!r} must be true or false"
        raise ConfigurationError(msg)
    return value


def _roots(entry: Mapping[str, Any], *, where: str, base_dir: Path | None) -> tuple[str, ...]:
    roots = entry.get("roots") or []
    if not isinstance(roots, list) or not all(isinstance(r, str) and r for r in roots):
        msg = f"{where}: 'roots' must be a list of paths or file:// URIs"
        raise ConfigurationError(msg)
    uris = []
    for root in roots:
        if root.startswith("file://"):
            uris.append(root)
            continue
        path = Path(root).expanduser()
        if base_dir is not None and not path.is_absolute():
            path = base_dir / path
        uris.append(path.resolve().as_uri())
    return tuple(uris)


def _stdio_connection(
    entry: Mapping[str, Any], *, where: str, base_dir: Path | None
) -> dict[str, Any]:
    command, args = entry["command"], entry.get("args") or []
    if not isinstance(command, str) or not command.strip():
        msg = f"{where}: 'command' must be a non-empty string"
        raise ConfigurationError(msg)
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        msg = f"{where}: 'args' must be a list of strings"
        raise ConfigurationError(msg)
    env = {key: os.environ[key] for key in INHERITED_ENV if key in os.environ}
    env.update(_string_map(entry, "env", where=where, allow_numbers=True))
    connection: dict[str, Any] = {
        "transport": "stdio",
        "command": command,
        "args": list(args),
        "env": env,
    }
    cwd = entry.get("cwd")
    if cwd is not None:
        if not isinstance(cwd, str) or not cwd:
            msg = f"{where}: 'cwd' must be a non-empty string"
            raise ConfigurationError(msg)
        cwd_path = Path(cwd).expanduser()
        if base_dir is not None and not cwd_path.is_absolute():
            cwd_path = base_dir / cwd_path
        connection["cwd"] = str(cwd_path)
    return connection


def _http_connection(entry: Mapping[str, Any], *, sse: bool, where: str) -> dict[str, Any]:
    url = entry["url"]
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        msg = f"{where}: 'url' must be an http:// or https:// URL"
        raise ConfigurationError(msg)
    connection: dict[str, Any] = {"transport": "sse" if sse else "streamable_http", "url": url}
    headers = _string_map(entry, "headers", where=where, allow_numbers=False)
    if headers:
        connection["headers"] = headers
    return connection


def _credentials(headers: Mapping[str, str]) -> dict[str, str]:
    """The credential of each `<scheme> <credential>` header value (`Bearer abc...`).

    A server that echoes the credential shows it without its scheme.
    """
    found = {}
    for name, value in headers.items():
        scheme, _, credential = value.strip().partition(" ")
        if scheme.isalpha() and credential.strip():
            found[f"credential:{name}"] = credential.strip()
    return found


def _url_secrets(url: Any) -> dict[str, str]:
    """The path and query values of a server URL: they often carry a token."""
    if not isinstance(url, str):
        return {}
    parts = urlsplit(url)
    secrets = {f"path:{i}": segment for i, segment in enumerate(parts.path.split("/")) if segment}
    if parts.path.strip("/"):
        secrets["path"] = parts.path
    for i, (_, value) in enumerate(parse_qsl(parts.query, keep_blank_values=False)):
        secrets[f"query:{i}"] = value
    return secrets


def _string_map(
    entry: Mapping[str, Any], key: str, *, where: str, allow_numbers: bool
) -> dict[str, str]:
    value = entry.get(key)
    if value is None:
        return {}
    scalar: tuple[type, ...] = (str, int, float) if allow_numbers else (str,)
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, scalar) and not isinstance(v, bool)
        for k, v in value.items()
    ):
        msg = f"{where}: '{key}' must map names to strings"
        raise ConfigurationError(msg)
    return {k: str(v) for k, v in value.items()}


def _tool_selection(entry: Mapping[str, Any], *, where: str) -> Mapping[str, Any]:
    """Where a server's allow and deny lists are: its entry, or its `tools` mapping."""
    tools = entry.get("tools")
    if tools is None:
        return entry
    if not isinstance(tools, Mapping) or not set(tools) <= {*_ALLOW_KEYS, *_DENY_KEYS}:
        msg = f"{where}: 'tools' must be a mapping with 'include' and 'exclude' lists"
        raise ConfigurationError(msg)
    if given := [k for k in (*_ALLOW_KEYS, *_DENY_KEYS) if entry.get(k) is not None]:
        msg = f"{where}: give the tool lists either in 'tools' or as {given[0]!r}, not both"
        raise ConfigurationError(msg)
    return tools


def _tool_names(
    entry: Mapping[str, Any], keys: tuple[str, ...], *, where: str
) -> frozenset[str] | None:
    given = [k for k in keys if entry.get(k) is not None]
    if len(given) > 1:
        msg = f"{where}: give only one of {', '.join(repr(k) for k in given)}"
        raise ConfigurationError(msg)
    if not given:
        return None
    names = entry[given[0]]
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        msg = f"{where}: {given[0]!r} must be a list of tool names or patterns"
        raise ConfigurationError(msg)
    return frozenset(names)


def is_pattern(name: str) -> bool:
    """Whether an allow or deny entry is a glob pattern (`*`, `?`, `[...]`), not a name."""
    return any(char in name for char in "*?[")


def matches(name: str, entries: frozenset[str]) -> bool:
    """Whether a tool name is one of `entries` or matches one of its glob patterns."""
    return name in entries or any(
        fnmatch.fnmatchcase(name, entry) for entry in entries if is_pattern(entry)
    )
