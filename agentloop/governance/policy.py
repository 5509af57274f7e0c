"""Per-tool policies: what a user declares, and how the effective policy is resolved."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.tools import BaseTool
from langgraph.types import RetryPolicy
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agentloop.errors import ConfigurationError, is_transient_error
from agentloop.governance.cache_scope import CacheScope

__all__ = [
    "CONJUNCTIONS",
    "DEFAULT_MAX_RESULT_CHARS",
    "DEFAULT_MAX_RESULT_ITEMS",
    "DEFAULT_TIMEOUT_S",
    "LOCAL_STATE",
    "MCP_HINTS",
    "READ_VERBS",
    "SUBAGENT_METADATA",
    "WRITE_WORDS",
    "ResolvedPolicy",
    "ToolPolicy",
    "ToolRetry",
    "is_subagent",
    "reads_by_name",
    "resolve_policy",
]

SUBAGENT_METADATA = "agentloop_subagent"
"""Tool metadata key marking a sub-agent (`as_tool`)."""
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_MAX_RESULT_CHARS = 20_000
DEFAULT_MAX_RESULT_ITEMS = 1_000
"""Items read from an iterator, generator or async generator a tool returns."""

LOCAL_STATE = "local"
"""The default state scope of tools that are not from an MCP server."""

READ_VERBS = ("get", "list", "read", "search", "find", "fetch", "lookup", "describe")
"""Unambiguous read verbs: a tool named by one followed only by nouns (`search`,
`get_weather`, `fetchUserProfile`; not `getaway`, see `WRITE_WORDS`) that declares
nothing else is read-only (concurrency-safe and idempotent). Every other undeclared tool
is a write."""

WRITE_WORDS = frozenset(
    {
        # create, change, store
        "add", "append", "create", "edit", "insert", "modify", "overwrite", "patch",
        "put", "replace", "save", "set", "store", "unset", "update", "upsert", "write",
        # remove, reset
        "clear", "del", "delete", "destroy", "drop", "erase", "flush", "purge", "remove",
        "reset", "rm", "truncate", "wipe",
        # run, start, stop
        "apply", "deploy", "exec", "execute", "install", "invoke", "kill", "launch",
        "reboot", "restart", "run", "start", "stop", "terminate", "trigger", "uninstall",
        # version control, files
        "commit", "copy", "cp", "download", "merge", "move", "mv", "push", "rename",
        "revert", "rollback", "upload",
        # send, publish, decide
        "approve", "notify", "post", "publish", "reject", "send", "submit",
        # money, trade, reservations
        "book", "buy", "cancel", "charge", "order", "pay", "purchase", "refund",
        "reserve", "sell", "transfer", "withdraw",
        # access, membership, state
        "archive", "assign", "ban", "block", "disable", "enable", "grant", "invite",
        "lock", "register", "restore", "revoke", "subscribe", "unassign", "unban",
        "unblock", "unlock", "unsubscribe",
        # counters
        "decrement", "increment",
    }
)  # fmt: skip
"""Words that keep a name with a read verb a write, wherever they stand in it: verbs with
side effects, compared as whole words in any case (`get_and_delete`, `getOrCreate`,
`list-delete`), so `get_settings` and `get_deleted_items` stay reads. A word that is also
a noun keeps the name a write all the same (`get_order`, `get_set`, `list_run_logs`):
a read taken for a write only loses speed, a write taken for a read may run twice.
Declare `read_only=True` for such a tool."""

CONJUNCTIONS = frozenset({"and", "or", "then"})
"""Words that join a second action to the first (`search_and_tidy`, `find_or_make`): a
name holding one is a write, whatever the words around it, since the rule cannot tell a
verb it does not list from a noun (`get_terms_and_conditions` is a write too)."""


class ToolRetry(BaseModel):
    """How a tool call is retried (exponential backoff with jitter, built on tenacity)."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    max_attempts: int = Field(default=3, ge=1, description="Attempts in all, the first included.")
    initial_delay_s: float = Field(default=0.5, ge=0, description="Wait before the 2nd attempt.")
    multiplier: float = Field(default=2.0, ge=1, description="Growth of the wait per attempt.")
    max_delay_s: float = Field(default=30.0, ge=0, description="Upper bound of one wait.")
    jitter: bool = Field(default=True, description="Add up to one initial delay at random.")
    retry_on: Callable[[BaseException], bool] | tuple[type[BaseException], ...] = Field(
        default=is_transient_error,
        description="Exception types, or a predicate, that make an error retryable.",
    )

    def should_retry(self, error: BaseException) -> bool:
        """Tell whether `error` is retryable under this policy."""
        if isinstance(self.retry_on, tuple):
            return isinstance(error, self.retry_on)
        return bool(self.retry_on(error))

    @classmethod
    def of(cls, policy: ToolRetry | RetryPolicy) -> ToolRetry:
        """Accept LangGraph's `RetryPolicy` where a tool retry policy is taken.

        Its fields map one to one (`initial_interval` -> `initial_delay_s`,
        `backoff_factor` -> `multiplier`, `max_interval` -> `max_delay_s`), `retry_on`
        included.
        """
        if isinstance(policy, ToolRetry):
            return policy
        if not isinstance(policy, RetryPolicy):
            msg = f"a tool retry policy must be a ToolRetry or a RetryPolicy, got {policy!r}"
            raise ConfigurationError(msg)
        retry_on: Any = policy.retry_on
        if isinstance(retry_on, type):
            retry_on = (retry_on,)
        elif isinstance(retry_on, Sequence):
            retry_on = tuple(retry_on)
        return cls(
            max_attempts=policy.max_attempts,
            initial_delay_s=policy.initial_interval,
            multiplier=max(policy.backoff_factor, 1.0),
            max_delay_s=policy.max_interval,
            jitter=policy.jitter,
            retry_on=retry_on,
        )


class ToolPolicy(BaseModel):
    """What a user declares about one tool. Fields left as None come from defaults.

    Resolution order for each field: this policy (given to `create_tool_loop`), then
    `tool.metadata["agentloop"]` (for an MCP tool: the server's `policies` in its
    config), then MCP annotations, then name rules, then defaults.
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True, extra="forbid")

    read_only: bool | None = Field(
        default=None,
        description="Only reads: True makes it concurrency-safe and idempotent, False makes it "
        "run alone and never be repeated automatically (unless those are declared too).",
    )
    concurrency_safe: bool | None = Field(
        default=None, description="May run in parallel with other safe calls."
    )
    idempotent: bool | None = Field(
        default=None, description="Running it twice has the effect of once (retry, cache)."
    )
    timeout_s: float | None = Field(default=None, gt=0, description="Time limit of one attempt.")
    retry: ToolRetry | None = Field(
        default=None,
        description="Retry policy (idempotent only); a LangGraph `RetryPolicy` is accepted.",
    )
    cache_ttl_s: float | None = Field(
        default=None, ge=0, description="Cache successful results this long (idempotent only)."
    )
    stale_fallback_s: float | None = Field(
        default=None,
        gt=0,
        description="Keep the last good result this long and return it, marked stale with "
        "its age, when the tool fails (idempotent only; off by default).",
    )
    cache_scope: CacheScope | None = Field(
        default=None,
        description="Who a cached or last good result may answer: 'identity' (default: the "
        "same thread, context and user configuration) or 'global' (every run; only for "
        "data that is the same for everyone).",
    )
    stub_result: Any = Field(default=None, description="Degraded result used when all failed.")
    arg_aliases: Mapping[str, tuple[str, ...] | list[str]] | None = Field(
        default=None, description="Canonical argument name -> names the model may use instead."
    )
    dedup_keys: tuple[str, ...] | list[str] | None = Field(
        default=None, description="Arguments that identify the same query (default: all)."
    )
    check_result: Callable[[Any], bool | str] | None = Field(
        default=None,
        description="Judge of a successful result: False or a reason string flags it as useless.",
    )
    max_result_chars: int | None = Field(
        default=None, gt=0, description="Longer results are truncated (default 20,000)."
    )
    max_result_items: int | None = Field(
        default=None,
        gt=0,
        description="Items read from an iterator or (async) generator result (default 1,000).",
    )
    rate_limit_per_s: float | None = Field(
        default=None, gt=0, description="At most this many calls per second (all runs)."
    )
    state_scope: str | None = Field(
        default=None,
        min_length=1,
        description="The state the tool reads or writes: a call with side effects makes "
        "earlier reads of the same state stale (duplicate detection and the cache then "
        "run them again). Default: one state for all local tools, one per MCP server.",
    )
    state_keys: tuple[str, ...] | list[str] | None = Field(
        default=None,
        description="Arguments naming the part of the state a call touches (for example "
        '`("account",)`): a write then makes stale only the reads that agree with it on '
        "every such argument both have.",
    )

    @field_validator("retry", mode="before")
    @classmethod
    def _accept_retry_policy(cls, value: Any) -> Any:
        return ToolRetry.of(value) if isinstance(value, RetryPolicy) else value

    def declared(self) -> dict[str, Any]:
        """Return the fields this policy sets explicitly."""
        return {name: getattr(self, name) for name in self.model_fields_set}


@dataclass(frozen=True)
class ResolvedPolicy:
    """The effective policy of one tool, every field decided."""

    concurrency_safe: bool = False
    idempotent: bool = False
    """Repeating a call has the effect of one: retries, the cache, duplicate detection
    and re-running after a crash are allowed."""
    read_only: bool = False
    """The tool only reads (no side effects); shown to the planner."""
    repeat_safe: bool = False
    """Calling it again with the same arguments changes nothing more (what the planner is
    told; a tool with side effects is still never repeated by the loop on its own)."""
    timeout_s: float = DEFAULT_TIMEOUT_S
    retry: ToolRetry | None = None
    cache_ttl_s: float | None = None
    stale_fallback_s: float | None = None
    cache_scope: CacheScope = "identity"
    """Who a cached or last good result may answer (see `agentloop.governance.cache_scope`)."""
    stub_result: Any = None
    has_stub: bool = False
    arg_aliases: Mapping[str, tuple[str, ...] | list[str]] = field(default_factory=dict)
    dedup_keys: tuple[str, ...] | None = None
    check_result: Callable[[Any], bool | str] | None = None
    max_result_chars: int = DEFAULT_MAX_RESULT_CHARS
    max_result_items: int = DEFAULT_MAX_RESULT_ITEMS
    rate_limit_per_s: float | None = None
    writes_state: bool = True
    """A call may change what reads of its state return: every tool not known to only
    read (declared `read_only=True`, a name `reads_by_name` accepts, MCP `readOnlyHint`)."""
    state_scope: str = LOCAL_STATE
    """The state the tool reads or writes (see `agentloop.governance.freshness`)."""
    state_keys: tuple[str, ...] = ()
    """Arguments that narrow `state_scope` to the part a call touches."""
    resumable: bool = False
    """A call cut off by a crash is entered again instead of reported as `unknown_outcome`
    (sub-agents: their own calls are guarded by the ledger)."""
    classified_by_default: bool = False
    """Nothing declared what the tool does (no policy, no annotation, no name
    `reads_by_name` accepts), so it has the defaults of a write."""

    @property
    def retryable(self) -> bool:
        """Automatic retries are only for idempotent tools with a retry policy."""
        return self.idempotent and self.retry is not None and self.retry.max_attempts > 1


_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
"""One word of a name: letters in one case, or a capital and lower-case letters, or digits."""


def _name_words(name: str) -> list[str]:
    """Split a tool name into its words, in lower case.

    snake_case, kebab-case, dotted names, camelCase and PascalCase all split:
    `get_and_delete`, `getAndDelete`, `GetAndDelete`, `get-and.delete` and
    `GET_AND_DELETE` each give `["get", "and", "delete"]`; `getURLList` gives
    `["get", "url", "list"]`.
    """
    return [word.lower() for word in _WORD.findall(name)]


def reads_by_name(name: str) -> bool:
    """Tell whether a tool's name says it only reads: a read verb, then only nouns.

    The name starts with one of `READ_VERBS`, and no later word is one of `WRITE_WORDS`
    or `CONJUNCTIONS`: `get_weather`, `list_files`, `fetchUserProfile` and
    `get_settings` read; `get_and_delete`, `fetch_and_charge`, `getOrCreate`,
    `list_delete` and `get_set` do not.
    """
    words = _name_words(name)
    if not words or words[0] not in READ_VERBS or not name.lower().startswith(words[0]):
        return False
    return not any(word in WRITE_WORDS or word in CONJUNCTIONS for word in words[1:])


def _name_rule(name: str) -> dict[str, Any]:
    """Relax a tool that `reads_by_name` toward read-only; never the other way."""
    if reads_by_name(name):
        return {**_read_only_rule(True), "repeat_safe": True}
    return {}


MCP_HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
"""The MCP tool annotations, as they appear in an MCP tool's `metadata`."""


def _read_only_rule(read_only: bool) -> dict[str, Any]:
    return {"read_only": read_only, "concurrency_safe": read_only, "idempotent": read_only}


def _annotation_rule(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The policy the MCP spec's annotations imply, with the spec's defaults.

    A tool from an MCP server, or any tool carrying a hint, is read-only only if it
    says so (`readOnlyHint` defaults to false); any other tool may have side effects,
    so it runs alone and is never repeated automatically. `idempotentHint` (default
    false) is passed on to the planner but does not make the loop repeat a write.
    """
    if "mcp_server" not in metadata and not any(key in metadata for key in MCP_HINTS):
        return {}
    read_only = metadata.get("readOnlyHint") is True
    rule = _read_only_rule(read_only)
    rule["repeat_safe"] = read_only or metadata.get("idempotentHint") is True
    return rule


def _expand(declared: dict[str, Any]) -> dict[str, Any]:
    """Spell out what `read_only` and `idempotent` imply, under the fields declared with them."""
    implied: dict[str, Any] = {}
    if declared.get("read_only") is not None:
        implied.update(_read_only_rule(declared["read_only"]), repeat_safe=declared["read_only"])
    if declared.get("idempotent") is not None:
        implied["repeat_safe"] = declared["idempotent"]
        if declared["idempotent"] is False:
            implied["read_only"] = False
    return {**implied, **declared}


def _metadata_policy(tool: BaseTool) -> dict[str, Any]:
    raw = (tool.metadata or {}).get("agentloop")
    if raw is None:
        return {}
    if isinstance(raw, ToolPolicy):
        return _expand(raw.declared())
    if isinstance(raw, Mapping):
        try:
            return _expand(ToolPolicy(**raw).declared())
        except ValidationError as error:
            msg = f"tool {tool.name!r}: invalid metadata['agentloop'] policy: {error}"
            raise ConfigurationError(msg) from error
    msg = f"tool {tool.name!r}: metadata['agentloop'] must be a ToolPolicy or a dict"
    raise ConfigurationError(msg)


def resolve_policy(
    tool: BaseTool,
    declared: ToolPolicy | None = None,
    *,
    default_timeout_s: float = DEFAULT_TIMEOUT_S,
    timeout_by_prefix: Mapping[str, float] | None = None,
    default_retry: ToolRetry | None = None,
) -> ResolvedPolicy:
    """Merge a tool's declared policy with its metadata, annotations and name rules.

    Args:
        tool: The tool.
        declared: The policy given to `create_tool_loop` for this tool, if any.
        default_timeout_s: The loop's default timeout.
        timeout_by_prefix: Name-prefix timeouts, between a policy and the loop default.
        default_retry: Retry policy of idempotent tools that declare none.

    Returns:
        The effective policy.
    """
    merged: dict[str, Any] = {}
    merged.update(_name_rule(tool.name))
    merged.update(_annotation_rule(tool.metadata or {}))
    merged.update(_metadata_policy(tool))
    if declared is not None:
        merged.update(_expand(declared.declared()))
    if "timeout_s" not in merged or merged["timeout_s"] is None:
        by_prefix = [
            seconds
            for prefix, seconds in (timeout_by_prefix or {}).items()
            if tool.name.startswith(prefix)
        ]
        merged["timeout_s"] = by_prefix[0] if by_prefix else default_timeout_s
    has_stub = "stub_result" in merged
    retry = merged.get("retry", default_retry)
    # unknown means a write: what neither a declaration nor the tool's name classifies
    concurrency_safe = _flag(merged, "concurrency_safe", default=False)
    idempotent = _flag(merged, "idempotent", default=False)
    read_only = _flag(merged, "read_only", default=concurrency_safe and idempotent)
    return ResolvedPolicy(
        concurrency_safe=concurrency_safe,
        idempotent=idempotent,
        read_only=read_only,
        repeat_safe=_flag(merged, "repeat_safe", default=idempotent),
        timeout_s=float(merged["timeout_s"]),
        retry=retry if isinstance(retry, ToolRetry) else None,
        cache_ttl_s=merged.get("cache_ttl_s"),
        stale_fallback_s=merged.get("stale_fallback_s"),
        cache_scope=merged.get("cache_scope") or "identity",
        stub_result=merged.get("stub_result"),
        has_stub=has_stub,
        arg_aliases=dict(merged.get("arg_aliases") or {}),
        dedup_keys=tuple(merged["dedup_keys"]) if merged.get("dedup_keys") else None,
        check_result=merged.get("check_result"),
        max_result_chars=int(merged.get("max_result_chars") or DEFAULT_MAX_RESULT_CHARS),
        max_result_items=int(merged.get("max_result_items") or DEFAULT_MAX_RESULT_ITEMS),
        rate_limit_per_s=merged.get("rate_limit_per_s"),
        writes_state=merged.get("read_only") is not True,
        state_scope=merged.get("state_scope") or _default_state_scope(tool),
        state_keys=tuple(merged.get("state_keys") or ()),
        resumable=is_subagent(tool),
        classified_by_default=not any(
            merged.get(name) is not None for name in ("read_only", "concurrency_safe", "idempotent")
        ),
    )


def _default_state_scope(tool: BaseTool) -> str:
    """One state per MCP server, one for every local tool."""
    server = (tool.metadata or {}).get("mcp_server")
    return f"mcp:{server}" if server else LOCAL_STATE


def is_subagent(tool: BaseTool) -> bool:
    """Tell whether a tool is a sub-agent (`as_tool`)."""
    return bool((tool.metadata or {}).get(SUBAGENT_METADATA))


def _flag(merged: Mapping[str, Any], name: str, *, default: bool) -> bool:
    value = merged.get(name)
    return default if value is None else bool(value)
