"""Planning: read the planner's streamed reply and normalize it into a `PlanDecision`."""

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
