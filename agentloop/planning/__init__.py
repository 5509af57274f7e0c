"""Planning: the planner's prompt from the transcript, its streamed reply, a `PlanDecision`.

- `prompt`, `system_prompt`, `templates`: the requests the planner and the answer model
  get, built from `messages` and the templates in `prompts/`;
- `stream`, `reader`, `native`: reading a plan as it streams (JSON text, a plan tool,
  or the model's own tool calls);
- `normalize`, `check`: one pure function from a reply to a `PlanDecision`, and its checks;
- `references`: `$N` references between the commands of one plan.

Parsing a plan runs nothing. May import: `agentloop.state`, `agentloop.models`,
`agentloop.durability.identity`, `agentloop.base`, `agentloop.errors`.
"""

from __future__ import annotations

from agentloop.planning.normalize import normalize_plan_decision, unparseable_decision
from agentloop.planning.stream import PlanParseError, PlanStreamParser, extract_json_object

__all__ = [
    # Streaming parse
    "PlanParseError",
    "PlanStreamParser",
    "extract_json_object",
    # Normalization
    "normalize_plan_decision",
    "unparseable_decision",
]
