"""Running a coroutine from sync code, and blocking calls off it, with no per-call cost.

The loop is one async core: its nodes, ledgers and model calls are coroutines, awaited
under `ainvoke`. Sync code runs them two ways:

- `run_blocking` (`run_without_loop`) runs a coroutine to its end in this thread with no
  event loop at all. That works for coroutines that never suspend: everything they
  wait for blocks instead, as each step decides by `has_running_loop` (`by_mode`;
  `pause` sleeps, a tool's thread is joined, a sync model stream is read).
- `LoopRunner.run` runs any coroutine on the one event loop of its runner (a daemon
  thread, started on first use), for what needs one: async-only tools, the app's
  async `wrap_tool_call` middleware. A compiled loop owns one runner, so a sync run
  never starts an event loop per call. (`run_coroutine_sync` starts a loop of its own:
  only for code with no runner at hand.)

Blocking calls (sync tools, sync model streams) run on a `WorkerPool`: daemon threads
reused from call to call, bounded, where a call hung past its timeout gives its thread
up so that it starves no later call.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import queue
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from functools import partial
from typing import Any, TypeVar

__all__ = [
    "LEFTOVER_GRACE_S",
    "CancellableFuture",
    "Job",
    "LoopRunner",
    "WorkerPool",
    "blocked_loop",
    "detach_task",
    "has_running_loop",
    "pause",
    "by_mode",
    "run_blocking",
    "run_coroutine_sync",
    "run_without_loop",
]

T = TypeVar("T")

LEFTOVER_GRACE_S = 1.0
"""How long tasks still running when the coroutine returns may take to stop once cancelled."""

_detached: weakref.WeakSet[asyncio.Task[Any]] = weakref.WeakSet()
"""Tasks taken out of asyncio's task list by `detach_task` (weakly held, as asyncio does)."""


def detach_task(task: asyncio.Task[Any]) -> bool:
    """Take a task that ignored its cancellation out of its event loop's task list.

    `asyncio.run()` cancels the tasks left at its end and waits for them: a task that
    ignores its cancellation would keep it from ever returning. A detached task runs on
    while its loop runs, and is not waited for when the loop shuts down (it is dropped,
    unfinished, when the loop closes). So are the tasks it waits for, down the chain
    (LangChain runs a tool's coroutine in a task of its own, which the task awaits).
    The loop of sync runs (`LoopRunner`, in a daemon thread) still lets them run to
    their end.

    Returns:
        Whether it is detached: asyncio's task list no longer holds it or the tasks it
        waits for (False on a Python whose asyncio keeps tasks where they cannot be
        taken out).
    """
    unregister = getattr(asyncio.tasks, "_unregister_task", None)
    if unregister is None:
        return False
    chain: list[asyncio.Task[Any]] = []
    waited: Any = task
    while isinstance(waited, asyncio.Task) and waited not in chain:
        chain.append(waited)
        waited = getattr(waited, "_fut_waiter", None)  # what it awaits (asyncio's own field)
    for link in chain:
        unregister(link)
        _detached.add(link)
        with contextlib.suppress(AttributeError):  # no "destroyed but pending" when dropped
            link._log_destroy_pending = False  # type: ignore[attr-defined]
    return not asyncio.all_tasks(task.get_loop()).intersection(chain)


def _leftovers(loop: asyncio.AbstractEventLoop) -> set[asyncio.Task[Any]]:
    """The loop's unfinished tasks, detached ones included."""
    detached = {task for task in _detached if task.get_loop() is loop and not task.done()}
    return asyncio.all_tasks(loop) | detached


def _run(coroutine: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run`, except that tasks left running are waited for only briefly.

    Once the coroutine returns, leftover tasks are cancelled and given `LEFTOVER_GRACE_S`
    to stop. A task that ignores its cancellation (a tool abandoned at its timeout)
    would hang `asyncio.run`'s clean-up forever; instead the loop runs on in a daemon
    thread until those tasks end, then closes.
    """
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    stubborn: set[asyncio.Task[Any]] = set()
    try:
        return loop.run_until_complete(coroutine)
    finally:
        try:
            stubborn = _cancel_leftovers(loop)
        finally:
            asyncio.set_event_loop(None)
            if stubborn:
                threading.Thread(
                    target=_close_when_done,
                    args=(loop, stubborn),
                    name="agentloop-abandoned-tasks",
                    daemon=True,
                ).start()
            else:
                _close(loop)


def _cancel_leftovers(loop: asyncio.AbstractEventLoop) -> set[asyncio.Task[Any]]:
    """Cancel the loop's leftover tasks; return those still running after the grace."""
    leftovers = _leftovers(loop)
    if not leftovers:
        return set()
    for task in leftovers:
        task.cancel()
    done, pending = loop.run_until_complete(asyncio.wait(leftovers, timeout=LEFTOVER_GRACE_S))
    for task in done:
        if not task.cancelled() and task.exception() is not None:
            loop.call_exception_handler(
                {
                    "message": "unhandled exception of a task cancelled at the end of a run",
                    "exception": task.exception(),
                    "task": task,
                }
            )
    return pending


def _close_when_done(loop: asyncio.AbstractEventLoop, tasks: set[asyncio.Task[Any]]) -> None:
    try:
        while tasks:  # they may start more (recording their late outcome)
            loop.run_until_complete(asyncio.wait(tasks))
            for task in tasks:
                if not task.cancelled():
                    task.exception()  # retrieved: abandoned, their outcome is reported late
            tasks = _leftovers(loop)
    finally:
        _close(loop)


def _close(loop: asyncio.AbstractEventLoop) -> None:
    try:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
    finally:
        loop.close()


def run_coroutine_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion on an event loop of its own (prefer a `LoopRunner`).

    For code with no `LoopRunner` at hand, or on a runner's own thread. With no loop
    running in this thread it runs on a new event loop (like `asyncio.run`, but tasks
    left running are waited for only `LEFTOVER_GRACE_S` once cancelled); otherwise it
    does so in a helper thread. The caller's context variables (LangChain config,
    callbacks) are carried over.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _run(coroutine)
    return _in_helper_thread(partial(_run, coroutine), "agentloop-sync-bridge")


def _in_helper_thread(function: Callable[[], T], name: str) -> T:
    """Call `function` in a new thread (which runs no event loop) with this context's variables."""
    context = contextvars.copy_context()
    result: list[T] = []
    failure: list[BaseException] = []

    def target() -> None:
        try:
            result.append(context.run(function))
        except BaseException as error:
            failure.append(error)

    # a daemon: the caller waits for it, and once the caller is interrupted (Ctrl-C in a
    # notebook) nothing waits for it, so it must not hold up the interpreter's exit
    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return result[0]


class LoopRunner:
    """One event loop, in a daemon thread, for the coroutines a sync run must await.

    A compiled loop owns one (through its `ToolThreads`): under `invoke`, async-only
    tools and the app's async middleware run on it, so a sync run never
    starts an event loop per call. The loop and its thread start on first use; the loop
    stops when the runner is garbage collected (its thread is a daemon: a task still
    running, such as a tool abandoned at its timeout, never blocks the interpreter's exit).

    Args:
        name: The name of the loop's thread.
    """

    def __init__(self, name: str = "agentloop-loop") -> None:
        self.name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def _started(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                # in an empty context: the loop's own callbacks keep the one they are made in
                loop = contextvars.Context().run(asyncio.new_event_loop)
                thread = threading.Thread(target=_serve, args=(loop,), name=self.name, daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
                stop = weakref.finalize(self, _stop, loop)
                stop.atexit = False  # at exit the daemon thread just ends
            return self._loop

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine to its end on the runner's loop, and wait for it here.

        Callable from any thread, under a running event loop too (a sync `invoke` inside
        Jupyter). The coroutine runs in a copy of the caller's context (LangChain config,
        callbacks). Called from the loop's own thread, it runs on a loop of its own
        instead (`run_coroutine_sync`). If the wait is interrupted (Ctrl-C), the
        coroutine is cancelled.
        """
        loop = self._started()
        if threading.current_thread() is self._thread:
            return run_coroutine_sync(coroutine)
        context = contextvars.copy_context()
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        tasks: list[asyncio.Task[T]] = []
        around = _AROUND.get()

        def start() -> None:
            if not future.set_running_or_notify_cancel():
                coroutine.close()
                return
            task = loop.create_task(coroutine, context=context)
            tasks.append(task)
            task.add_done_callback(partial(_settle, future))
            if around is not None:
                around.started(loop, task)

        loop.call_soon_threadsafe(start)
        try:
            return future.result()
        except BaseException:
            if not future.done():
                future.cancel()
                loop.call_soon_threadsafe(lambda: [task.cancel() for task in tasks])
            raise


class CancellableFuture(concurrent.futures.Future[T]):
    """Work run from sync code on a pool thread, which `cancel` stops while it runs too.

    A running `concurrent.futures.Future` cannot be cancelled; this one cancels the
    coroutines its work waits for on a `LoopRunner` (an async tool under `invoke`), and
    any it starts later, so the work ends with `CancelledError` at its next wait. Work
    that waits for no coroutine (a sync tool) still runs to its end.
    """

    def __init__(self) -> None:
        super().__init__()
        self._lock_tasks = threading.Lock()
        self._tasks: list[tuple[asyncio.AbstractEventLoop, asyncio.Task[Any]]] = []
        self._stopped = False

    def run(self, function: Callable[[], T]) -> None:
        """Call `function` (unless cancelled first) and settle with its outcome."""
        if not self.set_running_or_notify_cancel():
            return
        token = _AROUND.set(self)
        try:
            self.set_result(function())
        except BaseException as error:  # handed to whoever waits for it
            self.set_exception(error)
        finally:
            _AROUND.reset(token)

    def cancel(self) -> bool:
        """Cancel the work: at once if it has not started, else what it waits for."""
        with self._lock_tasks:
            self._stopped = True
            tasks, self._tasks = self._tasks, []
        for loop, task in tasks:
            with contextlib.suppress(RuntimeError):  # the loop is closed: the task ended
                loop.call_soon_threadsafe(task.cancel)
        return super().cancel()

    def started(self, loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any]) -> None:
        """Note a task the work started on `loop` (on the loop's thread)."""
        with self._lock_tasks:
            if not self._stopped:
                self._tasks.append((loop, task))
                task.add_done_callback(self._forget)
                return
        task.cancel()

    def _forget(self, task: asyncio.Task[Any]) -> None:
        with self._lock_tasks:
            self._tasks = [entry for entry in self._tasks if entry[1] is not task]


_AROUND: contextvars.ContextVar[CancellableFuture[Any] | None] = contextvars.ContextVar(
    "agentloop_cancellable", default=None
)
"""The `CancellableFuture` whose work runs in this context, if any."""


def _settle(future: concurrent.futures.Future[T], task: asyncio.Task[T]) -> None:
    """Hand a task's outcome to the future its caller waits on."""
    if future.done():
        return
    if task.cancelled():
        future.set_exception(asyncio.CancelledError())
    elif (error := task.exception()) is not None:
        future.set_exception(error)
    else:
        future.set_result(task.result())


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    """Run a runner's loop until it is stopped, then close it."""
    asyncio.set_event_loop(loop)
    try:
        while True:
            try:
                loop.run_forever()
            except BaseException:  # a task's SystemExit or Ctrl-C reached the loop:
                continue  # it is that task's error too, and its caller gets it
            break
        _cancel_leftovers(loop)
    finally:
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()


def _stop(loop: asyncio.AbstractEventLoop) -> None:
    """Stop a runner's loop (its runner is gone)."""
    with contextlib.suppress(RuntimeError):  # already closed
        loop.call_soon_threadsafe(loop.stop)


class WorkerPool:
    """Daemon threads that run blocking calls, reused from call to call.

    At most `size` threads work for the pool at once; a thread starts only when no idle
    one is free, and a call waits in a queue when all are busy. A call that cannot be
    stopped (a tool hung past its timeout) gives its thread up with `abandon`: the
    thread no longer counts, so a new one takes its place, and once the call returns
    it rejoins the pool if there is room, else it ends. Threads are daemons (unlike
    `concurrent.futures.ThreadPoolExecutor`'s, which the interpreter joins at exit: a
    hung call would block it); idle ones end when the pool is garbage collected.

    Args:
        size: Threads working at once.
        name: The prefix of their names.
    """

    def __init__(self, size: int, name: str) -> None:
        if size < 1:
            msg = f"a worker pool needs at least one thread, got {size!r}"
            raise ValueError(msg)
        self.size = size
        self.name = name
        self.started = 0
        """Threads the pool has started in all (for tests and measurements)."""
        self._shared = _Shared(size)
        close = weakref.finalize(self, self._shared.close)
        close.atexit = False

    def submit(self, function: Callable[[], object]) -> Job:
        """Run `function()` on a pool thread, in a copy of the caller's context.

        What it returns is dropped and what it raises is ignored: the caller hands its
        outcome over itself (into a future, a queue).
        """
        job = Job(function, contextvars.copy_context())
        shared = self._shared
        with shared.lock:
            shared.jobs.put(job)
            if shared.idle:
                shared.idle -= 1  # an idle thread takes it
                return job
            shared.waiting += 1
            start = self._room()
        if start:
            self._start()
        return job

    def abandon(self, job: Job) -> bool:
        """Give up the thread of a call that cannot be stopped; another takes its place.

        A call still waiting for a thread is given up too: the thread that runs it later
        counts again once it returns.

        Returns:
            Whether it was given up (False once it has finished).
        """
        shared = self._shared
        with shared.lock:
            if job.finished:
                return False
            if job.abandoned:
                return True
            job.abandoned = True
            shared.working -= 1
            start = self._room()
        if start:
            self._start()
        return True

    def _room(self) -> bool:
        """Promise a new thread to a waiting call if there is room (under the lock)."""
        shared = self._shared
        if not shared.waiting or shared.working >= shared.size or shared.closed:
            return False
        shared.waiting -= 1
        shared.working += 1
        self.started += 1
        return True

    def _start(self) -> None:
        thread = threading.Thread(
            target=_work, args=(self._shared,), name=f"{self.name}-{self.started}", daemon=True
        )
        try:
            thread.start()
        except BaseException:
            with self._shared.lock:
                self._shared.working -= 1
                self._shared.waiting += 1
            raise


class Job:
    """One call given to a `WorkerPool`."""

    __slots__ = ("abandoned", "context", "finished", "function", "thread_id")

    def __init__(self, function: Callable[[], object], context: contextvars.Context) -> None:
        self.function = function
        self.context = context
        self.thread_id: int | None = None
        """The native id of the thread running it, once it started."""
        self.abandoned = False
        self.finished = False


class _Shared:
    """What a pool's threads share with it (they hold no reference to the pool itself).

    Every call in the queue has a thread promised to it (an idle one, or one started
    for it) or is counted as `waiting` for the next thread that frees up.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self.lock = threading.Lock()
        self.jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self.working = 0
        """Threads that count against `size` (started, not abandoned, not ended)."""
        self.idle = 0
        """Threads waiting for a call, none promised to them yet."""
        self.waiting = 0
        """Calls in the queue with no thread promised to them yet."""
        self.closed = False

    def close(self) -> None:
        """Make every thread end once it has nothing left to do (the pool is gone)."""
        with self.lock:
            self.closed = True
            threads = self.working
        for _ in range(threads):
            self.jobs.put(None)

    def free(self, job: Job) -> bool:
        """A thread finished `job`: whether it stays in the pool (under the lock)."""
        job.finished = True
        if job.abandoned:
            if self.closed or self.working >= self.size:
                return False  # replaced meanwhile: the thread ends
            self.working += 1
        if self.waiting:
            self.waiting -= 1  # it takes a waiting call next
        else:
            self.idle += 1
        return True


def _work(shared: _Shared) -> None:
    """A pool thread: run calls until the pool is gone or the thread was given up."""
    while (job := shared.jobs.get()) is not None:
        job.thread_id = threading.get_native_id()
        with contextlib.suppress(BaseException):  # the function hands its outcome over
            job.context.run(job.function)
        with shared.lock:
            stays = shared.free(job)
        del job  # an idle thread holds no call's context (nor what it refers to)
        if not stays:
            return


def has_running_loop() -> bool:
    """Whether an event loop runs in this thread (else the code runs without one)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


async def pause(seconds: float) -> None:
    """Wait: on the event loop when one runs in this thread, else by blocking the thread."""
    if has_running_loop():
        await asyncio.sleep(seconds)
    else:
        time.sleep(seconds)


def run_without_loop(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends to its end, in this thread, with no event loop.

    Raises:
        RuntimeError: The coroutine suspended on something only an event loop can
            resume (it is closed first).
    """
    try:
        while True:
            if coroutine.send(None) is not None:  # a bare yield only passes control back
                break
    except StopIteration as done:
        result: T = done.value
        return result
    coroutine.close()
    name = getattr(coroutine, "__qualname__", "a coroutine")
    msg = f"{name} waited for an event loop while run without one"
    raise RuntimeError(msg)


async def by_mode(blocking: Callable[[], T], awaited: Callable[[], Awaitable[T]]) -> T:
    """One step in this code's form: `awaited()` with an event loop here, else `blocking()`.

    So a coroutine that takes its steps through `by_mode` never suspends under
    `run_blocking`, and awaits its steps under `await`.
    """
    if has_running_loop():
        return await awaited()
    return blocking()


def run_blocking(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run from sync code a coroutine that blocks when no event loop runs (`by_mode`).

    With no loop in this thread it runs here (`run_without_loop`). A thread that runs
    one (a notebook's) runs it in a helper thread without one, the caller's context
    variables (LangGraph's runtime, LangChain's callbacks) carried over.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return run_without_loop(coroutine)
    token = _BLOCKED_LOOP.set(loop)
    try:
        return _in_helper_thread(partial(run_without_loop, coroutine), "agentloop-blocking")
    finally:
        _BLOCKED_LOOP.reset(token)


_BLOCKED_LOOP: contextvars.ContextVar[asyncio.AbstractEventLoop | None] = contextvars.ContextVar(
    "agentloop_blocked_loop", default=None
)


def blocked_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop `run_blocking` holds up while this code runs in its helper thread.

    Work sent to that loop and waited for would never run (a deadlock): None elsewhere.
    """
    return _BLOCKED_LOOP.get()
