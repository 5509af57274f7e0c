"""The shapes one tool call takes: a command (as planned), a prepared call, a record.

A plan's `ToolCommand` becomes a `PreparedCall` (resolved, validated, identified) and its
outcome a `ToolExecutionRecord`; `agentloop.state` re-exports them beside the graph state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, NotRequired

from typing_extensions import TypedDict

from agentloop.errors import NOT_RUN_ERRORS, ErrorType

__all__ = [
    "Attachment",
    "CallStatus",
    "NextAction",
    "PlanDecision",
    "PreparedCall",
    "ReferencedOutcome",
    "ToolCommand",
    "ToolExecutionRecord",
    "call_status",
    "status_of",
]

NextAction = Literal["execute", "response"]


class ToolCommand(TypedDict):
    """One tool call the planner asked for, after normalization."""

    purpose: str
    """What the call collects or verifies; also the key of its result for the answer."""
    tool_name: str
    """The registered tool to call."""
    tool_kwargs: dict[str, Any]
    """The arguments, as the planner wrote them."""
    todo_suggestion: str
    """The planner's hint for the next round."""
    next: str
    """Mirror of `todo_suggestion`."""
    tool_call_id: NotRequired[str]
    """The planner's own id of the call (`plan_mode="native"`), when it gave one."""


class PlanDecision(TypedDict):
    """The normalized decision of one plan step."""

    next_action: NextAction
    """`execute` runs `execution_commands`; `response` goes to the answer."""
    execution_commands: list[ToolCommand]
    """The commands of this round (empty for `response`)."""
    short_circuited: NotRequired[bool]
    """True when the stream was closed as soon as `next_action` was a complete `response`."""
    parse_error: NotRequired[str]
    """Why the planner's output could not be used ("" or absent when it could)."""
    raw: NotRequired[str]
    """The planner's raw text (kept short), for debugging."""
    reply: NotRequired[str]
    """The whole text of a native planner reply without tool calls, when it may be the answer."""
    reply_id: NotRequired[str]
    """That reply's message id (the answer's, when it is adopted)."""
    refusal: NotRequired[str]
    """The planner's refusal (`additional_kwargs["refusal"]`): the run ends with it, as
    `create_agent` ends with a refused model call's message."""
    model_provider: NotRequired[str]
    """The refusing reply's `model_provider` (how its content blocks are read)."""
    final: NotRequired[str]
    """A reply without a plan or tool calls that a `wrap_model_call` middleware wrote
    itself (`ModelRetryMiddleware` giving up): the run ends with it, as `create_agent`'s
    ends with a reply without tool calls."""
    redacted: NotRequired[list[int]]
    """Positions of the commands whose arguments the redact hook changed: the state keeps
    them redacted, the tool gets the planner's own (`agentloop.governance.planned_arguments`)."""


class Attachment(TypedDict):
    """Media a tool returned, kept beside its result (never inside a text prompt)."""

    handle: str
    """How the result's placeholder names it (`<tool>#<n>`)."""
    kind: Literal["image", "audio", "blob"]
    mime_type: str
    size_bytes: int
    data: NotRequired[str]
    """The base64 data (absent when too large to keep)."""
    uri: NotRequired[str]
    """The resource it came from, for an embedded resource."""


CallStatus = Literal["succeeded", "cached", "stub", "stale", "failed", "unknown", "skipped"]
"""How a call ended, in one word (a record's `status`):

- `succeeded`: it ran (or a middleware answered for it) and its result stands;
- `cached`: the loop's result cache answered it, without running the tool;
- `stub`: it failed and its declared stub result stands in (`success` is True);
- `stale`: it failed and its last good result stands in (`success` is False);
- `failed`: it ran, or tried to, and failed (its `error_type` says why);
- `unknown`: a call with side effects may or may not have taken effect; not repeated;
- `skipped`: the loop did not run it (a bad call, a duplicate, beyond the round's cap, a
  failed reference, refused by a middleware) or stopped it because its plan was rejected.

A replayed record keeps the status its call ended with (`replayed` says it was not run again).
"""


def call_status(record: Mapping[str, Any]) -> CallStatus:
    """How a call ended (`CallStatus`), worked out from the rest of its record.

    From `success`, `error_type`, `from_cache` and `fallback`: every record the loop
    writes has it as `status`; this serves records written before they had one.
    """
    return status_of(
        bool(record.get("success")),
        record.get("error_type") or "",
        bool(record.get("from_cache")),
        "stale_cache" if record.get("stale") else record.get("fallback") or "",
    )


def status_of(success: bool, error_type: str, from_cache: bool, fallback: str) -> CallStatus:
    """How a call ended (`CallStatus`), from what its outcome says."""
    if success:
        if fallback == "stub":
            return "stub"
        return "cached" if from_cache else "succeeded"
    if fallback == "stale_cache":
        return "stale"
    if error_type == "unknown_outcome":
        return "unknown"
    return "skipped" if error_type in NOT_RUN_ERRORS else "failed"


class ToolExecutionRecord(TypedDict):
    """What happened to one command. Extra keys are added by the governance pipeline."""

    purpose: str
    tool_name: str
    kwargs: dict[str, Any]
    todo_suggestion: str
    next: str
    success: bool
    result: Any
    error: str
    status: NotRequired[CallStatus]
    """How the call ended, in one word (`CallStatus`); `success`, `error_type`,
    `from_cache` and `fallback` say more. Absent from a record checkpointed by an earlier
    version: `call_status(record)` works it out."""
    call_id: NotRequired[str]
    """Position of the call: `<run>:<round>:<index>`."""
    tool_call_id: NotRequired[str]
    """The call's id in the transcript (`messages`): the `id` of its `ToolCall` and the
    `tool_call_id` of its `ToolMessage`, and what the tool sees as `tool_call_id`."""
    call_key: NotRequired[str]
    """Stable identity of the call (run, round, tool, arguments, occurrence): the
    `idempotency_key` its tool receives, and the second key the side-effect ledger looks
    it up by."""
    position_key: NotRequired[str]
    """The call's place in its run and the command written there as planned (run, round,
    position, tool and arguments before repair): the key of its side-effect ledger entry,
    the same whatever code resumes the run."""
    replayed: NotRequired[bool]
    """True when the outcome was recorded by an earlier execution of the same call (a
    resumed, replayed or forked run, or another worker) and returned without running."""
    round_index: NotRequired[int]
    index: NotRequired[int]
    """Position of the command in its round."""
    error_type: NotRequired[ErrorType | Literal[""]]
    """Why the call failed (see `agentloop.errors.ErrorType`); "" when it succeeded."""
    duration_ms: NotRequired[float]
    attempts: NotRequired[int]
    from_cache: NotRequired[bool]
    fallback: NotRequired[str]
    """`stale_cache` or `stub` when the result is a declared fallback, else ""."""
    stale: NotRequired[bool]
    """True when the tool failed and `result` is its last good result (`success` is False)."""
    stale_age_s: NotRequired[float]
    """How old that stale result is, in seconds."""
    duplicate: NotRequired[bool]
    truncated: NotRequired[bool]
    flagged: NotRequired[bool]
    """True when the record was judged useless (duplicate, unknown tool, useless result)."""
    query_key: NotRequired[str]
    """Identifies "the same query" (tool and dedup arguments) for duplicate detection."""
    after_write: NotRequired[str]
    """The tool whose call (with side effects) made an earlier run of this same query
    stale, so it ran again instead of being answered by that run."""
    notes: NotRequired[list[str]]
    """What the pipeline did on the way: repairs, coercions, cache hits, fallbacks."""
    agent_usage: NotRequired[dict[str, dict[str, Any]]]
    """Token usage of the sub-agents this call ran, per agent."""
    attachments: NotRequired[list[Attachment]]
    """Media the tool returned (images, audio, blobs); `result` names them by handle.
    Only a multimodal answer model sees them, never a text prompt."""
    artifact: NotRequired[Any]
    """What the tool returned beside its content (`response_format="content_and_artifact"`):
    its `ToolMessage` in `messages` carries it."""
    state_update: NotRequired[dict[str, Any]]
    """What the tool's `Command(update=...)` writes to the graph's state: applied by the
    call's task, so the next round sees it (kept in the side-effect ledger's record, so a
    replayed call applies it again); not kept in the round's records."""


class ReferencedOutcome(TypedDict):
    """The outcome of a command another command's arguments refer to (`"$N"`, `"${N}"`)."""

    index: int
    """Position of the referenced command in its round (0-based; it is `$index+1`)."""
    tool_name: str
    success: bool
    result: Any
    """The record's result (cut to its size budget when the record says `truncated`)."""
    error: str
    cut_from: NotRequired[str]
    """The call id whose whole result the tool runner keeps, when `result` was cut."""


class PreparedCall(TypedDict):
    """A command ready to run (or already settled), as it is kept in the graph state."""

    call_id: str
    """The call's place in the run, as records and events show it (`str(CallId)`)."""
    call_key: str
    """Stable identity of the call (see `ToolExecutionRecord.call_key`)."""
    tool_call_id: NotRequired[str]
    """The call's id in the transcript and for its tool (see
    `ToolExecutionRecord.tool_call_id`); absent from a call checkpointed by an earlier
    version, which then uses `CallId.tool_call_id`."""
    position_key: NotRequired[str]
    """The call's place in its run and the command written there, as planned: the key of
    its ledger entry, the same whatever code resumes it
    (`agentloop.durability.identity.position_key`). Absent from a call checkpointed by an
    earlier version, which the ledger then finds by its `call_key`."""
    run_id: str
    """The run the call belongs to (the `run_id` of `agentloop.governance.call_id.CallId`)."""
    invocation: NotRequired[str]
    """The invocation that prepared it (`RunBook.invocation`): what the loop keeps in
    memory for the call (its whole result, the planner's own arguments) is kept under it
    and the call id. Absent from a call checkpointed by an earlier version."""
    ledger_thread: NotRequired[str]
    """Where the ledger keeps the call in place of its thread, for a run submitted with an
    idempotency key (`agentloop.durability.identity.ledger_thread`)."""
    server_run: NotRequired[str]
    """The LangGraph server's id of the run that started the call's run, under which the
    ledger keeps the run's record (`RunBook.server_run`): a ledger that lost that record
    lost what it knew of the run's calls."""
    round_label: str
    """Its round, with the rollbacks that re-planned it (`CallId.round_label`)."""
    index: int
    """Its position in the plan (`CallId.position`)."""
    round_index: int
    purpose: str
    tool_name: str
    kwargs: dict[str, Any]
    """The arguments as the planner wrote them."""
    arguments: dict[str, Any]
    """The repaired and validated arguments the tool receives."""
    todo_suggestion: str
    query_key: str
    """Identifies "the same query" for duplicate detection."""
    concurrency_safe: bool
    notes: list[str]
    batch: int
    """The batch the call runs in; -1 when it was settled without running."""
    depends_on: NotRequired[list[int]]
    """Positions (0-based) of the commands whose results the arguments refer to. Such a
    call runs in a batch after theirs; its `arguments` are resolved and validated then."""
    referenced: NotRequired[list[ReferencedOutcome]]
    """The outcomes of `depends_on`, attached when the call is sent to run."""
    cut_references: NotRequired[bool]
    """A reference got a cut result (a read, whose whole result was no longer at hand):
    its record says `truncated`."""
    after_write: NotRequired[str]
    """The write that made an earlier run of the same query stale (see the record's)."""
    follows: NotRequired[list[int]]
    """Positions of earlier commands of the round it must come after: the ones that may
    write what it reads, or that read what it may write. It runs in a later batch."""
    redacted: NotRequired[bool]
    """The redact hook changed the arguments the planner wrote: its tool gets the
    planner's own, kept in memory only (`agentloop.governance.planned_arguments`)."""
