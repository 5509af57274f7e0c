"""The latency features: streaming dispatch, the speculative answer, the planner's reply.

They make a run faster and change nothing of what it does; each can be switched off
(`PlanningOptions(streaming_dispatch=False, speculative_answer=False)`).

- **Streaming dispatch.** A command starts before its plan ends when it is complete (its
  JSON object closed, or, in `plan_mode="native"`, the next tool call started), the plan
  says `execute`, its tool is read-only, concurrency-safe and idempotent, its arguments
  are valid and name no other command's result, and every command before it may start
  too (a call with side effects keeps its place). It is the call `execute` would prepare
  (`agentloop.nodes.preparation`: same call id, same identity, made from the command as
  the state keeps it, redacted; its tool gets the planner's own arguments, as every
  call's does: `agentloop.governance.planned_arguments`) and it runs on the route of every call
  (`agentloop.nodes.guarded`: the ledger guard, the governance pipeline, the events).
  A call whose plan is rejected is settled: a finished one keeps its record,
  a running one is cancelled and recorded as `cancelled`; the plan node reports both in
  `tool_logs`. Early starts count toward `max_commands_per_round`, re-asks included.
- **The speculative answer.** With `speculative_answer=True` (or `"auto"`, when the plan
  is likely to say `response`: `SpeculationEstimate`) the answer call starts with the
  planner call, out of sight (no callbacks). When the plan says `response` the `answer`
  node relays it (`_Relay`), so its tokens stream from the `answer` node as usual; when
  it says `execute` it is cancelled at once; its tokens count in the run's usage.
- **The planner's reply.** In `plan_mode="native"` a text reply read whole may be the
  answer (`Accelerator.adopted_reply`); a speculative answer is used instead when one
  was started.

Hooks, one per node: the plan node calls `Accelerator.plan_started` and drives the
`PlanAcceleration` it returns (`new_reply`, `follow`, `stop_calls`, `decided`); `execute`
calls `started_calls` and `drop_calls`; each `call_tool` task calls `take_call`; the
`answer` node calls `adopted_reply` and `take_answer`.

Work started ahead passes from the plan node to the node that uses it in the compiled
loop's `Accelerator` (in this process's memory, for one step of the graph), never in a
checkpoint: a run resumed, replayed, forked or picked up by another process finds
nothing there, so each call takes its ordinary route and the side-effect ledger decides
whether it runs. Only read-only, idempotent calls start early, so losing one costs time,
not effects. A node that does not finish (its run cancelled, interrupted, failed) stops
what it holds: the plan node what it started (`PlanAcceleration.abandon`), the answer
node the answer it took. Work nobody adopted (a run that died between two nodes) is
dropped after `STALE_AFTER_S`. Under `invoke` the work runs as the rest of a sync run
does (blocking), on a thread of the loop's `WorkerPool`: no thread is started per call.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import operator
import re
import threading
import time
from collections.abc import (
    AsyncIterator,
    Callable,
    Coroutine,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, field
from functools import partial, reduce
from typing import Any, Literal, Protocol, cast

from langchain_core.callbacks import (
    AsyncCallbackManagerForLLMRun,
    CallbackManager,
    CallbackManagerForLLMRun,
)
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    message_chunk_to_message,
)
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import RunnableConfig, ensure_config
from pydantic import PrivateAttr

from agentloop.base.messages import message_text
from agentloop.base.sync import (
    CancellableFuture,
    WorkerPool,
    has_running_loop,
    run_without_loop,
)
from agentloop.governance.call_id import kept_under
from agentloop.governance.outcome import ToolOutcome
from agentloop.governance.pipeline import emit_settled, make_record
from agentloop.governance.planned_arguments import own_arguments, planned
from agentloop.models.calls import Answer, needs_another_try
from agentloop.models.resolve import model_name
from agentloop.models.stream import BoundedRead
from agentloop.models.usage import message_usage
from agentloop.nodes.answer_call import Configure, refusal_message
from agentloop.nodes.guarded import guarded_call, tool_config
from agentloop.nodes.parts import LoopParts
from agentloop.nodes.preparation import PlanPreparation
from agentloop.observability.events import AnswerSpeculated, Emit, ToolDispatched
from agentloop.planning.native import adopts_planner_reply
from agentloop.planning.normalize import normalize_plan_decision
from agentloop.planning.prompt import omits_results
from agentloop.settings import RunScope
from agentloop.state import (
    LoopState,
    PlanDecision,
    PreparedCall,
    ToolCommand,
    ToolExecutionRecord,
    empty_round_state,
    invocation_of,
    run_book,
)

__all__ = [
    "MIN_RESPONSE_RATE",
    "PRIORS",
    "REJECTED_NOTE",
    "STALE_AFTER_S",
    "Accelerator",
    "CommandStream",
    "EarlyCall",
    "PlanAcceleration",
    "Point",
    "Speculation",
    "SpeculationEstimate",
    "SpeculativeAnswer",
    "names_a_tool",
    "plan_point",
    "replies_in_order",
    "should_speculate",
    "tool_words",
    "whole_reply",
]

STALE_AFTER_S = 900.0
"""Work nobody adopted or cancelled (a run that died between two nodes) is dropped after
this long."""
REJECTED_NOTE = (
    "ran while its plan was streaming; that plan was rejected, so its result was not used"
)
CHARS_PER_TOKEN = 4
"""Token estimate of a cancelled answer that reported no usage."""

Handle = asyncio.Task[Any] | concurrent.futures.Future[Any]
"""Work started ahead: a task of the running loop (`ainvoke`), or a future (`invoke`)."""


def _start(
    work: Coroutine[Any, Any, Any], workers: WorkerPool, *, asynchronous: bool, empty: bool
) -> Handle:
    """Start work: a task of the running event loop, or run on a thread of `workers`.

    On a pool thread it mostly waits (for its tool's own pool thread, a model's stream),
    so it gives its place in the pool up: it never keeps a call it waits for from a
    thread. Cancelled there, what it waits for on the loop's event loop (an async
    tool) is cancelled. `empty`: in an empty context (no callbacks of the node that
    started it).
    """
    context = contextvars.Context() if empty else contextvars.copy_context()
    if asynchronous:
        return asyncio.get_running_loop().create_task(work, context=context)
    future: CancellableFuture[Any] = CancellableFuture()
    workers.abandon(
        context.run(workers.submit, partial(future.run, partial(run_without_loop, work)))
    )
    return future


# -- when to speculate ("auto") ------------------------------------------------------------

Speculation = bool | Literal["auto"]
"""`PlanningOptions.speculative_answer`: always, never, or when the plan is likely to end."""

Point = Literal["no_tools", "chat", "tool_request", "after_success", "after_failure"]
"""Where a plan stands: `no_tools` (it can only say `response`), `chat` (a first plan of a
request that names no tool), `tool_request` (one that names a tool: `weather` for
`get_weather`), `after_success` (every call of the last round succeeded),
`after_failure` (a call failed or the round was rolled back)."""

MIN_RESPONSE_RATE = 0.25
"""Speculate from this estimated share of `response` on: at most three answer prompts
wasted for each answer whose wait is saved."""

PRIORS: dict[Point, tuple[float, float]] = {
    "no_tools": (1.0, 1.0),
    "chat": (2.0, 3.0),
    "tool_request": (1.0, 5.0),
    "after_success": (1.0, 2.0),
    "after_failure": (1.0, 5.0),
}
"""(responses, plans) assumed at each point before the loop saw any."""

WINDOW = 50.0
"""Plans an estimate remembers: beyond it, older observations weigh less and less."""

_GENERIC_WORDS = frozenset(
    {"get", "set", "list", "fetch", "run", "call", "make", "tool", "tools", "api", "the", "and"}
)
"""Words of tool names that say nothing of what a request needs."""


def tool_words(names: Iterable[str]) -> frozenset[str]:
    """The words of tool names that show a request needs them (`get_weather` -> `weather`)."""
    words: set[str] = set()
    for name in names:
        spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name).lower()
        words.update(re.findall(r"[a-z0-9]+", spaced))
    return frozenset(word for word in words if len(word) >= 3 and word not in _GENERIC_WORDS)


def names_a_tool(request: str, words: frozenset[str]) -> bool:
    """Whether a word of the request starts with a tool word (`pages` names `page`)."""
    return any(
        said.startswith(word)
        for said in re.findall(r"[a-z0-9]+", request.lower())
        for word in words
    )


def plan_point(state: LoopState, words: frozenset[str], *, tools: bool) -> Point:
    """Place the next plan of a run from its state and the loop's tool words."""
    if not tools:
        return "no_tools"
    round_state = state.get("round_state") or empty_round_state()
    if run_book(state).get("rollback_note"):
        return "after_failure"
    if not round_state["round_index"]:
        return "tool_request" if names_a_tool(state.get("user_input", ""), words) else "chat"
    for record in round_state["last_round_records"]:
        if not record["success"]:
            return "after_failure"
    return "after_success"


def replies_in_order(model: object) -> bool:
    """Whether a model's replies follow the order of its requests (it says so itself).

    "auto" never speculates with such an answer model (`ScriptedChatModel` with a
    script): an extra request would take a reply meant for a later one.
    """
    return getattr(model, "replies_in_order", False) is True


def should_speculate(
    mode: Speculation, point: Point, response_rate: float, *, in_order: bool = False
) -> bool:
    """Whether to request the answer alongside the plan.

    Args:
        mode: `True` (always), `False` (never) or `"auto"`.
        point: Where the plan stands (`plan_point`).
        response_rate: The loop's estimate of how often a plan there says `response`.
        in_order: The answer model's replies follow the order of its requests.
    """
    if mode != "auto":
        return bool(mode)
    if in_order:
        return False
    return point == "no_tools" or response_rate >= MIN_RESPONSE_RATE


@dataclass
class _Count:
    responses: float
    plans: float


class SpeculationEstimate:
    """How often a plan at each point said `response`, over a loop's runs (thread-safe).

    Each point starts at its prior (`PRIORS`) and counts every plan the loop decided
    there, speculated or not. A re-ask never starts another answer.
    """

    def __init__(self) -> None:
        """Start every point at its prior."""
        self._counts = {point: _Count(*prior) for point, prior in PRIORS.items()}
        self._lock = threading.Lock()
        self._words: tuple[tuple[str, ...], frozenset[str]] = ((), frozenset())

    def point(self, state: LoopState, tool_names: Iterable[str]) -> Point:
        """Place the next plan of a run (`plan_point`; tool words rebuilt when tools change)."""
        names = tuple(tool_names)
        if self._words[0] != names:
            self._words = (names, tool_words(names))
        return plan_point(state, self._words[1], tools=bool(names))

    def wanted(self, mode: Speculation, point: Point, answer_model: object) -> bool:
        """Whether to request the answer alongside a plan at `point` (`should_speculate`)."""
        in_order = replies_in_order(answer_model)
        return should_speculate(mode, point, self.rate(point), in_order=in_order)

    def rate(self, point: Point) -> float:
        """The estimated share of plans at `point` that say `response`."""
        with self._lock:
            count = self._counts[point]
            return count.responses / count.plans

    def observe(self, point: Point, responded: bool) -> None:
        """Count a decided plan at `point`."""
        with self._lock:
            count = self._counts[point]
            if count.plans >= WINDOW:
                count.responses, count.plans = count.responses / 2, count.plans / 2
            count.responses += responded
            count.plans += 1


# -- the speculative answer ----------------------------------------------------------------

_END, _WAIT = object(), object()
"""What `_next` gives instead of a chunk: the answer is over, or not there yet."""


class SpeculativeAnswer:
    """One answer call started ahead of the decision to answer (`start`, then `adopt`)."""

    def __init__(self, parts: LoopParts, model: BaseChatModel, messages: Sequence[BaseMessage]):
        """Prepare the answer call of `model` for `messages` (`start` starts it)."""
        self.model = model
        self.messages = list(messages)
        self.parts = parts
        self.chunks: list[Any] = []
        self.finished = False
        self.error: BaseException | None = None
        self.cut = ""
        self.cancelled = False
        self._condition = threading.Condition()
        self._wakers: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        self._handle: Handle | None = None

    def start(self, *, asynchronous: bool) -> SpeculativeAnswer:
        """Start streaming the answer, in an empty context (no callbacks: nothing streams)."""
        workers = self.parts.runner.invoker.threads.workers
        self._handle = _start(self._produce(), workers, asynchronous=asynchronous, empty=True)
        return self

    async def _produce(self) -> None:
        """Stream the answer into `chunks`."""
        limits = self.parts.model_limits
        workers = self.parts.runner.invoker.threads.workers
        read = BoundedRead[Any](
            "answer", limits, limits.max_answer_chars, lambda c: len(c.text), workers=workers
        )

        def take(chunk: Any) -> bool:
            if self.cancelled:
                return True  # stop reading: the stream is closed
            with self._condition:
                self.chunks.append(chunk)
                self._wake()
            return False

        try:
            await read.consume(self.model, self.messages, take)
            self._finish(cut=read.cut)
        except (Exception, asyncio.CancelledError) as error:  # the answer node asks again
            self._finish(error=error)

    def _finish(self, *, cut: str = "", error: BaseException | None = None) -> None:
        with self._condition:
            if self.finished:
                return
            self.finished, self.cut, self.error = True, cut, error
            self._wake()

    def _wake(self) -> None:
        self._condition.notify_all()
        for loop, event in self._wakers:
            loop.call_soon_threadsafe(event.set)

    def cancel(self) -> None:
        """Stop the answer: it will not be used."""
        self.cancelled = True
        if self._handle is not None:
            self._handle.cancel()
        self._finish(error=asyncio.CancelledError("the speculative answer was cancelled"))

    def _next(self, index: int, event: asyncio.Event | None = None) -> Any:
        """Chunk `index`, `_END` when there is no more, or `_WAIT` (async: wait on `event`).

        Without `event`, wait here for the chunk or the end. Raises the producer's error.
        """
        with self._condition:
            if event is None:
                self._condition.wait_for(lambda: index < len(self.chunks) or self.finished)
            if index < len(self.chunks):
                return self.chunks[index]
            if self.finished:
                if self.error is not None:
                    raise self.error
                return _END
            assert event is not None  # a sync reader waited for a chunk or the end
            event.clear()  # under the lock: a chunk put after this sets it again
            return _WAIT

    def iterate(self) -> Iterator[Any]:
        """Yield the answer's chunks, waiting for the next one (sync)."""
        index = 0
        while (chunk := self._next(index)) is not _END:
            index += 1
            yield chunk

    async def aiterate(self) -> AsyncIterator[Any]:
        """Yield the answer's chunks, waiting for the next one (async)."""
        event, index = asyncio.Event(), 0
        with self._condition:
            self._wakers.append((asyncio.get_running_loop(), event))
        while (chunk := self._next(index, event)) is not _END:
            if chunk is _WAIT:
                await event.wait()
            else:
                index += 1
                yield chunk

    def matches(self, model: BaseChatModel, messages: Sequence[BaseMessage]) -> bool:
        """Whether this is the answer the answer node would ask for now."""
        return model is self.model and list(messages) == self.messages

    @property
    def prompt_chars(self) -> int:
        """Characters of the answer's prompt."""
        return sum(len(message_text(message)) for message in self.messages)

    def spent(self) -> tuple[int, int]:
        """Tokens spent so far (input, output): reported usage, else an estimate."""
        with self._condition:
            chunks = list(self.chunks)
        tokens_in, tokens_out = message_usage(chunks)
        if tokens_in == 0:
            tokens_in = -(-self.prompt_chars // CHARS_PER_TOKEN)
        if tokens_out == 0:
            written = sum(len(chunk.text) for chunk in chunks)
            tokens_out = -(-written // CHARS_PER_TOKEN)
        return tokens_in, tokens_out

    def drop(self, emit: Emit, outcome: str) -> tuple[str, int, int]:
        """Cancel this answer and report it (`answer_speculated`); its tokens still count.

        Returns:
            The model's name and the tokens spent (input, output), for the run's usage.
        """
        self.cancel()
        tokens_in, tokens_out = self.spent()
        emit(
            AnswerSpeculated(
                outcome=outcome,
                adopted=False,
                input_tokens=tokens_in,
                output_tokens=tokens_out,
                wasted_input_chars=self.prompt_chars,
            )
        )
        return model_name(self.model), tokens_in, tokens_out

    async def adopt(self, configure: Configure, emit: Emit) -> Answer | None:
        """Take the answer in the answer node; None when it cannot be used as is.

        When a callback handler would see a model call here (`_watched`), it is relayed
        through one (`_Relay`), so the handler and `stream_mode="messages"` see its tokens
        as if the answer node had asked the model; else its chunks are taken as they came.
        """
        taken: list[Any]
        running = has_running_loop()
        try:
            if not _watched():  # no handler would see the relay: the chunks as they came
                if running:
                    taken = [_as_message_chunk(chunk) async for chunk in self.aiterate()]
                else:
                    taken = list(map(_as_message_chunk, self.iterate()))
            elif running:
                relay = configure(_Relay(source=self))
                taken = [chunk async for chunk in relay.astream(self.messages)]
            else:
                taken = list(configure(_Relay(source=self)).stream(self.messages))
        except Exception:  # the producer failed: the answer node asks normally
            return None
        if not taken or self.error is not None:
            return None
        reply = message_chunk_to_message(reduce(operator.add, taken))
        if needs_another_try(reply):
            return None  # the normal path asks again with a larger budget
        emit(
            AnswerSpeculated(
                outcome="adopted",
                adopted=True,
                input_tokens=0,
                output_tokens=0,
                wasted_input_chars=0,
            )
        )
        return Answer(reply, self.cut)


def _watched() -> bool:
    """Whether a callback handler would see a model call made here.

    A tracer (LangSmith), the app's callbacks, or LangGraph's handler of the `messages`
    stream: the call's own config and what the environment turns on, as LangChain
    configures a model call's callbacks.
    """
    callbacks = ensure_config().get("callbacks")
    return bool(CallbackManager.configure(callbacks).handlers)


def _as_message_chunk(chunk: Any) -> AIMessageChunk:
    return chunk if isinstance(chunk, AIMessageChunk) else AIMessageChunk(content=chunk.text)


class _Relay(BaseChatModel):
    """A chat model whose reply is a speculative answer's stream."""

    _source: SpeculativeAnswer = PrivateAttr()

    def __init__(self, *, source: SpeculativeAnswer, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._source = source

    @property
    def _llm_type(self) -> str:
        return "speculative-answer"

    @staticmethod
    def _generation(chunk: Any) -> ChatGenerationChunk:
        return ChatGenerationChunk(message=_as_message_chunk(chunk))

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        chunks = list(self._source.iterate())
        reply = message_chunk_to_message(reduce(operator.add, chunks))
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        for chunk in self._source.iterate():
            yield self._generation(chunk)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        async for chunk in self._source.aiterate():
            yield self._generation(chunk)


# -- streaming dispatch --------------------------------------------------------------------


class CommandStream(Protocol):
    """A plan as it streams, read as commands (`PlanStreamParser`, `NativeCallParser`)."""

    @property
    def next_action(self) -> str | None:
        """The plan's `next_action`, once known."""
        ...

    @property
    def finished(self) -> bool:
        """Whether the whole plan arrived."""
        ...

    @property
    def commands_completed(self) -> int:
        """How many commands are complete so far."""
        ...

    def completed_commands(self, start: int = 0) -> list[tuple[int, Any]]:
        """The complete commands from `start`, as (position, raw command) pairs."""
        ...


@dataclass
class EarlyCall:
    """A tool call started while its plan was streaming.

    Attributes:
        command: The command as the plan's state keeps it, redacted (execute adopts the
            call only for the same command at the same position).
        call: The call as it was prepared: execute adopts it as is.
        handle: The running call, whose result is the call's record.
    """

    command: ToolCommand
    call: PreparedCall
    handle: Handle

    def cancel(self) -> None:
        """Cancel the call (its result will not be used)."""
        self.handle.cancel()

    def finished(self) -> Any | None:
        """The call's record if it already finished without error, else None."""
        handle = self.handle
        if not handle.done() or handle.cancelled() or handle.exception() is not None:
            return None
        return handle.result()

    async def record(self) -> Any:
        """Wait for the call's record."""
        handle = self.handle
        if isinstance(handle, asyncio.Task):
            return await handle
        if has_running_loop():
            return await asyncio.wrap_future(handle)
        return handle.result()


class PlanAcceleration:
    """What one run of the plan node starts ahead: early calls, a speculative answer.

    The plan node drives it: `new_reply` before each planner call, `follow` after each
    chunk, `stop_calls` when a reply will not be executed, `decided` at the end.
    """

    def __init__(
        self,
        accelerator: Accelerator,
        state: LoopState,
        scope: RunScope,
        config: RunnableConfig,
        point: Point,
        *,
        asynchronous: bool,
    ) -> None:
        self.accelerator, self.parts = accelerator, accelerator.parts
        self.state, self.scope, self.config = state, scope, config
        self.asynchronous = asynchronous
        self.point = point
        """Where the plan stands, for the estimate of how often it says `response`."""
        self.speculative: SpeculativeAnswer | None = None
        """The answer started alongside the planner call, until it is kept or cancelled."""
        self.wasted: list[tuple[str, int, int]] = []
        """Cancelled speculative answers: (model, input tokens, output tokens)."""
        self.dispatching = scope.settings.streaming_dispatch
        self.invocation = invocation_of(state)
        self.started_in_round = 0
        """Calls started for every reply of this round (the per-round cap counts them)."""
        self.calls: dict[str, PreparedCall] = {}
        self.discarded: list[ToolExecutionRecord] = []
        """Records of calls started for replies that were not executed."""
        self.started = 0
        self.new_reply()

    def new_reply(self) -> None:
        """Before each planner call: settle what the previous reply started, look anew."""
        self.stop_calls()
        self._preparation: PlanPreparation | None = None
        self.looked_at = self.started = 0
        self.stopped = False

    @property
    def preparation(self) -> PlanPreparation:
        """Prepares each command as execute will (same function, same order).

        Made when the reply's first command may start early: a reply that starts none
        (one that arrives whole, or says `response`) does not replay the run's reads.
        """
        if self._preparation is None:
            self._preparation = PlanPreparation(self.parts, self.state, self.scope.settings)
        return self._preparation

    def follow(self, parser: CommandStream) -> None:
        """After each chunk: start what may start, drop the answer once `execute` is known."""
        action = parser.next_action
        if self.dispatching and not self.stopped and action == "execute":
            self._dispatch(parser)
        if self.speculative is not None and action is not None and action != "response":
            self._drop_answer("cancelled")

    def _dispatch(self, parser: CommandStream) -> None:
        """Start what the commands completed since the last look allow."""
        if parser.finished or parser.commands_completed <= self.looked_at:
            return  # a whole plan: execute starts its calls as early
        for position, raw in parser.completed_commands(self.looked_at):
            if position != self.looked_at or not self._consider(position, raw):
                self.stopped = True  # an order to keep, or positions no longer certain
                return
            self.looked_at = position + 1

    def _consider(self, position: int, raw: dict[str, Any]) -> bool:
        """Start one command when it may; False when no later command may start early."""
        settings = self.scope.settings
        limit, cap = settings.concurrency, settings.max_commands_per_round
        if position >= cap or self.started_in_round >= cap or (limit and self.started >= limit):
            return False
        commands = normalize_plan_decision(
            {"next_action": "execute", "execution_commands": [raw]}
        ).get("execution_commands")
        if not commands:
            return False
        # prepared from the command as the plan's state will keep it (redacted), as execute
        # prepares it; its tool gets the planner's own arguments, as in `call_tool`
        written, registry = commands[0], self.parts.registry
        command = self.parts.kept_command(written)
        if registry.get(command["tool_name"]) is not None:
            policy = registry.policy(command["tool_name"])
            if not (policy.read_only and policy.concurrency_safe and policy.idempotent):
                return False  # a call with side effects keeps its place in the order
        call, settled = self.preparation.prepare(position, command)
        if settled is not None:
            return True  # settled without running (unknown tool, bad arguments, duplicate)
        if call.get("depends_on"):
            # it waits for its inputs and execute sends it; what comes after a possible
            # write must wait for it, so nothing later starts early
            return not registry.policy(call["tool_name"]).writes_state
        if call.get("after_write") or call.get("follows"):
            return False  # it must wait for an earlier call (execute names and orders it)
        parts, scope = self.parts, self.scope
        config = tool_config(parts, call, self.config, scope.context)
        workers = parts.runner.invoker.threads.workers
        work = guarded_call(parts, call, scope, config)
        own = own_arguments(written, command, parts.unredacted)
        with planned(None if own is None else (own, dict(command["tool_kwargs"]))):
            handle = _start(work, workers, asynchronous=self.asynchronous, empty=False)
        self.accelerator.hold_call(self.invocation, EarlyCall(command, call, handle))
        self.started += 1
        self.started_in_round += 1
        self.calls[call["call_id"]] = call
        scope.emit(
            ToolDispatched(
                call_id=call["call_id"], tool_name=call["tool_name"], index=call["index"]
            )
        )
        return True

    def stop_calls(self) -> None:
        """Settle the calls started for a reply that will not be executed (`discarded`).

        A call that finished keeps its record (its result is not used); one still
        running is cancelled and recorded as `cancelled`.
        """
        if not self.started:
            return
        self.started = 0
        for call_id, early in self.accelerator.withdraw_calls(self.invocation).items():
            call = self.calls.pop(call_id, None)
            record = early.finished()
            if record is None:
                early.cancel()
                if call is None:
                    continue
                message = (
                    f"{call['tool_name']} was started while a plan was streaming and stopped "
                    "when that plan was rejected; it is a read, so nothing needs undoing."
                )
                record = make_record(
                    call, ToolOutcome.refused("cancelled", call["tool_name"], message)
                )
                emit_settled(self.scope.emit, record)
            else:
                notes = [*(record.get("notes") or []), REJECTED_NOTE]
                record = cast(ToolExecutionRecord, {**record, "notes": notes})
            self.discarded.append(record)

    def decided(self, decision: PlanDecision, failed: bool) -> None:
        """The plan node decided: hand over what the decision uses, settle the rest."""
        action = decision["next_action"]
        if failed or action != "execute":
            self.stop_calls()
        if not failed:
            self.accelerator.estimate.observe(self.point, action == "response")
        if self.speculative is not None:
            if failed or action != "response":
                self._drop_answer("cancelled")
            else:
                self.accelerator.hold_answer(self.invocation, self.speculative)

    def _drop_answer(self, outcome: str) -> None:
        speculative, self.speculative = self.speculative, None
        if speculative is not None:
            self.wasted.append(speculative.drop(self.scope.emit, outcome))

    def abandon(self) -> None:
        """The plan node did not finish (cancelled, interrupted, failed): stop its work.

        Nothing it started is used: a resumed run plans again and starts anew. Without
        this, an answer started beside the plan would stream to its end for nobody.
        """
        speculative, self.speculative = self.speculative, None
        if speculative is not None:
            speculative.cancel()
        self.started = 0
        self.accelerator.abandon_run(self.invocation)


# -- the planner's reply as the answer -----------------------------------------------------


def whole_reply(parts: LoopParts, state: LoopState, scope: RunScope) -> bool:
    """Whether a native planner's text reply is the answer (`adopts_planner_reply`)."""
    round_state = state.get("round_state") or empty_round_state()
    return adopts_planner_reply(
        scope.settings.plan_mode,
        parts.models.planner(scope.loop),
        parts.models.answerer(scope.loop),
        tools_ran=bool(round_state["done_plans"]),
        results_omitted=omits_results(
            state.get("messages") or (), scope.settings.keep_tool_results
        ),
    )


# -- the loop's accelerator ----------------------------------------------------------------


@dataclass
class _RunWork:
    calls: dict[str, EarlyCall] = field(default_factory=dict)
    answer: SpeculativeAnswer | None = None
    touched: float = field(default_factory=time.monotonic)

    def cancel(self) -> None:
        """Stop every piece of work it holds."""
        for item in (*self.calls.values(), self.answer):
            if item is not None:
                item.cancel()


class Accelerator:
    """The latency features of one compiled loop, and the work they started (thread-safe).

    Built once by `create_tool_loop` and handed to the plan, execute, call_tool and
    answer nodes, which call its hooks.
    """

    def __init__(self, parts: LoopParts, stale_after_s: float = STALE_AFTER_S) -> None:
        """Accelerate the loop of `parts`."""
        self.parts = parts
        self.estimate = SpeculationEstimate()
        self._runs: dict[str, _RunWork] = {}
        self._lock = threading.Lock()
        self._stale_after_s = stale_after_s

    def plan_started(
        self,
        state: LoopState,
        scope: RunScope,
        config: RunnableConfig,
        answer: Callable[[], tuple[BaseChatModel, list[BaseMessage]]],
        *,
        asynchronous: bool,
    ) -> PlanAcceleration:
        """Hook of the plan node's start: start the answer if wanted, dispatch while it streams.

        Args:
            state: The run's state.
            scope: The plan node's scope.
            config: The plan node's config (the early calls' config derives from it).
            answer: The answer request (model, messages) the run would make now.
            asynchronous: Whether the node runs under `ainvoke`.
        """
        point = self.estimate.point(state, self.parts.registry.names)
        plan = PlanAcceleration(self, state, scope, config, point, asynchronous=asynchronous)
        answerer = self.parts.models.answerer(scope.loop)
        mode = scope.settings.speculative_answer
        if mode == "auto" and scope.settings.plan_mode == "native":
            # the planner's own text reply would be the answer: no second model asked
            mode = "auto" if not whole_reply(self.parts, state, scope) else False
        if self.estimate.wanted(mode, point, answerer):
            model, messages = answer()
            speculative = SpeculativeAnswer(self.parts, model, messages)
            plan.speculative = speculative.start(asynchronous=asynchronous)
        return plan

    def reads_whole_reply(self, state: LoopState, scope: RunScope, plan: PlanAcceleration) -> bool:
        """Whether the planner's text reply is read whole: it may be the answer."""
        native = scope.settings.plan_mode == "native"
        return native and plan.speculative is None and whole_reply(self.parts, state, scope)

    def adopted_reply(self, state: LoopState, scope: RunScope) -> AIMessage | None:
        """Hook of the `answer` node: the planner's reply when it is the run's answer.

        A planner's refusal is the answer (as `create_agent` ends with it), and so is a
        reply without a plan a middleware wrote itself (`PlanDecision.final`). Otherwise it
        is when the last plan is a native reply without tool calls, read whole and usable,
        and `adopts_planner_reply` holds. The message keeps the reply's id, so a
        `messages` stream that showed the planner's tokens does not show it again.
        None: the answer model is asked.
        """
        decision: Mapping[str, Any] = state.get("decision") or {}
        refusal = decision.get("refusal") or ""
        if refusal and decision.get("next_action") == "response":
            return refusal_message(refusal, decision.get("model_provider") or "", decision)
        final = decision.get("final")
        if final is not None and decision.get("next_action") == "response":
            return AIMessage(final)  # a middleware's own reply, without a plan
        reply = decision.get("reply") or ""
        if not reply or decision.get("next_action") != "response":
            return None
        if state.get("status") == "planner_failed" or not whole_reply(self.parts, state, scope):
            return None
        return AIMessage(reply, id=decision.get("reply_id") or None)

    def _work(self, run_id: str) -> _RunWork:
        """The run's work (under the lock), after dropping what went stale."""
        cutoff = time.monotonic() - self._stale_after_s
        for stale in [key for key, work in self._runs.items() if work.touched < cutoff]:
            self._runs.pop(stale).cancel()
        work = self._runs.setdefault(run_id, _RunWork())
        work.touched = time.monotonic()
        return work

    def _forget_if_empty(self, run_id: str) -> None:
        work = self._runs.get(run_id)
        if work is not None and not work.calls and work.answer is None:
            del self._runs[run_id]

    def hold_call(self, run_id: str, early: EarlyCall) -> None:
        """Hold an early call until `call_tool` adopts it or it is cancelled."""
        with self._lock:
            self._work(run_id).calls[early.call["call_id"]] = early

    def withdraw_calls(self, run_id: str) -> dict[str, EarlyCall]:
        """Take every early call of the run back, by call id (the caller settles them)."""
        with self._lock:
            work = self._runs.get(run_id)
            calls: dict[str, EarlyCall] = {}
            if work is not None:
                calls, work.calls = work.calls, {}
            self._forget_if_empty(run_id)
        return calls

    def started_calls(self, run_id: str) -> dict[str, EarlyCall]:
        """Hook of `execute`: the run's early calls, by call id (`call_tool` takes them)."""
        if not self._runs:
            return {}
        with self._lock:
            work = self._runs.get(run_id)
            return dict(work.calls) if work is not None else {}

    def drop_calls(self, run_id: str, keep: Callable[[str], bool]) -> None:
        """Hook of `execute`: cancel the run's early calls it does not adopt."""
        with self._lock:
            work = self._runs.get(run_id)
            dropped = [work.calls.pop(i) for i in list(work.calls) if not keep(i)] if work else []
            self._forget_if_empty(run_id)
        for early in dropped:
            early.cancel()

    def take_call(self, call: PreparedCall) -> EarlyCall | None:
        """Hook of `call_tool`: the call as it started early, when it is the same call."""
        if not self._runs:  # no run holds anything: nothing started early
            return None
        invocation = kept_under(call)
        with self._lock:
            work = self._runs.get(invocation)
            early = work.calls.pop(call["call_id"], None) if work is not None else None
            self._forget_if_empty(invocation)
        if early is not None and early.call["call_key"] != call["call_key"]:
            early.cancel()
            return None
        return early

    def hold_answer(self, run_id: str, answer: SpeculativeAnswer) -> None:
        """Hold a speculative answer until the `answer` node adopts it or it is cancelled."""
        with self._lock:
            work = self._work(run_id)
            replaced, work.answer = work.answer, answer
        if replaced is not None:
            replaced.cancel()

    def take_answer(self, run_id: str) -> SpeculativeAnswer | None:
        """Hook of the `answer` node: the run's speculative answer (it adopts or drops it)."""
        with self._lock:
            work = self._runs.get(run_id)
            answer = None
            if work is not None:
                answer, work.answer = work.answer, None
            self._forget_if_empty(run_id)
        return answer

    def abandon_run(self, run_id: str) -> None:
        """Stop the work a run started ahead: the node that would adopt it will not run."""
        with self._lock:
            work = self._runs.pop(run_id, None)
        if work is not None:
            work.cancel()

    def __len__(self) -> int:
        """Runs with work in flight."""
        with self._lock:
            return len(self._runs)
