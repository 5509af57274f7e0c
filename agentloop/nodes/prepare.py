"""The `prepare` node: decide what this run answers, name the run, reset per-run state.

A run without a checkpointer (and without `before_agent` hooks) starts in `plan`
instead, which makes this node's update first (`agentloop.nodes.routes.route_entry`).
"""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config
from langgraph.runtime import Runtime
from langgraph.types import Overwrite

from agentloop.base.messages import resolve_request, with_request
from agentloop.durability import (
    current_checkpointer,
    current_durability,
    durability_gap,
    hold_key,
    idempotency_scope,
    ledger_thread,
    loop_namespace,
    run_attempt,
    run_identity,
    run_ledger,
    settle_idempotency_key,
    settle_run_identity,
    started_before,
    sweep_page,
)
from agentloop.durability.retry import RETRY_WITHOUT_RECORD
from agentloop.governance.cache_scope import run_identities
from agentloop.governance.call_config import call_info
from agentloop.nodes.parts import LoopParts
from agentloop.nodes.updates import PrepareUpdate
from agentloop.observability.events import DurabilityWarning, McpServerUnavailable
from agentloop.settings import LoopContext, RunScope
from agentloop.state import LoopState, RunBook, empty_round_state, run_book, valid_idempotency_key

__all__ = ["make_prepare", "new_invocation", "run_anchor", "run_idempotency_key", "runs_before"]

logger = logging.getLogger("agentloop")

EXIT_DURABILITY_WARNING = (
    "durability='exit' saves no checkpoint until the run ends: a crash loses the run, "
    "and its calls with side effects cannot be resumed"
)


def run_anchor(
    state: LoopState, request: str, human: HumanMessage | None, scope: RunScope, owner: str
) -> str:
    """What names this run, in order of preference.

    The key of the parent loop's call it serves (a sub-agent: its `position_key`, which a
    deploy of new code does not change, else its `call_key`; the parent's run already
    names who asked), else who asked (`owner`) with the id of the human message it
    answers, else with the thread's run before it (its id, so a thread whose checkpoints
    lost a turn still names each new run anew; its turn number where no run is recorded)
    and a digest of the request (and the parent task's namespace when the loop is a
    subgraph). Two users sending the same request on one thread at once make two runs.
    """
    parent_call = call_info(get_config())
    if parent_call is not None:
        return f"call:{parent_call.get('position_key') or parent_call['call_key']}"
    if human is not None and human.id:
        return f"message:{owner}:{human.id}"
    task_ns = scope.execution.checkpoint_ns if scope.execution else ""
    parent_ns = task_ns.rsplit("|", 1)[0] if "|" in task_ns else ""
    digest = hashlib.sha256(request.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    before = run_book(state).get("run_id") or runs_before(state, human)
    return f"turn:{owner}:{parent_ns}:{before}:{digest}"


def new_invocation(scope: RunScope) -> str:
    """Name this invocation of the loop (`RunBook.invocation`): never shared by two runs.

    The LangGraph server's run id where the server runs it (its retries of the run keep
    it), else a random one. Either is kept in the checkpoint, so a resume, replay or
    fork of the run finds the same.
    """
    server_run = ((scope.config or {}).get("configurable") or {}).get("run_id")
    return str(server_run) if server_run else uuid.uuid4().hex


def runs_before(state: LoopState, human: HumanMessage | None = None) -> int:
    """How many runs the thread started before this one (which answers `human`, if given).

    `run_book` counts them. A thread checkpointed by a version that kept no `run_book`
    has lost that count: its earlier requests in `messages` count instead, so a request
    repeated there still names a new run (never the earlier run, whose calls the ledger
    would replay).
    """
    count = run_book(state).get("run_count")
    if count is not None:
        return count
    messages = state.get("messages") or ()
    return sum(isinstance(message, HumanMessage) and message is not human for message in messages)


def run_idempotency_key(state: LoopState) -> str | None:
    """The run's idempotency key: its input's, else its config's (checked), else None.

    A sub-agent has none of its own: the parent's call it serves already names it (and
    the parent's key, when the parent has one).

    Raises:
        InputError: The config's key is not a non-empty string of bounded length.
    """
    config = get_config()
    if call_info(config) is not None:
        return None
    key = state.get("idempotency_key")
    if key:
        return key  # the state's reducer checked it
    configurable = config.get("configurable") or {}
    return valid_idempotency_key(
        configurable.get("idempotency_key"), 'configurable["idempotency_key"]'
    )


def _ledger_warning(parts: LoopParts, runtime: Runtime[LoopContext]) -> tuple[str, str] | None:
    """The ledger class and why the run's exactly-once would not survive a restart, if so."""
    saver = current_checkpointer()
    if saver is None or not parts.registry.has_side_effects:
        return None
    ledger = run_ledger(parts.ledger, runtime.store)
    gap = None if ledger is None else durability_gap(saver, ledger)
    return None if gap is None or ledger is None else (type(ledger).__name__, gap)


@dataclass(frozen=True)
class _Named:
    """The run's identity, and what the ledger says of its server run."""

    run_id: str
    server_run: str = ""
    """The server's run the ledger records the identity under ("" when it records none)."""
    warning: str | None = None


async def _retry_safe_identity(
    parts: LoopParts, runtime: Runtime[LoopContext], scope: RunScope, namespace: str, run_id: str
) -> _Named:
    """The run's identity as the server's first attempt of it recorded (see `settle_run_identity`).

    Only for a top-level run the LangGraph server names; a sub-agent is named by the
    parent's call it serves. A retry whose ledger lacks the record is warned about only
    when the thread holds a checkpoint an earlier attempt wrote (`started_before`).
    """
    config = get_config()
    attempt, thread_id = run_attempt(config), scope.thread_id
    if attempt is None or thread_id is None or call_info(config) is not None:
        return _Named(run_id)
    if not parts.registry.has_side_effects:
        return _Named(run_id)  # a repeated read-only call is harmless
    ledger = run_ledger(parts.ledger, runtime.store)
    if ledger is None:
        return _Named(run_id)
    named, recorded = await settle_run_identity(ledger, thread_id, namespace, attempt, run_id)
    saver, execution = current_checkpointer(), scope.execution
    if recorded or attempt.attempt <= 1 or saver is None or execution is None:
        return _Named(named, attempt.run_id)
    task_ns = execution.checkpoint_ns
    checkpoint: RunnableConfig = {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": task_ns.rsplit("|", 1)[0] if "|" in task_ns else "",
            "checkpoint_id": execution.checkpoint_id,
        }
    }
    if not await started_before(saver, checkpoint, attempt):
        return _Named(named, attempt.run_id)  # the earlier attempt never reached the graph
    warning = RETRY_WITHOUT_RECORD.format(
        run=attempt.run_id, attempt=attempt.attempt, ledger=type(ledger).__name__
    )
    return _Named(named, attempt.run_id, warning)


async def _keep_ledger(
    parts: LoopParts,
    runtime: Runtime[LoopContext],
    scope: RunScope,
    namespace: str,
    keys: tuple[str, ...],
) -> None:
    """Note the thread as a holder of the run's idempotency key, and sweep the ledger if due.

    `keys` are where the key's entries live: its request's and its calls'
    (`agentloop.durability.idempotency`), or none.

    See `agentloop.durability.retention`: a key's entries are kept while a thread that
    holds it lives; a loop sweeps the ledger that goes with its checkpointer at most once
    every `LedgerRetention.every_s`. A sweep that fails is logged: the run goes on.
    """
    saver, thread_id = current_checkpointer(), scope.thread_id
    ledger = run_ledger(parts.ledger, runtime.store)
    if saver is None or thread_id is None or ledger is None:
        return
    for key in keys:
        await hold_key(ledger, ledger_thread(key), namespace, thread_id)
    retention = parts.retention
    if retention is None or parts.ledger is not None:
        return
    after = parts.sweeps.due(ledger, retention.every_s)
    if after is None:
        return
    try:
        page = await sweep_page(ledger, saver, retention, now=time.time(), after=after)
    except Exception as error:  # a failed sweep costs rows, never the run
        logger.warning("%s: sweeping the ledger failed: %s", parts.settings.name, error)
        return
    parts.sweeps.went_to(ledger, page.after)
    if page.forgotten:
        logger.info("%s: the ledger forgot %d threads", parts.settings.name, len(page.forgotten))


def make_prepare(parts: LoopParts) -> Any:
    """Build the `prepare` node of a loop (a coroutine: it may read the ledger)."""
    warned_exit = False
    warned_ledger = False

    async def prepare(state: LoopState, runtime: Runtime[LoopContext]) -> PrepareUpdate:
        nonlocal warned_exit, warned_ledger
        scope = parts.scope(runtime)
        request, given = resolve_request(state)
        # the request is the run's message (a `user_input` becomes one), as models see it
        human, update_messages = with_request(state, request, given)
        namespace = loop_namespace(scope.execution.checkpoint_ns if scope.execution else "")
        owner = run_identities(scope.config, scope.context, known=parts.identities)[1]
        anchor = run_anchor(state, request, human, scope, owner)
        run_id = run_identity(scope.thread_id, namespace, anchor)
        named = await _retry_safe_identity(parts, runtime, scope, namespace, run_id)
        run_id, retry_warning = named.run_id, named.warning
        key = run_idempotency_key(state)
        scope_of_key, key_scopes = "", tuple[str, ...]()
        if key is not None:  # refused here, before any call, when it names another request
            ledger = run_ledger(parts.ledger, runtime.store) if scope.thread_id else None
            scope_of_key = await settle_idempotency_key(ledger, namespace, owner, key, request)
            key_scopes = (idempotency_scope(namespace, owner, key), scope_of_key)
        exit_only = current_durability() == "exit" and current_checkpointer() is not None
        if exit_only and parts.registry.has_side_effects:
            if not warned_exit:
                warned_exit = True
                logger.warning("%s: %s", parts.settings.name, EXIT_DURABILITY_WARNING)
            scope.emit(DurabilityWarning(durability="exit", message=EXIT_DURABILITY_WARNING))
        ledger_warning = _ledger_warning(parts, runtime)
        if ledger_warning is not None:
            ledger_name, message = ledger_warning
            if not warned_ledger:
                warned_ledger = True
                logger.warning("%s: %s", parts.settings.name, message)
            scope.emit(DurabilityWarning(ledger=ledger_name, message=message))
        if retry_warning is not None:
            logger.warning("%s: %s", parts.settings.name, retry_warning)
            scope.emit(DurabilityWarning(message=retry_warning))
        for server, reason in parts.tools.unavailable.items():
            scope.emit(McpServerUnavailable(server=server, reason=reason))
        await _keep_ledger(parts, runtime, scope, namespace, key_scopes)
        book: RunBook = {
            "run_id": run_id,
            "invocation": new_invocation(scope),
            "idempotency_scope": scope_of_key,
            "run_count": runs_before(state, human) + 1,
            "limits": {"max_rounds": scope.settings.max_rounds},
            "consecutive_rollbacks": 0,
            "plan_calls": 0,
            "rollback_note": "",
            "server_run": named.server_run,  # "" for a run no server run recorded
        }
        book["answered_message_id"] = human.id or ""
        update: PrepareUpdate = {
            "user_input": request,
            "user_extra_requirement": state.get("user_extra_requirement") or "",
            "round_state": Overwrite(empty_round_state()),
            "decision": {"next_action": "response", "execution_commands": []},
            "answer": "",
            "action_results": {},
            "tool_logs": Overwrite([]),
            "rollbacks": [],
            "round_calls": Overwrite([]),
            "call_results": Overwrite({}),
            "usage": Overwrite({}),
            "idempotency_key": None,  # consumed: a key names the run it came with
            "run_book": book,
            "status": "running",
            "status_reason": "",
        }
        if update_messages:
            update["messages"] = update_messages
        return parts.safe(update)

    return prepare
