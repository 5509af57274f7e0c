"""What the nodes of one compiled loop share: settings, models, tools, retry and prices."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import SystemMessage
from langgraph.runtime import Runtime

from agentloop.base.call_shapes import PlanDecision, ToolCommand, ToolExecutionRecord
from agentloop.base.checkpoint_safe import UpdateT, checkpoint_safe, safe_update
from agentloop.durability import LedgerRetention, LedgerSweeps, RunRecords, SideEffectLedger
from agentloop.governance.cache_scope import RunIdentities
from agentloop.governance.call_config import SamplingModel
from agentloop.governance.catalog import ToolCatalog
from agentloop.governance.pipeline import ToolRunner
from agentloop.governance.planned_arguments import PlannedArguments
from agentloop.governance.registry import ToolRegistry
from agentloop.middleware.hooks import LoopHooks
from agentloop.middleware.stack import LoopMiddleware
from agentloop.models.calls import ModelRetryPolicy
from agentloop.models.resolve import ModelProvider
from agentloop.models.stream import ModelLimits
from agentloop.models.usage import USAGE_FIELDS, Prices
from agentloop.nodes.reads import RunReplays
from agentloop.nodes.structured import StructuredOutput
from agentloop.observability.redaction import Redact
from agentloop.planning.prompt import MessageViews
from agentloop.planning.templates import PromptSet
from agentloop.settings import LoopSettings, RunScope

__all__ = ["LoopParts"]

RECORD_FIELDS = ToolExecutionRecord.__required_keys__ | ToolExecutionRecord.__optional_keys__
"""A record's declared field names: kept as they are when a record is made safe."""
DECLARED_FIELDS = (
    RECORD_FIELDS
    | PlanDecision.__required_keys__
    | PlanDecision.__optional_keys__
    | ToolCommand.__required_keys__
    | ToolCommand.__optional_keys__
    | frozenset(USAGE_FIELDS)
)
"""The field names the loop declares for what it writes (records, plan decisions and
their commands, usage entries): kept as they are when a state update is made safe."""
LOOP_MADE_FIELDS = frozenset({"call_id", "call_key", "position_key", "status"})
"""A record's fields whose text the loop made of digests and counters (the run id is a
digest) or of its own words (`CallStatus`): no secret can be in them, and they are not
redacted."""


@dataclass(frozen=True)
class LoopParts:
    """The parts of one compiled loop, built once by `create_tool_loop`.

    Prompts are built only from redacted parts: state written through `safe` (requests,
    records, answers) and the tool list, redacted by the catalog.
    """

    settings: LoopSettings
    models: ModelProvider
    tools: ToolCatalog
    """The loop's tools now (an MCP toolset's may change between runs and rounds)."""
    runner: ToolRunner
    model_retry: ModelRetryPolicy
    """The answer's re-asks of a reply cut by its length or repeating itself (a failed
    call's retry is a layer of `middleware`)."""
    model_limits: ModelLimits = field(default_factory=ModelLimits)
    prices: Prices | None = None
    ledger: SideEffectLedger | None = None
    """A ledger given explicitly; otherwise the one that goes with the checkpointer."""
    retention: LedgerRetention | None = None
    """How long the ledger that goes with the checkpointer keeps entries (None: no sweep)."""
    sweeps: LedgerSweeps = field(default_factory=LedgerSweeps)
    """When this loop last swept each ledger."""
    redact: Redact | None = None
    """Applied to every string the loop writes to state, events and prompts."""
    prompts: PromptSet = field(default_factory=PromptSet)
    """The loop's prompt templates (the shipped ones, or the user's)."""
    structured: StructuredOutput | None = None
    """The loop's `response_format`, compiled."""
    middleware: LoopMiddleware = field(default_factory=lambda: LoopMiddleware(()))
    """Every model call's stack: the app's `wrap_model_call` middleware (`models`), then
    the loop's retry and fallback layers."""
    hooks: LoopHooks | None = None
    """The app's `before_model` / `after_model` (and agent) hooks (None: there are none)."""
    system_prompt: SystemMessage | None = None
    """The app's instructions, which come first in every planner and answer request."""
    views: MessageViews = field(default_factory=MessageViews)
    """What requests showed of each transcript message (`agentloop.planning.prompt`)."""
    replays: RunReplays = field(default_factory=RunReplays)
    """The last replay of each recent run's reads and writes (`agentloop.nodes.reads`)."""
    identities: RunIdentities = field(default_factory=RunIdentities)
    """Whom recent runs serve (`agentloop.governance.cache_scope.run_identity`)."""
    run_records: RunRecords = field(default_factory=RunRecords)
    """The server runs whose ledger records this loop looked up (`agentloop.nodes.guarded`)."""
    planned_arguments: PlannedArguments = field(default_factory=PlannedArguments)
    """The planner's own arguments where the redact hook changed them, for the tools."""
    sampling: SamplingModel = field(init=False)
    """The model MCP servers' sampling requests reach during the loop's calls."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "sampling", SamplingModel(self.models.model))

    def scope(self, runtime: Runtime[Any]) -> RunScope:
        """The scope of one node call."""
        return RunScope.of(self.settings, runtime, self.redact)

    def safe(self, update: UpdateT) -> UpdateT:
        """A state update, redacted and checkpoint-safe (declared field names kept)."""
        return safe_update(update, self.redact, plain_keys=DECLARED_FIELDS)

    def release_kept(self, invocation: str) -> None:
        """Drop what the loop keeps in memory for a run's calls (whole results, arguments).

        Called when the run's round ends (a reference names a command of its own plan),
        when the run answers and when it is cancelled.
        """
        self.runner.whole_results.release(invocation)
        self.planned_arguments.release(invocation)

    def unredacted(self, value: Any) -> Any:
        """A value made checkpoint-safe, not redacted (the planner's own arguments)."""
        return checkpoint_safe(value, None, plain_keys=DECLARED_FIELDS)

    def kept_command(self, command: ToolCommand) -> ToolCommand:
        """A plan's command as `safe` writes it to state (redacted, checkpoint-safe)."""
        kept: ToolCommand = checkpoint_safe(command, self.redact, plain_keys=DECLARED_FIELDS)
        return kept

    def safe_value(self, value: Any) -> Any:
        """A value, redacted and checkpoint-safe (a record's field names kept as they are).

        A record's own `LOOP_MADE_FIELDS` are not redacted (the same keys of the values
        inside it are).
        """
        return checkpoint_safe(
            value, self.redact, plain_keys=RECORD_FIELDS, plain_values=LOOP_MADE_FIELDS
        )

    @property
    def registry(self) -> ToolRegistry:
        """The tools and their policies now."""
        return self.tools.registry

    @property
    def tool_list(self) -> str:
        """The tools as the planner sees them now (prompt JSON, redacted)."""
        return self.tools.tool_list
