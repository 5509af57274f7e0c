"""Streaming dispatch: start a plan's read-only calls while the plan is still streaming.

A command starts before the plan ends when it is complete (its JSON object closed, or, in
`plan_mode="native"`, the next tool call started), the plan's
`next_action` is `execute`, its tool is concurrency-safe and idempotent, its arguments
are valid and name no other command's result, and every command before it is
concurrency-safe (a call with side effects keeps its place in the order). It is the
call `execute` would prepare (same call id, same identity); the `call_tool` task adopts
its record (`InFlight`), through the same ledger guard and events as any call. A call
that will not be adopted (the plan was asked again, or said `response`) is settled
(`discard`): a call that already finished keeps its record, one still running is
cancelled and recorded as `cancelled`; the plan node reports both in `tool_logs`. Only
read-only, idempotent calls ever start early, so running one for nothing changes
nothing. Early starts count toward `max_commands_per_round`, across every planner call
of the round (re-asks included).

Off with `PlanningOptions(streaming_dispatch=False)`, and when the loop interrupts
before `execute` (a person reviews the plan first).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from collections.abc import Callable
from typing import Any, Protocol, cast

from langchain_core.runnables import RunnableConfig

from agentloop._effects import adrive, drive
from agentloop.events import ToolDispatched
from agentloop.inflight import EarlyCall
from agentloop.nodes.guarded import guarded_call
from agentloop.nodes.parts import LoopParts
from agentloop.nodes.preparation import PlanPreparation
from agentloop.planning.normalize import normalize_plan_decision
from agentloop.settings import RunScope
from agentloop.state import LoopState, PreparedCall, ToolCommand, ToolExecutionRecord
from agentloop.tools.cache_scope import run_identity
from agentloop.tools.call_config import CallInfo, with_call_info
from agentloop.tools.call_id import CallId
from agentloop.tools.outcome import ToolOutcome
from agentloop.tools.pipeline import emit_settled, make_record

__all__ = ["REJECTED_NOTE", "CommandStream", "EarlyDispatch", "tool_config"]

REJECTED_NOTE = (
    "ran while its plan was streaming; that plan was rejected, so its result was not used"
)


class CommandStream(Protocol):
    """A plan as it streams, read as commands.

    `PlanStreamParser` reads a JSON plan, `NativeCallParser` the planner's own tool calls.
    """

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


def tool_config(
    parts: LoopParts, call: PreparedCall, config: RunnableConfig, context: Any
) -> RunnableConfig:
    """The config a tool is called with: the node's, naming the call and whom it serves."""
    info: CallInfo = {
        "run_id": call["run_id"],
        "call_id": call["call_id"],
        "place": CallId(call["run_id"], call["round_label"], call["index"]).in_run,
        "call_key": call["call_key"],
        "loop": parts.settings.name,
        "identity": run_identity(config, context, known=parts.identities),
        "owner": run_identity(config, context, thread=False, known=parts.identities),
        "sampler": parts.sampling.key,
    }
    if call.get("position_key"):
        info["position_key"] = call["position_key"]
    return with_call_info(config, info)


def _future_on_thread(work: Callable[[], Any]) -> concurrent.futures.Future[Any]:
    """Run `work` on a daemon thread; its result or error goes to the returned future."""
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    context = contextvars.copy_context()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(work())
        except BaseException as error:  # handed to the adopter
            future.set_exception(error)

    threading.Thread(target=context.run, args=(run,), name="agentloop-early", daemon=True).start()
    return future


class EarlyDispatch:
    """Starts the commands of one streaming plan that may run before it ends."""

    def __init__(
        self,
        parts: LoopParts,
        state: LoopState,
        scope: RunScope,
        config: RunnableConfig,
        *,
        asynchronous: bool,
    ) -> None:
        self.parts, self.scope, self.config = parts, scope, config
        self.state = state
        self.asynchronous = asynchronous
        # an early call takes the same guarded route as in call_tool: with a checkpointer,
        # the ledger is read before it runs (replays, forks) and its outcome recorded
        self.enabled = scope.settings.streaming_dispatch
        self.run_id = state.get("run_id", "run")
        self.preparation = PlanPreparation(parts, state, scope.settings)
        """Prepares each command as execute will (same function, same order)."""
        self.looked_at = 0
        self.started = 0
        self.started_in_round = 0
        """Calls started for every reply of this round (the per-round cap counts them)."""
        self.stopped = False
        self.calls: dict[str, PreparedCall] = {}
        self.discarded: list[ToolExecutionRecord] = []
        """Records of calls started for replies that were not executed."""

    def reset(self) -> None:
        """Forget the commands looked at, for a new reply to the same request."""
        self.preparation = PlanPreparation(self.parts, self.state, self.scope.settings)
        self.looked_at = self.started = 0
        self.stopped = False

    def feed(self, parser: CommandStream) -> None:
        """Start what the commands completed since the last look allow."""
        if not self.enabled or self.stopped or parser.next_action != "execute":
            return
        if parser.finished:
            return  # the plan is whole: execute starts its calls as early
        if parser.commands_completed <= self.looked_at:
            return
        for position, raw in parser.completed_commands(self.looked_at):
            if position != self.looked_at or not self._consider(position, raw):
                self.stopped = True  # an order to keep, or positions no longer certain
                return
            self.looked_at = position + 1

    def _consider(self, position: int, raw: dict[str, Any]) -> bool:
        """Start one command when it may; False when no later command may start early."""
        settings = self.scope.settings
        limit = settings.concurrency
        cap = settings.max_commands_per_round
        if position >= cap or self.started_in_round >= cap or (limit and self.started >= limit):
            return False
        commands = normalize_plan_decision(
            {"next_action": "execute", "execution_commands": [raw]}
        ).get("execution_commands")
        if not commands:
            return False
        command = commands[0]
        if self.parts.registry.get(command["tool_name"]) is not None:
            policy = self.parts.registry.policy(command["tool_name"])
            if not (policy.read_only and policy.concurrency_safe and policy.idempotent):
                return False  # a call with side effects keeps its place in the order
        call, settled = self.preparation.prepare(position, command)
        if settled is not None:
            return True  # settled without running (unknown tool, bad arguments, duplicate)
        if call.get("depends_on"):
            # it waits for its inputs and execute sends it; what comes after a possible
            # write must wait for it, so nothing later starts early
            return not self.parts.registry.policy(call["tool_name"]).writes_state
        if call.get("after_write") or call.get("follows"):
            return False  # it must wait for an earlier call (execute names and orders it)
        self._start(command, call)
        return True

    def _start(self, command: ToolCommand, call: PreparedCall) -> None:
        config = tool_config(self.parts, call, self.config, self.scope.context)
        emit = self.scope.emit
        parts, scope = self.parts, self.scope
        handle: asyncio.Task[Any] | concurrent.futures.Future[Any]
        if self.asynchronous:
            running = adrive(guarded_call(parts, call, scope, config))
            handle = asyncio.get_running_loop().create_task(running)
        else:
            handle = _future_on_thread(lambda: drive(guarded_call(parts, call, scope, config)))
        self.parts.inflight.add_call(EarlyCall(command, call, handle))
        self.started += 1
        self.started_in_round += 1
        self.calls[call["call_id"]] = call
        emit(
            ToolDispatched(
                call_id=call["call_id"], tool_name=call["tool_name"], index=call["index"]
            )
        )

    def cancel(self) -> None:
        """Settle the calls started for a reply that will not be executed.

        A call that finished keeps its record (its result is not used); one still
        running is cancelled and recorded as `cancelled`. The records collect in
        `discarded`, for the run's `tool_logs`.
        """
        if not self.started:
            return
        self.started = 0
        for call_id, early in self.parts.inflight.withdraw_calls(self.run_id).items():
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
