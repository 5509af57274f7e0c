"""Loop settings: fixed when the loop is built, overridable per run through the context."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, get_args

from langgraph.config import get_config

from agentloop.errors import ConfigurationError
from agentloop.observability.events import Emit, make_emitter
from agentloop.options import PlanningOptions, check_int
from agentloop.planning.stream import PlanMode

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig
    from langgraph.runtime import ExecutionInfo, Runtime
    from langgraph.store.base import BaseStore

__all__ = ["LOOP_CONFIG_KEY", "LoopContext", "LoopSettings", "PlanMode", "RunScope", "loop_context"]

LOOP_CONFIG_KEY = "agentloop"
"""The `configurable` key of a run's `LoopContext` when the graph's context is the app's own."""


@dataclass(frozen=True)
class LoopSettings(PlanningOptions):
    """The settings of one compiled loop: its planning options and the factory's knobs.

    Built once by `create_tool_loop` (`LoopSettings.build`); every node reads its values
    from here, with the run's `LoopContext` applied (`with_context`). Values are checked
    whenever settings are made, overrides included: the planning fields by
    `PlanningOptions`, the knobs here.

    Attributes:
        max_rounds: Most executed rounds of a run.
        concurrency: Most tool calls running at once (None: no limit).
        plan_mode: How the planner writes its plan (see `PlanMode`).
        name: The compiled graph's name (events and log lines carry it).
        reviews_plan: Whether each plan is reviewed before its calls run (an
            `after_model` hook, an interrupt before `execute` or after `plan`): then the
            `execute` node prepares the round from the plan as reviewed; otherwise, in a
            run without a checkpointer, `plan` prepares it as it ends.
    """

    max_rounds: int = 5
    concurrency: int | None = None
    plan_mode: PlanMode = "json"
    name: str = "tool_loop"
    reviews_plan: bool = False

    def __post_init__(self) -> None:
        """Reject values that cannot work, with a clear message."""
        super().__post_init__()
        check_int("max_rounds", self.max_rounds, minimum=0)
        if self.concurrency is not None:
            check_int("concurrency", self.concurrency, minimum=1, optional=True)
        if self.plan_mode not in get_args(PlanMode):
            msg = f"plan_mode must be 'json', 'tool' or 'native', got {self.plan_mode!r}"
            raise ConfigurationError(msg)

    @classmethod
    def build(
        cls, planning: PlanningOptions, *, model_middleware: bool, reviews_plan: bool, **knobs: Any
    ) -> LoopSettings:
        """Combine a loop's planning options with the factory's knobs (`max_rounds`...).

        Args:
            planning: The loop's planning options, taken as they are, except:
            model_middleware: Whether the app wraps model calls: a speculative answer
                would not go through its `wrap_model_call` middleware, so it is off.
            reviews_plan: Whether each plan is reviewed before its calls run (an
                `after_model` hook, an interrupt before `execute`): then no call may
                start while the plan streams, so streaming dispatch is off.
            knobs: `LoopSettings`' own fields.

        Raises:
            ConfigurationError: A knob is invalid.
        """
        values = {item.name: getattr(planning, item.name) for item in fields(PlanningOptions)}
        values["speculative_answer"] = False if model_middleware else planning.speculative_answer
        values["streaming_dispatch"] = planning.streaming_dispatch and not reviews_plan
        return cls(**values, **knobs, reviews_plan=reviews_plan)

    @property
    def plan_call_limit(self) -> int:
        """Most planner calls of one run: rounds, re-asks and rollbacks together.

        Derived from the other bounds, the loop's safety net (as `create_agent` has its
        recursion limit); `ModelCallLimitMiddleware` is the way to set a limit of one's own.
        """
        return (self.max_rounds + self.max_consecutive_rollbacks) * (1 + self.plan_reasks)

    def with_context(self, context: Any) -> LoopSettings:
        """Return these settings overridden by the non-None fields of a run's context."""
        if context is None:
            return self
        changes = {
            name: getattr(context, name)
            for name in _OVERRIDABLE
            if getattr(context, name, None) is not None
        }
        return replace(self, **changes) if changes else self


@dataclass
class LoopContext:
    """Per-run settings of the loop itself; a field left as None keeps the loop's value.

    Without `context_schema=`, it is the graph's context:
    `loop.invoke(input, context=LoopContext(max_rounds=2))`. With an app's own context
    schema, it goes in the config instead, out of the app's way:
    `loop.invoke(input, {"configurable": {"agentloop": LoopContext(max_rounds=2)}},
    context=MyContext(...))` (a dict of the same fields works too).
    """

    model: str | None = field(
        default=None,
        metadata={
            "description": "Chat model for this run as 'provider:name' "
            "(e.g. 'openai:gpt-4.1-mini'); empty keeps the loop's model."
        },
    )
    max_rounds: int | None = field(
        default=None, metadata={"description": "Most plan/execute rounds before answering."}
    )
    concurrency: int | None = field(
        default=None, metadata={"description": "Most tool calls running at once (empty: no limit)."}
    )
    plan_mode: PlanMode | None = field(
        default=None,
        metadata={
            "description": "'json' (plan as message text), 'tool' (one plan tool call) or "
            "'native' (the planner calls the tools themselves)."
        },
    )
    keep_tool_results: int | None = field(
        default=None,
        metadata={"description": "How many latest tool results the planner sees in full."},
    )
    reexecute: bool | None = field(
        default=None,
        metadata={
            "description": "Run calls again even when the side-effect ledger holds their "
            "outcome (replays and forks); by default a recorded call is never re-run."
        },
    )


_OVERRIDABLE = tuple(
    item.name for item in fields(LoopContext) if item.name in {f.name for f in fields(LoopSettings)}
)
"""The `LoopContext` fields that override the `LoopSettings` field of the same name (checked
again, as when the loop was built)."""


def loop_context(context: Any, config: Mapping[str, Any] | None) -> LoopContext | None:
    """The run's `LoopContext`: the graph's context, or the config's `agentloop` entry.

    Raises:
        ConfigurationError: The config's entry is neither a `LoopContext` nor a mapping of
            its fields.
    """
    if context is not None and isinstance(context, LoopContext):  # None: no call
        return context
    given = ((config or {}).get("configurable") or {}).get(LOOP_CONFIG_KEY)
    if given is None or isinstance(given, LoopContext):
        return given
    names = {item.name for item in fields(LoopContext)}
    if not isinstance(given, Mapping) or not set(given) <= names:
        msg = (
            f"configurable[{LOOP_CONFIG_KEY!r}] must be a LoopContext or a dict of its "
            f"fields {sorted(names)}, got {given!r}"
        )
        raise ConfigurationError(msg)
    return LoopContext(**given)


@dataclass(frozen=True)
class RunScope:
    """What a node knows about the run it serves, built from LangGraph's `Runtime`.

    Attributes:
        settings: The loop's settings with the run's `LoopContext` applied.
        emit: Sends progress events to the run's `custom` stream.
        context: The run's `context` object (the app's, a `LoopContext`, a parent graph's
            context when the loop is a subgraph, or None).
        execution: LangGraph's execution info of the current task (thread, namespace).
        store: The store LangGraph gives the run (`runtime.store`: the app's, or the
            LangGraph server's), or None.
        loop: The run's `LoopContext` (see `loop_context`), or None.
        config: The node call's config (`get_config()`, read once for the scope), or
            None outside a graph run.
    """

    settings: LoopSettings
    emit: Emit
    context: Any = None
    execution: ExecutionInfo | None = None
    store: BaseStore | None = None
    loop: LoopContext | None = None
    config: RunnableConfig | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of(
        cls, settings: LoopSettings, runtime: Runtime[Any], redact: Callable[[str], str] | None
    ) -> RunScope:
        """Build the scope of a node call from the loop's settings and the runtime."""
        try:
            config: RunnableConfig | None = get_config()
        except RuntimeError:  # outside a graph run
            config = None
        loop = loop_context(runtime.context, config)
        return cls(
            settings=settings if loop is None else settings.with_context(loop),
            emit=make_emitter(runtime.stream_writer, loop_name=settings.name, redact=redact),
            context=runtime.context,
            execution=runtime.execution_info,
            store=runtime.store,
            loop=loop,
            config=config,
        )

    @property
    def thread_id(self) -> str | None:
        """The thread of the run (None without a checkpointer)."""
        return self.execution.thread_id if self.execution is not None else None
