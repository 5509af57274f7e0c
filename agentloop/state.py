"""Graph state, the plan / record types, and the named reducers that merge them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, NotRequired

from langchain_core.messages import AnyMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from agentloop.checkpoint_safe import safe_text
from agentloop.errors import ErrorType, InputError
from agentloop.usage import add_usage

__all__ = [
    "Attachment",
    "InputState",
    "LoopState",
    "OutputState",
    "PlanDecision",
    "PreparedCall",
    "ReferencedOutcome",
    "RoundState",
    "RunLimits",
    "RunStatus",
    "ToolCommand",
    "ToolExecutionRecord",
    "empty_round_state",
    "NewRound",
    "RoundUpdate",
    "new_round",
    "reduce_records",
    "reduce_round_state",
    "reduce_call_results",
    "reduce_usage",
    "run_limit",
]

NextAction = Literal["execute", "response"]
RunStatus = Literal[
    "running", "ok", "planner_failed", "answer_failed", "answer_cut", "structured_response_failed"
]
"""How a run ended, for code to read (never parse the answer's text):

- `ok`: the answer was produced;
- `planner_failed`: the planner model failed, or its plan could not be used;
- `answer_failed`: the answer model failed (the answer says why);
- `answer_cut`: the answer hit the output size cap and was cut;
- `structured_response_failed`: with `response_format`, the answer model gave no valid
  typed result, even when asked again with the error (the text answer stands);
- `running`: the run has not answered yet (an interrupted thread).
"""


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
    call_id: NotRequired[str]
    """Position of the call: `<run>:<round>:<index>`."""
    call_key: NotRequired[str]
    """Stable identity of the call (run, round, tool, arguments, occurrence): the key of
    its side-effect ledger entry and the `idempotency_key` its tool receives."""
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


class ReferencedOutcome(TypedDict):
    """The outcome of a command another command's arguments refer to (`"$N"`, `"${N}"`)."""

    index: int
    """Position of the referenced command in its round (0-based; it is `$index+1`)."""
    tool_name: str
    success: bool
    result: Any
    error: str


class PreparedCall(TypedDict):
    """A command ready to run (or already settled), as it is kept in the graph state."""

    call_id: str
    """The call's place in the run, as records and events show it (`str(CallId)`)."""
    call_key: str
    """Stable identity of the call (see `ToolExecutionRecord.call_key`)."""
    run_id: str
    """The run the call belongs to (the `run_id` of `agentloop.tools.call_id.CallId`)."""
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
    after_write: NotRequired[str]
    """The write that made an earlier run of the same query stale (see the record's)."""
    follows: NotRequired[list[int]]
    """Positions of earlier commands of the round it must come after: the ones that may
    write what it reads, or that read what it may write. It runs in a later batch."""


class RunLimits(TypedDict):
    """Limits of one run, fixed when it starts (the loop's settings and the run's context)."""

    max_rounds: int
    """Executed rounds at most."""


class RoundState(TypedDict):
    """What happened so far, carried from round to round."""

    done_plans: list[ToolExecutionRecord]
    """Every record of every accepted round, oldest first."""
    last_round_records: list[ToolExecutionRecord]
    """The records of the last round only."""
    round_index: int
    """How many rounds were executed and accepted."""


def run_limit(state: Mapping[str, Any], name: str) -> int:
    """Return one of the run's limits (0 before the run set them)."""
    limits: Mapping[str, Any] = state.get("limits") or {}
    return int(limits.get(name, 0))


def empty_round_state() -> RoundState:
    """Return the round state of a run that has not executed anything yet."""
    return {"done_plans": [], "last_round_records": [], "round_index": 0}


class NewRound(TypedDict):
    """The update that records an accepted round: only its own records travel."""

    new_round_records: list[ToolExecutionRecord]
    """The round's records, in command order."""
    round_index: int
    """How many rounds are accepted with this one."""


RoundUpdate = RoundState | NewRound
"""What `round_state` accepts: a `NewRound` appends a round, a full `RoundState` (as given
to `update_state`) replaces the value, and `Overwrite(...)` resets it."""


def new_round(records: list[ToolExecutionRecord], round_index: int) -> NewRound:
    """The update that records an accepted round."""
    return {"new_round_records": records, "round_index": round_index}


def reduce_round_state(current: RoundState | None, writes: Sequence[RoundUpdate]) -> RoundState:
    """Fold round updates into the round state (a new value; nothing is mutated).

    A `NewRound` appends its records to `done_plans`, replaces `last_round_records` and
    sets `round_index`; a full round state replaces the value. Checkpointers store only
    the updates, so the cost of a round does not grow with the run.
    """
    state: RoundState = {**empty_round_state(), **(current or {})}  # type: ignore[typeddict-item]
    for write in writes:
        if "new_round_records" in write:
            records = list(write["new_round_records"])  # type: ignore[typeddict-item]
            state = {
                "done_plans": [*state["done_plans"], *records],
                "last_round_records": records,
                "round_index": int(write["round_index"]),
            }
        else:
            state = {**empty_round_state(), **write}
    return state


def reduce_records(
    current: list[ToolExecutionRecord] | None, writes: Sequence[list[ToolExecutionRecord]]
) -> list[ToolExecutionRecord]:
    """Append batches of records (checkpointers store only the new ones)."""
    return [*(current or []), *(record for batch in writes for record in batch)]


def reduce_call_results(
    current: dict[str, ToolExecutionRecord] | None,
    update: dict[str, ToolExecutionRecord] | None,
) -> dict[str, ToolExecutionRecord]:
    """Merge finished calls (keyed by call id) into the round's results.

    Each call task writes `{call_id: record}`; the end of a round writes `Overwrite({})`.
    The merge builds a new dict and never mutates either argument.
    """
    return {**(current or {}), **(update or {})}


def reduce_round_calls(current: list[PreparedCall] | None, update: Any) -> list[PreparedCall]:
    """Refuse edits of `round_calls`: the loop writes it whole (`Overwrite`), never merged.

    The calls of a round are prepared from `decision` and already named (their ledger
    identity) and sent to run, so an edit here could not change what runs.

    Raises:
        InputError: Always; it names the channel to edit instead.
    """
    msg = (
        "`round_calls` holds the calls the loop already prepared and sent to run, so it "
        "cannot be edited: to change what a round runs, edit `decision` (the plan) "
        "before `execute`, for example with interrupt_before=['execute']"
    )
    raise InputError(msg)


def reduce_usage(
    current: dict[str, dict[str, Any]] | None, update: dict[str, dict[str, Any]] | None
) -> dict[str, dict[str, Any]]:
    """Add token usage per agent (`Overwrite({})` starts over)."""
    return add_usage(current, update or {})


def _text_only(name: str) -> Any:
    def reduce(current: str | None, update: Any) -> str:
        if update is None:
            return current or ""
        if not isinstance(update, str):
            msg = f"`{name}` must be a string, got {type(update).__name__}: {update!r:.80}"
            raise InputError(msg)
        return safe_text(update)  # U+0000 and lone surrogates: no saver can store them

    reduce.__name__ = reduce.__qualname__ = f"reduce_{name}"
    return reduce


reduce_user_input = _text_only("user_input")
"""Keep the newest `user_input`, checkpoint-safe (U+0000 becomes U+FFFD); anything but
text is an `InputError` before it is stored."""
reduce_user_extra_requirement = _text_only("user_extra_requirement")
"""Keep the newest `user_extra_requirement` (as `reduce_user_input` keeps `user_input`)."""


class InputState(TypedDict, total=False):
    """What a caller passes in."""

    user_input: Annotated[str, reduce_user_input]
    """The request. When absent, the last human message in `messages` is used."""
    user_extra_requirement: Annotated[str, reduce_user_extra_requirement]
    """Extra instructions for the planner and the answer (optional)."""
    messages: Annotated[list[AnyMessage], add_messages]
    """Conversation shared with a parent graph; the answer is appended as an AIMessage."""


class OutputState(TypedDict, total=False):
    """What a caller gets back."""

    user_input: Annotated[str, reduce_user_input]
    user_extra_requirement: Annotated[str, reduce_user_extra_requirement]
    messages: Annotated[list[AnyMessage], add_messages]
    round_state: Annotated[RoundState, DeltaChannel(reduce_round_state)]
    """`done_plans`, `last_round_records`, `round_index`."""
    decision: PlanDecision
    """The last normalized plan."""
    answer: str
    """The final reply."""
    action_results: dict[str, Any]
    """The normalized tool results handed to the answer node ({} when no tool ran)."""
    tool_logs: Annotated[list[ToolExecutionRecord], DeltaChannel(reduce_records)]
    """The raw execution records of the run, in execution order."""
    rollbacks: list[dict[str, Any]]
    """Rounds that were rolled back because every command was flagged."""
    usage: Annotated[dict[str, dict[str, Any]], reduce_usage]
    """Tokens in and out, model calls and cost, per agent (this loop and its sub-agents)."""
    structured_response: Any
    """The typed result, with `response_format` (as `create_agent` returns it)."""
    status: RunStatus
    """How the run ended (see `RunStatus`)."""
    status_reason: str
    """Why, when the status is not `ok`."""


class LoopState(OutputState, total=False):
    """The full state of a tool loop run."""

    round_calls: Annotated[list[PreparedCall], reduce_round_calls]
    """The prepared calls of the current round, with their batch numbers (the loop's
    own: `update_state` on it is refused; edit `decision` instead)."""
    call_results: Annotated[dict[str, ToolExecutionRecord], reduce_call_results]
    """Finished calls of the current round, keyed by call id (one writer per call task)."""
    run_id: str
    """Identifies this run (stable across resume, replay and fork); prefixes call ids."""
    run_count: int
    """How many runs this thread started (the turn number that names a run)."""
    limits: RunLimits
    """The run's limits, for the routers."""
    consecutive_rollbacks: int
    """How many rounds in a row were rolled back."""
    plan_calls: int
    """How many planner calls this run made (rounds, re-asks and rollbacks together)."""
    rollback_note: str
    """Told to the planner after a rollback."""
    answered_input: str
    """The request the last run answered (to tell a new message from an old input)."""
    answered_message_id: str
    """Id of the human message the last run answered, if it came from `messages`."""
