"""The `plan` node: one streamed model request per round, closed early on `response`."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    BaseMessageChunk,
    RemoveMessage,
    SystemMessage,
)
from langgraph.config import get_config
from langgraph.runtime import Runtime

from agentloop.base.messages import message_text
from agentloop.base.sync import has_running_loop, pause
from agentloop.durability import current_checkpointer
from agentloop.errors import ModelBehaviorError, model_error_message
from agentloop.governance.call_id import CallId, round_label
from agentloop.middleware.hooks import JUMP_KEY, HookRun, held_events, waiting_reply
from agentloop.middleware.stack import Compose
from agentloop.middleware.transcript import plan_message_id, planned_message
from agentloop.models.stream import BoundedRead
from agentloop.models.usage import sum_usage, usage_entry, wasted_usage
from agentloop.nodes._runnable import LoopNode, NodeCoroutine
from agentloop.nodes.answer_call import answer_prompt
from agentloop.nodes.execute import (
    SETTLED_PER_TURN,
    after_round,
    collect_round,
    joined,
    prepare_round,
    round_waits,
    state_after,
)
from agentloop.nodes.parts import LoopParts
from agentloop.nodes.plan_call import call_planner, listed_tools
from agentloop.nodes.plan_model import PLAN_TAGS, check_native_planners, planner_runnable
from agentloop.nodes.routes import route_start
from agentloop.nodes.updates import PlanUpdate
from agentloop.observability.events import HeldEvents, PlanDecided, PlanReasked, RoundStarted
from agentloop.planning.check import (
    plan_example,
    plan_problem,
    reask_message,
    reference_example,
)
from agentloop.planning.native import NativePlanReader
from agentloop.planning.normalize import unparseable_decision
from agentloop.planning.prompt import as_text_transcript, round_message, transcript_view
from agentloop.planning.reader import PlanRead
from agentloop.planning.references import GENERIC_REFERENCE_EXAMPLE
from agentloop.planning.system_prompt import system_message
from agentloop.planning.templates import quote_user_text, tagged_section
from agentloop.settings import LoopContext, RunScope
from agentloop.state import (
    LoopState,
    PlanDecision,
    empty_round_state,
    invocation_of,
    run_book,
    run_id_of,
    run_limit,
)

if TYPE_CHECKING:
    from agentloop.nodes.accelerate import Accelerator, PlanAcceleration

__all__ = [
    "AFTER_PLAN_NODE",
    "PLAN_TAGS",
    "make_plan",
    "make_plan_after_model",
    "reviews_after",
    "shown_reply",
]

AFTER_PLAN_NODE = "plan.after_model"
"""The node of the planner reply's `after_model` hooks, named as `create_agent` names its."""


def plan_chunk_size(chunk: BaseMessageChunk) -> int:
    """Characters a streamed plan chunk adds: its text and its tool-call argument text."""
    calls = getattr(chunk, "tool_call_chunks", None) or []
    return len(message_text(chunk)) + sum(len(call.get("args") or "") for call in calls)


@dataclass
class _Attempts:
    """The planner calls of one plan node run: the request, what came back, the usage."""

    scope: RunScope
    example: str
    ahead: PlanAcceleration
    """What runs ahead of the plan: its early calls, a speculative answer."""
    whole_reply: bool = False
    """Read a text reply whole: it will be the answer (`adopts_planner_reply`)."""
    started: float = field(default_factory=time.perf_counter)
    calls: int = 0
    reasks: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    model: str = ""
    judged: tuple[PlanDecision, str] | None = None
    """The last reply's decision and why it cannot be used ("" when it can)."""
    reask: list[BaseMessage] = field(default_factory=list)
    """What follows the transcript when the planner is asked again."""

    def count(self, read: PlanRead) -> None:
        self.calls += 1
        self.tokens_in += read.tokens_in
        self.tokens_out += read.tokens_out
        self.model = read.model


class _Plan:
    """The plan node of one loop: one coroutine, run by `invoke` and `ainvoke`."""

    def __init__(
        self, parts: LoopParts, accelerator: Accelerator, prepare: NodeCoroutine | None = None
    ) -> None:
        self.parts = parts
        self.accelerator = accelerator
        self.prepare = prepare
        # the tool list the examples were written for, the plan and the reference example
        self._examples: tuple[str, str, str] = ("", "", "")
        self._rules_kept: tuple[tuple[str, int, str, bool] | None, str] = (None, "")

    def _bounded(self) -> BoundedRead[BaseMessageChunk]:
        limits = self.parts.model_limits
        workers = self.parts.runner.invoker.threads.workers
        return BoundedRead("plan", limits, limits.max_plan_chars, plan_chunk_size, workers=workers)

    def _plan_examples(self) -> tuple[str, str]:
        """A plan, and a plan with a reference, written with the loop's real tools.

        Rebuilt only when the tools change.
        """
        tool_list = self.parts.tool_list
        if self._examples[0] != tool_list:
            descriptions = self.parts.registry.descriptions
            self._examples = (
                tool_list,
                plan_example(descriptions),
                reference_example(descriptions),
            )
        return self._examples[1], self._examples[2]

    def _rules(self, state: LoopState, scope: RunScope, tool_list: str) -> str:
        """The loop's rules for the planner (its system message after the app's), kept once."""
        settings = scope.settings
        native = settings.plan_mode == "native"
        extra = state.get("user_extra_requirement", "")
        key = (tool_list, run_limit(state, "max_rounds"), extra, native)
        if self._rules_kept[0] == key:
            return self._rules_kept[1]
        example, with_reference = self._plan_examples()
        quoted = quote_user_text(extra) if extra else ""
        rules = self.parts.prompts.render(
            "plan_native_system" if native else "plan_system",
            plan_example=example or '{"next_action": "response", "execution_commands": []}',
            reference_example=with_reference or GENERIC_REFERENCE_EXAMPLE,
            max_rounds=key[1],  # the run's, as the routers read it
            available_tools=tool_list,
            user_extra_requirement=quoted or "(none)",
            user_extra_requirement_section=tagged_section("user_extra_requirement", quoted),
        )
        self._rules_kept = (key, rules)
        return rules

    def _compose(self, state: LoopState, attempts: _Attempts) -> Compose:
        """What the planner is sent for the request's system message, transcript and tools.

        Native: the app's instructions and the loop's rules, then the transcript, as
        `create_agent`'s model gets it. JSON or tool plans: the rules with the tool list
        (only the tools a middleware left in the request), the transcript as text, then
        the round. A re-ask follows either.
        """
        scope = attempts.scope
        native = scope.settings.plan_mode == "native"
        round_state = state.get("round_state") or empty_round_state()
        facts = (
            None
            if native
            else round_message(
                self.parts.prompts,
                round_state["round_index"],
                run_limit(state, "max_rounds"),
                run_book(state).get("rollback_note", ""),
            )
        )

        def compose(
            system: SystemMessage | None, messages: list[BaseMessage], tools: list[Any]
        ) -> list[BaseMessage]:
            listed = "" if native else listed_tools(self.parts, tools)
            head = system_message(system, self._rules(state, scope, listed))
            if facts is None:
                return [head, *messages, *attempts.reask]
            return [head, *as_text_transcript(messages, self.parts.views), facts, *attempts.reask]

        return compose

    def _request(
        self,
        state: LoopState,
        runtime: Runtime[LoopContext],
        *,
        asynchronous: bool,
        held: HeldEvents | None = None,
    ) -> _Attempts:
        scope = self.parts.scope(runtime)
        round_state = state.get("round_state") or empty_round_state()
        example = self._plan_examples()[0]
        started = RoundStarted(
            round_index=round_state["round_index"],
            replan=bool(run_book(state).get("rollback_note")),
        )
        if held is None:
            scope.emit(started)
        else:
            held.append(started)  # said with the last round's end, after the hooks

        def answer() -> tuple[BaseChatModel, list[BaseMessage]]:
            prompt = answer_prompt(self.parts, state, scope)
            return prompt.answerer, prompt.messages

        accelerator = self.accelerator
        ahead = accelerator.plan_started(
            state, scope, get_config(), answer, asynchronous=asynchronous
        )
        attempts = _Attempts(scope, example, ahead)
        attempts.whole_reply = accelerator.reads_whole_reply(state, scope, ahead)
        return attempts

    def _calls_left(self, state: LoopState, attempts: _Attempts) -> int:
        limit = attempts.scope.settings.plan_call_limit
        return limit - (run_book(state).get("plan_calls") or 0) - attempts.calls

    def _judge(self, read: PlanRead) -> tuple[PlanDecision, str]:
        """The decision a reply gives, and why it cannot be used ("" when it can)."""
        if read.cut and not read.short:
            reader = read.reader
            cut_text = reader.cut_decision() if isinstance(reader, NativePlanReader) else None
            if cut_text is not None:
                return cut_text, ""  # a text reply: answered by the answer model
            reason = f"the reply was cut: {read.cut}"
            return unparseable_decision(reason, read.reply_text), reason
        decision = read.reader.decision(short_circuited=read.short)
        if read.written is not None and not decision["execution_commands"]:
            native = isinstance(read.reader, NativePlanReader)
            if decision.get("parse_error") or (native and decision["next_action"] == "response"):
                # a middleware's own reply, no plan: the run ends with it, as under
                # create_agent a reply without tool calls ends the run
                final: PlanDecision = {"next_action": "response", "execution_commands": []}
                final["final"] = read.written
                return final, ""
        if read.refusal and not decision["execution_commands"]:
            # the run ends with it, as create_agent's does: not re-asked, no answer model
            refused: PlanDecision = {"next_action": "response", "execution_commands": []}
            refused["refusal"] = read.refusal
            if read.provider:
                refused["model_provider"] = read.provider
            return refused, ""
        registry, offered = self.parts.registry, read.offered

        def is_tool(name: str) -> bool:
            return registry.get(name) is not None and (offered is None or name in offered)

        return decision, plan_problem(decision, is_tool)

    def _reask(self, attempts: _Attempts, read: PlanRead, problem: str) -> None:
        """Ask the planner again, telling it what was wrong with its reply."""
        attempts.reasks += 1
        attempts.ahead.stop_calls()
        attempts.scope.emit(PlanReasked(attempt=attempts.reasks, reason=problem))
        native = attempts.scope.settings.plan_mode == "native"
        message = reask_message(
            self.parts.prompts, problem, read.reply_text, attempts.example, native=native
        )
        attempts.reask = [message]

    def _may_reask(self, state: LoopState, attempts: _Attempts, problem: str) -> bool:
        return (
            bool(problem)
            and attempts.reasks < attempts.scope.settings.plan_reasks
            and self._calls_left(state, attempts) > 0
        )

    def _finish(
        self,
        state: LoopState,
        attempts: _Attempts,
        read: PlanRead | None,
        error: BaseException | None = None,
    ) -> PlanUpdate:
        scope = attempts.scope
        failure = ""
        if read is None:
            if error is not None:
                failure = f"planner model failed: {model_error_message(error)}"
            else:
                limit = scope.settings.plan_call_limit
                failure = f"the run reached its limit of {limit} planner calls"
            decision = unparseable_decision(failure)
            chunks, short = 0, False
        else:
            decision, problem = attempts.judged or self._judge(read)
            if problem:
                failure = f"the plan could not be used: {problem}"
                decision = {**unparseable_decision(problem, read.reply_text)}
            chunks, short = read.reader.chunks, read.short
        attempts.ahead.decided(decision, bool(failure))
        scope.emit(
            PlanDecided(
                next_action=decision["next_action"],
                command_count=len(decision["execution_commands"]),
                short_circuited=short,
                chunks=chunks,
                duration_ms=round((time.perf_counter() - attempts.started) * 1000, 3),
                parse_error=decision.get("parse_error", ""),
                reasks=attempts.reasks,
            )
        )
        update: PlanUpdate = {
            "decision": decision,
            "run_book": {
                "rollback_note": "",
                "plan_calls": (run_book(state).get("plan_calls") or 0) + attempts.calls,
            },
        }
        if failure:
            update.update({"status": "planner_failed", "status_reason": failure})
        elif state.get("status", "running") != "running":  # a hook sent the answer back
            update.update({"status": "running", "status_reason": ""})
        if attempts.ahead.discarded:
            update["tool_logs"] = attempts.ahead.discarded
        entries = [
            wasted_usage(model, tokens_in, tokens_out, self.parts.prices)
            for model, tokens_in, tokens_out in attempts.ahead.wasted
        ]
        if attempts.calls:
            entry = usage_entry(
                attempts.model, attempts.tokens_in, attempts.tokens_out, self.parts.prices
            )
            entry["model_calls"] = attempts.calls
            entries.append(entry)
        if entries:
            update["usage"] = sum_usage({scope.settings.name: entry} for entry in entries)
        safe = self.parts.safe(update)
        self._keep_planned_arguments(
            state, decision, safe["decision"], scope.settings.max_commands_per_round
        )
        return safe

    def _keep_planned_arguments(
        self, state: LoopState, written: PlanDecision, kept: PlanDecision, cap: int
    ) -> None:
        """Keep the planner's own arguments the redact hook changed, for the tools.

        Only of the commands that may run: those over the round's `cap` are refused.
        """
        commands = written["execution_commands"][:cap]
        if self.parts.redact is None or not commands or written is kept:
            return
        round_state = state.get("round_state") or empty_round_state()
        book = run_book(state)
        label = round_label(round_state["round_index"], book.get("consecutive_rollbacks", 0))
        run_id = run_id_of(state)
        changed = self.parts.planned_arguments.keep(
            invocation_of(state),
            lambda position: str(CallId(run_id, label, position)),
            commands,
            kept["execution_commands"][:cap],
            self.parts.unredacted,
        )
        if changed:
            kept["redacted"] = changed

    async def _attempt(
        self,
        attempts: _Attempts,
        model: BaseChatModel,
        request: list[BaseMessage],
        options: dict[str, Any],
        schemas: list[dict[str, Any]] | None,
    ) -> PlanRead:
        """One streamed planner call, read as it streams and closed early on `response`."""
        settings = attempts.scope.settings
        read = PlanRead.start(model, settings.plan_mode, whole=attempts.whole_reply)
        bounded = self._bounded()
        attempts.ahead.new_reply()
        tools = self.parts.tools.tool_schemas if schemas is None else schemas
        runnable = planner_runnable(model, settings, options, tools)

        def on_chunk(chunk: BaseMessageChunk) -> bool:
            if read.feed(chunk):
                return True  # the decision is complete: stop reading
            attempts.ahead.follow(read.reader.parser)
            return False

        await bounded.consume(runnable, request, on_chunk)
        read.cut = bounded.cut
        await _turn_if_wide(read.reader.parser.commands_completed)  # before it is read whole
        return read

    async def run(self, state: LoopState, runtime: Runtime[LoopContext]) -> PlanUpdate:
        """End the round whose calls ran, then plan the next one.

        While calls of the round are still to run, nothing: `route_plan` sends their
        batch. Once every call ran, the round ends first (`collect_round`), so the
        planner, the hooks and the speculative answer see it ended; the planner is then
        asked unless the run answers (`max_rounds`) or ends (`return_direct`) instead.
        In a run without a checkpointer and a loop without `after_model` hooks (nothing
        can stop the run between a plan and its calls), a plan to execute has its round
        prepared here too (`prepare_round`), and `route_plan` sends its first batch: a
        round takes two steps, as in `create_agent`. Such a run also starts here (no
        `before_agent` hook): its first `plan` makes `prepare`'s update first.
        """
        started: Mapping[str, Any] | None = None
        if self.prepare is not None and starts_run(runtime):  # no `prepare` step ran
            started = await self.prepare(state, runtime)
            state = state_after(state, started)
            if route_start(state) == "answer":
                return cast(PlanUpdate, started)
        elif round_waits(state):
            return PlanUpdate()
        scope = self.parts.scope(runtime)
        # a `before_model` hook may interrupt before the planner call, and the node runs
        # again on resume: the last round's end and the next round's start are said once
        # the hooks let the call go ahead
        held = held_events(self.parts.hooks, scope.emit)
        ended = collect_round(self.parts, state, scope, None if held is None else held.append)
        if ended is not None:  # what the round's calls kept for their references goes
            self.parts.release_kept(invocation_of(state))
            state = state_after(state, ended)
            if after_round(state) != "plan":
                if held:
                    held.release()
                return cast(PlanUpdate, ended)
        planned = await self._plan_round(state, runtime, held)
        if _starts_round(planned, scope):  # no review between the plan and its calls
            try:
                prepared = await prepare_round(
                    self.parts, self.accelerator, state_after(state, planned), scope
                )
            except BaseException:  # the calls started early will not be adopted
                self.accelerator.abandon_run(invocation_of(state))
                raise
            planned = cast(PlanUpdate, joined(planned, prepared))
        if ended is not None:
            planned = cast(PlanUpdate, joined(ended, planned))
        return planned if started is None else cast(PlanUpdate, joined(started, planned))

    async def _plan_round(
        self,
        state: LoopState,
        runtime: Runtime[LoopContext],
        held: HeldEvents | None = None,
    ) -> PlanUpdate:
        """Ask the planner, again with what was wrong while it may be asked again.

        With `after_model` hooks, the last reply's hooks do not run here: the reply is
        written to `messages` (`_shown`) and the hooks run in the next node,
        `plan.after_model` (`after_plan`), so an interrupt in one (a person's review)
        resumes there and the planner is not asked again. A reply that is asked again
        has its hooks run here: it plans no round.
        """
        asynchronous = has_running_loop()
        attempts = self._request(state, runtime, asynchronous=asynchronous, held=held)
        try:
            return await self._planned(state, runtime, attempts, held)
        except BaseException:  # cancelled, interrupted or failed: nothing started is used
            attempts.ahead.abandon()
            raise

    async def _planned(
        self,
        state: LoopState,
        runtime: Runtime[LoopContext],
        attempts: _Attempts,
        held: HeldEvents | None,
    ) -> PlanUpdate:
        attempt = partial(self._attempt, attempts)
        hooks = HookRun(self.parts.hooks, "plan", state, runtime, held)
        deferred = reviews_after(self.parts)
        read: PlanRead | None = None
        shown: AIMessage | None = None
        pending = False
        while self._calls_left(state, attempts) > 0:
            if (await hooks.before()) is not None:
                break  # the planner is not called
            # the request is the transcript as the hooks left it
            settings = attempts.scope.settings
            view = transcript_view(
                hooks.state.get("messages") or (),
                keep_tool_results=settings.keep_tool_results,
                history_turns=settings.history_turns,
                history_chars=settings.history_chars,
                views=self.parts.views,
            )
            compose = self._compose(hooks.state, attempts)
            try:
                read = await call_planner(self.parts, hooks.state, runtime, view, compose, attempt)
            except ModelBehaviorError as error:
                return hooks.merged(self._finish(state, attempts, None, error))
            attempts.count(read)
            width = read.reader.parser.commands_completed
            await _turn_if_wide(width)  # before it is judged
            attempts.judged = self._judge(read)
            await _turn_if_wide(width)  # before it is kept
            shown = self._shown(state, attempts.judged)
            problem = attempts.judged[1]
            may_reask = self._may_reask(state, attempts, problem)
            if deferred and not may_reask:
                pending = True  # its hooks run in `plan.after_model`
                break
            if (await hooks.after({"messages": [shown]} if shown else None)) is not None:
                break
            if not may_reask:
                break
            self._reask(attempts, read, problem)
        if held:
            held.release()  # no planner call was left to make
        if hooks.jump is not None and hooks.jump != "tools":  # this plan will not run
            attempts.ahead.stop_calls()
        if read is None and hooks.jump is not None:
            return hooks.merged(PlanUpdate())
        update = self._finish(state, attempts, read)
        if pending and shown is not None:
            update["messages"] = [shown]  # what the hooks of `plan.after_model` read
            return hooks.merged(update, deferred=True)
        planned = shown is not None and bool(shown.tool_calls) and "status" not in update
        if planned and shown is not None and hooks.jump != "model":
            update["messages"] = [shown]  # the plan the hooks saw, in the transcript
        return hooks.merged(update)

    def _shown(self, state: LoopState, judged: tuple[PlanDecision, str]) -> AIMessage | None:
        """The planner's reply as `after_model` hooks read it (None: no hook reads it).

        As `create_agent`'s model node writes the reply before its `after_model` nodes, a
        plan to execute is the round's `AIMessage` with its tool calls
        (`agentloop.middleware.transcript.planned_message`); a reply that is no such plan (the
        answer comes next, or the plan is asked again) is an `AIMessage` without tool
        calls, so a hook never takes an earlier round's calls for this reply's.
        """
        if self.parts.hooks is None or not self.parts.hooks.after_any_model:
            return None
        decision, problem = judged
        round_state = state.get("round_state") or empty_round_state()
        book = run_book(state)
        run_id = run_id_of(state)
        label = round_label(round_state["round_index"], book.get("consecutive_rollbacks", 0))
        if problem or decision["next_action"] != "execute":
            return AIMessage("", id=f"{plan_message_id(run_id, label)}:reply")
        commands = self.parts.safe_value(decision["execution_commands"])
        return planned_message(commands, run_id, label)


async def _turn_if_wide(commands: int) -> None:
    """Give the event loop a turn between the steps of a plan of thousands of commands.

    Each step of such a plan (reading it, judging it, keeping it) walks every command:
    the other runs sharing the loop go on between them (`SETTLED_PER_TURN`).
    """
    if commands > SETTLED_PER_TURN:
        await pause(0)


def _starts_round(update: PlanUpdate, scope: RunScope) -> bool:
    """Whether the plan node prepares the round of the plan it just wrote.

    It does when nothing can stop the run between the plan and its calls: the run has no
    checkpointer (so no interrupt, no `update_state` of the plan, no resume) and the
    loop no `after_model` hook. With one, the round is prepared in `execute`, from the
    plan as a person or a hook left it, wherever the run was stopped (an interrupt given
    to `create_tool_loop` or to one run, as LangGraph Studio sets them). Also the plan
    must say `execute`, no hook jumped away from it and the planner did not fail.
    """
    decision = update.get("decision")
    return (
        decision is not None
        and decision["next_action"] == "execute"
        and bool(decision["execution_commands"])
        and not scope.settings.reviews_plan
        and update.get("status", "running") == "running"
        and update.get(JUMP_KEY) is None
        and current_checkpointer() is None
    )


FIRST_NODE_STEP = 1
"""The step of a run's first node when the run starts from an empty checkpoint."""


def starts_run(runtime: Runtime[LoopContext]) -> bool:
    """Whether this `plan` task is the run's first step (`route_entry` sent the run here).

    Only a run without a checkpointer starts in `plan`. Such a run starts from an empty
    checkpoint, so its first node runs at step 1 (step 0 is LangGraph's `__start__`).
    """
    if current_checkpointer() is not None:
        return False
    return get_config()["metadata"].get("langgraph_step") == FIRST_NODE_STEP


def make_plan(
    parts: LoopParts, accelerator: Accelerator, prepare: NodeCoroutine | None = None
) -> LoopNode:
    """Build the `plan` node of a loop (`accelerator`: what it starts ahead).

    With `prepare` (the `prepare` node's coroutine), a run without a checkpointer starts in
    `plan`, which makes `prepare`'s update first: one step less (`route_entry`).

    Raises:
        ConfigurationError: `plan_mode="native"` with a planner model (or a fallback)
            that has no tool calling.
    """
    if parts.settings.plan_mode == "native":
        check_native_planners(
            [parts.models.model, *parts.models.fallbacks], parts.tools.tool_schemas
        )
    node = _Plan(parts, accelerator, prepare)
    return LoopNode("plan", coroutine=node.run)


def reviews_after(parts: LoopParts) -> bool:
    """Whether model replies go to `plan.after_model` / `answer.after_model`.

    They do when some middleware has an `after_model` hook.
    """
    return parts.hooks is not None and parts.hooks.after_any_model


def shown_reply(state: Mapping[str, Any]) -> AIMessage | None:
    """The planner reply the `plan` node left for `plan.after_model` (None: there is none).

    It is the transcript's last message, with the id `_shown` gives this round's reply.
    """
    messages = state.get("messages") or []
    last = messages[-1] if messages else None
    if not isinstance(last, AIMessage) or last.id is None:
        return None
    round_state = state.get("round_state") or empty_round_state()
    book = run_book(state)
    label = round_label(round_state["round_index"], book.get("consecutive_rollbacks", 0))
    plan_id = plan_message_id(run_id_of(state), label)
    return last if last.id in (plan_id, f"{plan_id}:reply") else None


def make_plan_after_model(parts: LoopParts) -> LoopNode:
    """Build the `plan.after_model` node: the `after_model` hooks of the planner's reply.

    As `create_agent` runs its `after_model` hooks as nodes after its model node, this
    node runs them (in reverse list order, `HookRun.after`) on the reply the `plan` node
    wrote to `messages`. It is in the graph only when some middleware has such a hook.
    A reply that plans no round, or that a hook sends back to the planner
    (`jump_to="model"`), leaves the transcript (unless a hook wrote it anew).
    """

    async def after_plan(state: LoopState, runtime: Runtime[LoopContext]) -> PlanUpdate:
        reply = shown_reply(state) if waiting_reply(state) == "plan" else None
        hooks = HookRun(parts.hooks, "plan", state, runtime)
        if reply is None:
            return hooks.merged(PlanUpdate())
        await hooks.after()
        update = PlanUpdate()
        if not reply.tool_calls or hooks.jump == "model":
            assert reply.id is not None
            update["messages"] = [cast(AnyMessage, RemoveMessage(id=reply.id))]
        return hooks.merged(update)

    return LoopNode(AFTER_PLAN_NODE, coroutine=after_plan)
