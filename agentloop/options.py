"""The options of `create_tool_loop`, grouped by concern.

- `GovernanceOptions`: how tools may be called (policies, timeouts,
  retries, the result cache, sync-tool threads, redaction, the side-effect ledger);
- `PlanningOptions`: how rounds are planned and bounded, and the prompt templates;
- `ModelOptions`: how models are called (the answer model, fallbacks, retries, limits,
  prices).

Each is a frozen dataclass whose defaults are the library's defaults, so
`create_tool_loop(model, tools)` needs none of them and a loop that changes one thing
says only that thing: `governance=GovernanceOptions(policies={...})`. Each checks its own
values when it is made (a `ConfigurationError` naming the option); the knobs users set
most (`max_rounds`, `concurrency`, `plan_mode`) are keyword parameters of
`create_tool_loop` instead, checked by `agentloop.settings.LoopSettings`.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from langgraph.types import RetryPolicy

from agentloop.durability import LedgerRetention, SideEffectLedger
from agentloop.errors import ConfigurationError
from agentloop.governance.cache import ResultCache
from agentloop.governance.policy import DEFAULT_TIMEOUT_S, ToolPolicy, ToolRetry
from agentloop.governance.threads import ToolThreads
from agentloop.models.calls import ModelRetryPolicy
from agentloop.models.resolve import ModelLike
from agentloop.models.stream import ModelLimits
from agentloop.models.usage import Prices
from agentloop.observability.redaction import Redact
from agentloop.planning.templates import PromptSource

__all__ = ["GovernanceOptions", "ModelOptions", "PlanningOptions", "check_int"]


@dataclass(frozen=True)
class GovernanceOptions:
    """How the loop's tools may be called.

    Attributes:
        policies: `ToolPolicy` per tool name.
        default_timeout_s: Time limit of one attempt for tools whose policy sets none.
        timeout_by_prefix: Time limits by tool-name prefix (`{"search_": 10.0}`).
        default_retry: Retry policy of idempotent tools that declare none (None: no
            retries); a LangGraph `RetryPolicy` is accepted.
        cache: A result cache to share between loops (default: one per compiled loop).
        tool_threads: Where sync tools run (default: `ToolThreads()`, 64 at once,
            4 hung threads per tool at most).
        redact: Applied to every string written to state, events, log lines and prompts
            (default: a `Redactor` of secret-looking environment variables, the MCP
            servers' `env` and `headers`, and credential shapes). Log records are
            redacted only once the app calls `install_log_redaction` (pass this hook
            to it to apply it there too).
        ledger: Where calls are claimed and their outcomes kept (default: with the
            checkpointer: its database for SQLite and PostgreSQL, the server's
            PostgreSQL or store under the LangGraph server, memory otherwise; see
            `agentloop.durability.placement`).
        ledger_retention: How long the ledger chosen with the checkpointer keeps the
            entries of deleted threads and of idempotency keys, and how often a run's
            start sweeps the rest (`agentloop.durability.retention`); None: never swept.
            A ledger given with `ledger` is not swept by the loop (`sweep_ledger` does).
    """

    policies: Mapping[str, ToolPolicy] = field(default_factory=dict)
    default_timeout_s: float = DEFAULT_TIMEOUT_S
    timeout_by_prefix: Mapping[str, float] | None = None
    default_retry: ToolRetry | RetryPolicy | None = field(default_factory=ToolRetry)
    cache: ResultCache | None = None
    tool_threads: ToolThreads | None = None
    redact: Redact | None = None
    ledger: SideEffectLedger | None = None
    ledger_retention: LedgerRetention | None = field(default_factory=LedgerRetention)

    def __post_init__(self) -> None:
        """Reject values that cannot work."""
        if not isinstance(self.default_timeout_s, int | float) or self.default_timeout_s <= 0:
            msg = f"default_timeout_s must be a positive number, got {self.default_timeout_s!r}"
            raise ConfigurationError(msg)
        if self.default_retry is not None:
            object.__setattr__(self, "default_retry", ToolRetry.of(self.default_retry))
        operation = getattr(type(self.ledger), "operation", None)
        if self.ledger is not None and not inspect.iscoroutinefunction(operation):
            msg = (
                f"{type(self.ledger).__name__}.operation must be an `async def` (a ledger "
                "takes each step of I/O with `await by_mode(blocking, awaited)`)"
            )
            raise ConfigurationError(msg)
        retention = self.ledger_retention
        if retention is not None and not isinstance(retention, LedgerRetention):
            msg = f"ledger_retention must be a LedgerRetention or None, got {retention!r:.80}"
            raise ConfigurationError(msg)


@dataclass(frozen=True)
class PlanningOptions:
    """How rounds are planned and bounded, and the prompt templates.

    Attributes:
        prompts: Templates that replace the shipped ones, by name (`plan_system`,
            `plan_user`, `plan_reask`, `plan_native_system`, `plan_native_user`,
            `plan_native_reask`, `rollback_note`, `answer_system`, `answer_user`,
            `answer_results`): the text, or a file path. Checked when the loop is built:
            a template that uses a `$name` it may not is a `ConfigurationError`
            (`PROMPT_VARIABLES` lists them).
        keep_tool_results: Of the results earlier prompts showed, the planner sees at
            least this many latest in full again; older ones longer than 100 characters
            (`SHORT_RESULT_CHARS`) are omitted in blocks of this size, so the prompt's
            history only grows at its end between two blocks (the last round's results
            are always shown, and the answer model sees every result). A native
            planner's reply is not taken as the answer once a result was omitted.
        max_consecutive_rollbacks: Rounds in a row that may be rolled back.
        max_commands_per_round: Commands of one plan that run (the plan's width, which
            `create_agent` does not bound: it runs every call of an `AIMessage`); the
            excess become refused records (`too_many_commands`, an error `ToolMessage`
            each) that tell the planner why, as `ToolCallLimitMiddleware`'s
            `exit_behavior="continue"` tells the model, and the run goes on. The excess
            is refused as a block (nothing of it validated or repaired, the refusal
            written once), so a plan of thousands of calls costs little more than their
            records. Limits per run and per thread are `ToolCallLimitMiddleware`'s.
        plan_reasks: Times an unusable plan (no JSON, no decision, `execute` without a
            usable command) goes back to the planner with what was wrong, before the run
            stops with status `planner_failed`. The planner calls of one run, rounds,
            re-asks and rollbacks together, are bounded by
            `(max_rounds + max_consecutive_rollbacks) * (1 + plan_reasks)`; to limit the
            model calls of a run or a thread, use LangChain's
            `ModelCallLimitMiddleware(run_limit=..., thread_limit=...)`.
        history_turns: Trims the conversation: the most earlier turns (a user message and
            the loop's answer) the planner and the answer model see, the newest kept
            (None: every earlier turn, as `create_agent`'s model sees the whole
            conversation). To summarise older turns instead, add LangChain's
            `SummarizationMiddleware`; to trim as the app likes, a `@before_model` hook
            that rewrites `messages`.
        history_chars: Trims the conversation to its newest characters: the most
            characters of those turns (None: no limit).
        speculative_answer: Start the answer call alongside a planner call, so a plan
            that says `response` costs no extra wait; the answer is cancelled as soon as
            the plan says `execute` (its tokens still count in `usage`). `"auto"`: when
            the plan is likely to say `response` (no tool available, a chat-like first
            request, after a round whose calls all succeeded, as the loop's earlier
            plans at that point say); `True`: with every planner call; `False`: never.
            In `plan_mode="native"` a started answer is used rather than the planner's
            text reply (it was asked without the tool list, so it comes sooner); "auto"
            starts none where that reply would be the answer (the answer model is the
            planner): the run then costs the planner's calls only, as `create_agent`'s.
            Off with `wrap_model_call` middleware, which every answer call goes through.
        streaming_dispatch: Start a plan's concurrency-safe, idempotent calls while the
            plan is still streaming (off anyway when the loop interrupts before
            `execute`).
        stream_plan_tokens: Stream the planner's tokens on LangGraph's `messages` stream
            too (for debugging). Off by default: planner calls are tagged `nostream`, so
            `messages` carries what a chat UI shows (the answer), while plan progress
            stays on the `custom` and `events` streams.
    """

    prompts: Mapping[str, PromptSource] | None = None
    keep_tool_results: int = 1
    max_consecutive_rollbacks: int = 5
    max_commands_per_round: int = 64
    plan_reasks: int = 2
    history_turns: int | None = None
    history_chars: int | None = None
    speculative_answer: bool | Literal["auto"] = "auto"
    streaming_dispatch: bool = True
    stream_plan_tokens: bool = False

    def __post_init__(self) -> None:
        """Reject values that cannot work, with a clear message."""
        for name in ("keep_tool_results", "max_consecutive_rollbacks", "plan_reasks"):
            check_int(name, getattr(self, name), minimum=0)
        for name in ("history_turns", "history_chars"):
            if getattr(self, name) is not None:
                check_int(name, getattr(self, name), minimum=0, optional=True)
        check_int("max_commands_per_round", self.max_commands_per_round, minimum=1)
        speculate = self.speculative_answer
        if not isinstance(speculate, bool) and speculate != "auto":
            msg = f"speculative_answer must be True, False or 'auto', got {speculate!r}"
            raise ConfigurationError(msg)
        for name in ("streaming_dispatch", "stream_plan_tokens"):
            if not isinstance(getattr(self, name), bool):
                msg = f"{name} must be True or False, got {getattr(self, name)!r}"
                raise ConfigurationError(msg)


def check_int(name: str, value: object, *, minimum: int, optional: bool = False) -> None:
    """Check an integer option.

    Raises:
        ConfigurationError: `value` is not an int (a bool is not) of at least `minimum`.
    """
    if isinstance(value, int) and not isinstance(value, bool) and value >= minimum:
        return
    expected = f"None or an int >= {minimum}" if optional else f"an int >= {minimum}"
    msg = f"{name} must be {expected}, got {value!r}"
    raise ConfigurationError(msg)


@dataclass(frozen=True)
class ModelOptions:
    """How the loop's models are called.

    Attributes:
        answer_model: The model of the final answer (default: the planner model); a
            LangChain chat model or an `init_chat_model` string.
        fallbacks: Models tried in order when a planner, answer or typed-result call
            fails (the loop's fallback layer, inside its retry).
        retry: How model calls are retried (transient errors, length limit, degenerate
            replies); a LangGraph `RetryPolicy` is accepted. None: `ModelRetryPolicy()`,
            without its retry of failed calls when the app's middleware has a
            `ModelRetryMiddleware` or a `ModelFallbackMiddleware`.
        limits: Time and size bounds of every model call.
        prices: `{model_name: (usd_per_million_input, usd_per_million_output)}` for the
            `usage` cost summary.
    """

    answer_model: ModelLike | None = None
    fallbacks: Sequence[ModelLike] = ()
    retry: ModelRetryPolicy | RetryPolicy | None = None
    limits: ModelLimits = field(default_factory=ModelLimits)
    prices: Prices | None = None

    def __post_init__(self) -> None:
        """Accept LangGraph's `RetryPolicy`."""
        if self.retry is not None:
            object.__setattr__(self, "retry", ModelRetryPolicy.of(self.retry))
