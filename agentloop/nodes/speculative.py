"""The speculative answer: the answer requested alongside a plan that may end the loop.

With `PlanningOptions(speculative_answer=True)` the `plan` node starts the answer call
at the same time as the planner call. The answer streams into a buffer, out of sight (no
callbacks, so no `messages` stream and no trace of it under `plan`). When the plan says
`response`, the `answer` node adopts it: it replays the buffered chunks, then the rest
as it arrives, through `_Relay`, a chat model whose stream is that buffer, so the
answer's tokens reach LangGraph's `messages` stream from the `answer` node as usual.
When the plan says `execute`, the answer is cancelled as soon as that is known; its
tokens are still counted in the run's usage.
"""

from __future__ import annotations

import asyncio
import contextvars
import operator
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from functools import reduce
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessageChunk, BaseMessage, message_chunk_to_message
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from pydantic import PrivateAttr

from agentloop._effects import END, Core, adrive, close_iterator, drive, is_async, next_item
from agentloop._sync import WorkerPool
from agentloop.events import AnswerSpeculated, Emit
from agentloop.messages import message_text
from agentloop.model_calls import Answer, needs_another_try
from agentloop.model_stream import BoundedRead, ModelLimits
from agentloop.models import model_name
from agentloop.usage import message_usage

__all__ = ["Configure", "SpeculativeAnswer"]

Configure = Callable[[Runnable[Any, BaseMessage]], Runnable[Any, BaseMessage]]
"""How the answer node configures a model it calls (its tags and run name)."""

CHARS_PER_TOKEN = 4
"""Token estimate of a cancelled answer that reported no usage."""
_END, _WAIT = object(), object()
"""What `_next` gives instead of a chunk: the answer is over, or not there yet."""


class SpeculativeAnswer:
    """One answer call started ahead of the decision to answer.

    Start it with `start_async` (under `ainvoke`) or `start_thread` (under `invoke`);
    adopt it with `adopt` (a core), or `cancel` it.
    """

    def __init__(
        self,
        model: BaseChatModel,
        messages: Sequence[BaseMessage],
        limits: ModelLimits,
        workers: WorkerPool,
    ) -> None:
        self.model = model
        self.messages = list(messages)
        self.limits = limits
        self.workers = workers
        """The threads that read a sync stream (the loop's pool)."""
        self.chunks: list[Any] = []
        self.finished = False
        self.error: BaseException | None = None
        self.cut = ""
        self.cancelled = False
        self._condition = threading.Condition()
        self._wakers: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        self._task: asyncio.Task[None] | None = None

    # -- producing -----------------------------------------------------------------------

    @classmethod
    def start_async(
        cls,
        model: BaseChatModel,
        messages: Sequence[BaseMessage],
        limits: ModelLimits,
        workers: WorkerPool,
    ) -> SpeculativeAnswer:
        """Start the answer as a task of the running event loop."""
        answer = cls(model, messages, limits, workers)
        loop = asyncio.get_running_loop()
        # an empty context: no callbacks of the plan node, so nothing streams from it
        answer._task = loop.create_task(adrive(answer._produce()), context=contextvars.Context())
        return answer

    @classmethod
    def start_thread(
        cls,
        model: BaseChatModel,
        messages: Sequence[BaseMessage],
        limits: ModelLimits,
        workers: WorkerPool,
    ) -> SpeculativeAnswer:
        """Start the answer on a daemon thread (for sync runs; its stream is read in `workers`)."""
        answer = cls(model, messages, limits, workers)
        context = contextvars.Context()
        thread = threading.Thread(
            target=context.run,
            args=(drive, answer._produce()),
            name="agentloop-answer",
            daemon=True,
        )
        thread.start()
        return answer

    def _bounded(self) -> BoundedRead[Any]:
        limits = self.limits
        return BoundedRead(
            "answer", limits, limits.max_answer_chars, lambda c: len(c.text), workers=self.workers
        )

    def _produce(self) -> Core[None]:
        """Stream the answer into `chunks`; a core (a thread drives it, or a task)."""
        read = self._bounded()

        def take(chunk: Any) -> bool:
            if self.cancelled:
                return True  # stop reading: the stream is closed
            self._put(chunk)
            return False

        try:
            yield from read.consume(self.model, self.messages, take)
            self._finish(cut=read.cut)
        except (Exception, asyncio.CancelledError) as error:  # the answer node asks again
            self._finish(error=error)

    def _put(self, chunk: Any) -> None:
        with self._condition:
            self.chunks.append(chunk)
            self._wake()

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
        if self._task is not None:
            self._task.cancel()
        self._finish(error=asyncio.CancelledError("the speculative answer was cancelled"))

    # -- consuming -----------------------------------------------------------------------

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

    def _waker(self) -> asyncio.Event:
        """An event set on the running loop whenever a chunk is put or the answer ends."""
        event = asyncio.Event()
        with self._condition:
            self._wakers.append((asyncio.get_running_loop(), event))
        return event

    def iterate(self) -> Iterator[Any]:
        """Yield the answer's chunks, waiting for the next one (sync)."""
        index = 0
        while (chunk := self._next(index)) is not _END:
            index += 1
            yield chunk

    async def aiterate(self) -> AsyncIterator[Any]:
        """Yield the answer's chunks, waiting for the next one (async)."""
        event, index = self._waker(), 0
        while (chunk := self._next(index, event)) is not _END:
            if chunk is _WAIT:
                await event.wait()
            else:
                index += 1
                yield chunk

    def matches(self, model: BaseChatModel, messages: Sequence[BaseMessage]) -> bool:
        """Whether this is the answer the answer node would ask for now."""
        return model is self.model and list(messages) == self.messages

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
        return self.name, tokens_in, tokens_out

    def report_adopted(self, emit: Emit) -> None:
        """Report that the answer node uses this answer (`answer_speculated`: nothing wasted)."""
        emit(
            AnswerSpeculated(
                outcome="adopted",
                adopted=True,
                input_tokens=0,
                output_tokens=0,
                wasted_input_chars=0,
            )
        )

    @property
    def prompt_chars(self) -> int:
        """Characters of the answer's prompt."""
        return sum(len(message_text(message)) for message in self.messages)

    @property
    def name(self) -> str:
        """The answer model's name (for prices)."""
        return model_name(self.model)

    def _usable(self, chunks: list[Any]) -> Answer | None:
        if not chunks or self.error is not None:
            return None
        reply = message_chunk_to_message(reduce(operator.add, chunks))
        if needs_another_try(reply):
            return None  # the normal path asks again with a larger budget
        return Answer(reply, self.cut)

    def adopt(self, configure: Configure) -> Core[Answer | None]:
        """Relay the answer from the answer node (a core); None when it cannot be used as is.

        The relay streams through the node's callbacks, so `stream_mode="messages"` shows
        its tokens as if the answer node had asked the model.
        """
        relay = configure(_Relay(source=self))
        chunks: Any
        if (yield from is_async):
            chunks = relay.astream(self.messages)
        else:
            chunks = relay.stream(self.messages)
        taken: list[Any] = []
        try:
            while (chunk := (yield from next_item(chunks))) is not END:
                taken.append(chunk)
        except Exception:  # the producer failed: the answer node asks normally
            return None
        finally:
            yield from close_iterator(chunks)
        return self._usable(taken)


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
        message = chunk if isinstance(chunk, AIMessageChunk) else AIMessageChunk(content=chunk.text)
        return ChatGenerationChunk(message=message)

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
