"""Graph state and the named reducers that merge it (the call shapes: `call_shapes`)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from operator import attrgetter
from typing import Annotated, Any, Literal, cast

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
)
from langgraph.channels.delta import DeltaChannel
from langgraph.graph.message import add_messages
from pydantic import TypeAdapter, ValidationError
from typing_extensions import TypedDict

from agentloop.base.call_shapes import (
    Attachment,
    CallStatus,
    PlanDecision,
    PreparedCall,
    ReferencedOutcome,
    ToolCommand,
    ToolExecutionRecord,
    call_status,
)
from agentloop.base.checkpoint_safe import safe_text
from agentloop.durability.identity import IDEMPOTENCY_KEY_MAX_CHARS
from agentloop.errors import InputError
from agentloop.models.usage import add_usage

__all__ = [
    "Attachment",
    "CallStatus",
    "InputState",
    "LoopState",
    "OutputState",
    "PlanDecision",
    "PreparedCall",
    "ReferencedOutcome",
    "RoundState",
    "RunBook",
    "RunLimits",
    "RunStatus",
    "ToolCommand",
    "ToolExecutionRecord",
    "call_status",
    "empty_round_state",
    "NewRound",
    "RoundUpdate",
    "new_round",
    "reduce_records",
    "reduce_round_state",
    "reduce_call_results",
    "reduce_messages",
    "reduce_run_book",
    "reduce_usage",
    "run_book",
    "run_id_of",
    "invocation_of",
    "DEFAULT_RUN_ID",
    "run_limit",
    "valid_idempotency_key",
]

RunStatus = Literal[
    "running",
    "ok",
    "planner_failed",
    "answer_failed",
    "answer_cut",
    "structured_response_failed",
    "ended",
    "cancelled",
]
"""How a run ended, for code to read (never parse the answer's text):

- `ok`: the answer was produced (after a round whose calls were all of `return_direct`
  tools, it is the last call's output and no model is asked again);
- `planner_failed`: the planner model failed, or its plan could not be used;
- `answer_failed`: the answer model failed (the answer says why);
- `answer_cut`: the answer hit the output size cap and was cut;
- `structured_response_failed`: with `response_format`, the answer model gave no valid
  typed result, even when asked again with the error (the text answer stands);
- `ended`: a middleware hook ended the run before its answer (`jump_to="end"` from
  `before_agent`, from a planner call's `before_model` / `after_model`, or from the
  answer's `before_model`): `answer` is the text of the last `AIMessage` the hooks added
  to `messages` (or empty), `status_reason` names the hook;
- `cancelled`: the run was cancelled (the LangGraph server's `runs.cancel`, its
  `multitask_strategy="interrupt"`, a cancelled `ainvoke`) while a call with side effects
  ran: that call's record in `call_results` is `unknown_outcome` (it may or may not have
  taken effect) and `status_reason` names it. Resuming the run goes on from there (the
  call is not made again); a run cancelled while no such call ran keeps `running`;
- `running`: the run has not answered yet (an interrupted thread).
"""


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


class RunBook(TypedDict, total=False):
    """The loop's bookkeeping of a run, in one private channel (`LoopState.run_book`).

    `prepare` writes it when a run starts; a node writes only the keys it changes (the
    reducer merges them). `answered_input` and `answered_message_id` outlive the run.
    """

    run_id: str
    """Names this run for the side-effect ledger (stable across resume, replay and fork:
    what starts the run and who asked); prefixes call ids."""
    invocation: str
    """This invocation of the loop: the LangGraph server's run id, else one drawn when the
    run starts. Kept in the checkpoint, so a resume, replay or fork of the run finds it;
    two runs never share it, even with the same request on one thread at once. What the
    loop keeps in memory for a run (whole results for references, the planner's own
    arguments, work started ahead) is keyed by it (`invocation_of`)."""
    idempotency_scope: str
    """The run's idempotency key as its calls know it (`idempotency_scope`), "" without one:
    it names the calls in place of `run_id`, and the ledger keeps them under it."""
    server_run: str
    """The LangGraph server's id of the run that started this one, when the loop recorded
    the run's identity under it in the ledger before its first call
    (`agentloop.durability.retry`); "" otherwise."""
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


_NO_BOOK: RunBook = {}


def run_book(state: Mapping[str, Any]) -> RunBook:
    """The run's bookkeeping (empty before a run wrote it); read it, never change it."""
    book: RunBook = state.get("run_book") or _NO_BOOK
    return book


DEFAULT_RUN_ID = "run"
"""The run id of a state whose bookkeeping has none (a thread from an earlier version)."""


def run_id_of(state: Mapping[str, Any]) -> str:
    """The id of the state's run (`DEFAULT_RUN_ID` when its bookkeeping has none).

    Every part of the loop that names the run (calls, held work, sessions) reads it here,
    so they all name it the same way.
    """
    return run_book(state).get("run_id") or DEFAULT_RUN_ID


def invocation_of(state: Mapping[str, Any]) -> str:
    """The invocation of the state's run (`RunBook.invocation`).

    A thread checkpointed by a version that drew none falls back on its run id.
    """
    book = run_book(state)
    return book.get("invocation") or book.get("run_id") or DEFAULT_RUN_ID


def reduce_run_book(current: RunBook | None, update: RunBook | None) -> RunBook:
    """Merge the keys a node wrote into the run's bookkeeping (a new dict)."""
    return {**(current or {}), **(update or {})}


def run_limit(state: Mapping[str, Any], name: str) -> int:
    """Return one of the run's limits (0 before the run set them).

    `prepare` records them once per run from the loop's settings (with the run's
    `LoopContext` overrides), so a run resumed without its context keeps them, and the
    planner's prompt and the routers read the same value.
    """
    limits: Mapping[str, Any] = run_book(state).get("limits") or {}
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


def reduce_messages(current: list[AnyMessage] | None, writes: Sequence[Any]) -> list[AnyMessage]:
    """Fold message writes into the transcript, each as `add_messages` merges it.

    The transcript grows by a plan and its outcomes every round, so checkpointers store
    only the writes (`DeltaChannel`) and rebuild it by replaying them. Replaying must
    give the same ids every time: a message written without one gets an id made from
    the message before it and its own content (`add_messages` would draw a random one).

    The current value and the writes may hold serialized messages: the LangGraph server
    reads a thread's state with a deserializer that hands messages back as dicts (their
    `model_dump`), snapshot and writes alike. Those become the messages they were.
    """
    messages: list[Any] = _as_messages(list(current or []))
    ids: set[Any] | None = None  # of `messages` while they are all plain, found once
    for write in writes:
        batch = _as_messages(write if isinstance(write, list) else [write])
        named: list[Any] = _named(batch, messages)
        if ids is None:
            ids = _plain_ids(messages)
        if ids is not None and _only_new(named, ids):
            messages.extend(named)  # what `add_messages` returns when it only appends
            ids.update(map(_ID, named))
        else:
            messages = cast(list[Any], add_messages(messages, named))
            ids = None
    return messages


_PLAIN_TYPES = frozenset({AIMessage, HumanMessage, SystemMessage, ToolMessage})
"""Message types `add_messages` takes as they are (no chunk to convert, no removal)."""
_ID = attrgetter("id")


def _plain_ids(messages: list[Any]) -> set[Any] | None:
    """The ids of a transcript whose messages are all plain (else None: `add_messages`).

    Found once per fold, whatever the number of writes (one per call of a round): no
    Python-level loop, the transcript grows every round.
    """
    if not set(map(type, messages)) <= _PLAIN_TYPES:
        return None
    ids = set(map(_ID, messages))
    return None if None in ids else ids


def _only_new(named: list[Any], ids: set[Any]) -> bool:
    """Whether `add_messages` would only append these: each plain, new, with its own id.

    Not when a message replaces or removes one, or is of another type (`add_messages`
    merges it). The transcript grows by new messages nearly every time.
    """
    if not set(map(type, named)) <= _PLAIN_TYPES:
        return False
    new = set(map(_ID, named))
    return None not in new and len(new) == len(named) and ids.isdisjoint(new)


def _as_messages(items: list[Any]) -> list[Any]:
    """Return items as messages: messages as they are, serialized ones rebuilt exactly.

    A dict with a message `type` (`model_dump`'s form) is validated as the message it
    names, so no field moves (`convert_to_messages` would put an AI message's
    `usage_metadata` in `additional_kwargs`); role dicts, tuples and strings are read
    by `convert_to_messages`.
    """
    kinds = set(map(type, items))
    if kinds <= _PLAIN_TYPES or all(map(_is_message_type, kinds)):
        return items
    try:
        return _MESSAGES.validate_python(items)
    except (ValidationError, TypeError):  # TypeError: an item with no message `type`
        return convert_to_messages(items)


_MESSAGES: TypeAdapter[list[AnyMessage]] = TypeAdapter(list[AnyMessage])
"""Messages from their serialized form (a message instance passes as it is)."""


def _is_message_type(kind: type) -> bool:
    """Whether values of a type are messages (`convert_to_messages` keeps them as they are)."""
    return issubclass(kind, BaseMessage)


def _named(batch: list[BaseMessage], before: list[Any]) -> list[BaseMessage]:
    seed = (before[-1].id or "") if before else ""
    named: list[BaseMessage] = []
    for position, message in enumerate(batch):
        if message.id is None:
            content = json.dumps(message.content, default=str, sort_keys=True)
            text = f"{seed}\x1f{position}\x1f{message.type}\x1f{content}"
            digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]
            message = message.model_copy(update={"id": f"msg-{digest}"})
        named.append(message)
    return named


Transcript = Annotated[list[AnyMessage], DeltaChannel(reduce_messages)]
"""The `messages` channel: LangChain messages merged by id, stored as writes."""


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


def valid_idempotency_key(value: Any, source: str = "`idempotency_key`") -> str | None:
    """Return a run's idempotency key once checked (None: the run has none).

    Args:
        value: The key as given (None when absent).
        source: Where it was given, for the error message.

    Raises:
        InputError: The key is not a non-empty string of at most
            `IDEMPOTENCY_KEY_MAX_CHARS` characters.
    """
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        msg = (
            f"{source} must be a non-empty string naming one request (an order id, a "
            f"request id), got {type(value).__name__}: {value!r:.80}"
        )
        raise InputError(msg)
    if len(value) > IDEMPOTENCY_KEY_MAX_CHARS:
        msg = (
            f"{source} must be at most {IDEMPOTENCY_KEY_MAX_CHARS} characters, got "
            f"{len(value)}: {value!r:.80}"
        )
        raise InputError(msg)
    return value


def reduce_idempotency_key(current: str | None, update: Any) -> str:
    """Keep the newest idempotency key, checked before it is stored (`valid_idempotency_key`).

    `prepare` consumes it (writes None, stored as `""`: no key), so a key names the one
    run it was submitted with.
    """
    return valid_idempotency_key(update) or ""


class InputState(TypedDict, total=False):
    """What a caller passes in."""

    user_input: Annotated[str, reduce_user_input]
    """The request. When absent, the last human message in `messages` is used."""
    user_extra_requirement: Annotated[str, reduce_user_extra_requirement]
    """Extra instructions for the planner and the answer (optional)."""
    messages: Transcript
    """The conversation, shared with a parent graph, as `create_agent` keeps it: each
    executed plan is appended as an AIMessage with `tool_calls`, each call's outcome as
    a ToolMessage, and the answer as the last AIMessage (`agentloop.middleware.transcript`)."""
    idempotency_key: Annotated[str, reduce_idempotency_key]
    """Names the request (optional): submitted again with the same key, to this loop, on
    the same thread or another, the run finds the first submission's calls in the
    side-effect ledger, so a call with side effects runs once (its outcome is replayed).
    Applies to the run it is submitted with; `configurable["idempotency_key"]` is the
    same, given in the config."""


class OutputState(TypedDict, total=False):
    """What a caller gets back."""

    user_input: Annotated[str, reduce_user_input]
    user_extra_requirement: Annotated[str, reduce_user_extra_requirement]
    messages: Transcript
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
    idempotency_key: Annotated[str, reduce_idempotency_key]
    """The idempotency key submitted with the run's input, until `prepare` consumes it
    (`""`: none)."""
    run_book: Annotated[RunBook, reduce_run_book]
    """The run's bookkeeping (`RunBook`: its id, limits, counters), one channel."""
