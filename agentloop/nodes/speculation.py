"""When to request the answer alongside a plan: `PlanningOptions(speculative_answer="auto")`.

A speculative answer saves the answer's time to first token and prefill when the plan
says `response`, and wastes the answer's whole prompt when it says `execute`. So "auto"
speculates on a plan only when it is likely to say `response`. Each plan is placed at a
*point*, from cheap signals of the run's state:

- `no_tools`: no tool is available, the plan can only say `response` (always speculated);
- `chat`: the first plan of a request that names no tool (a chat-like request);
- `tool_request`: the first plan of a request that names a tool (`weather` for
  `get_weather`, `pages` for `read_page`);
- `after_success`: every call of the previous round succeeded, so its results may answer;
- `after_failure`: a call failed or the round was rolled back, which a planner usually
  retries.

Each point keeps a running estimate, per loop, of how often a plan there said
`response`: a prior from the signal (`PRIORS`), then every plan the loop decided there,
whether it was speculated or not. A plan is speculated when that estimate is at least
`MIN_RESPONSE_RATE`. A re-ask never starts another answer (the one started with the
plan is dropped as soon as a reply says `execute`).

In `plan_mode="native"` the planner's own text reply can be the answer; a speculative
answer is used instead when one was started (its prompt has no tool list, so its first
token comes sooner), and the planner's reply is read only up to its first text token.

"auto" never speculates with an answer model whose replies follow the order of the
requests (`replies_in_order`, as `agentloop.testing.ScriptedChatModel` with a script
declares): an extra request would take a reply meant for a later one.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from agentloop.state import LoopState, empty_round_state

__all__ = [
    "MIN_RESPONSE_RATE",
    "PRIORS",
    "Point",
    "Speculation",
    "SpeculationEstimate",
    "names_a_tool",
    "plan_point",
    "replies_in_order",
    "should_speculate",
    "tool_words",
]

Speculation = bool | Literal["auto"]
"""`PlanningOptions.speculative_answer`: always, never, or when the plan is likely to end."""

Point = Literal["no_tools", "chat", "tool_request", "after_success", "after_failure"]
"""Where a plan stands, for the estimate of how likely it is to say `response`."""

MIN_RESPONSE_RATE = 0.25
"""Speculate from this estimated share of `response` on: at most three answer prompts
wasted for each answer whose wait is saved."""

PRIORS: dict[Point, tuple[float, float]] = {
    "no_tools": (1.0, 1.0),
    "chat": (2.0, 3.0),
    "tool_request": (1.0, 5.0),
    "after_success": (1.0, 2.0),
    "after_failure": (1.0, 5.0),
}
"""(responses, plans) assumed at each point before the loop saw any: a chat-like request
or a successful round starts above `MIN_RESPONSE_RATE`, a request that names a tool or a
failed round below it."""

WINDOW = 50.0
"""Plans an estimate remembers: beyond it, older observations weigh less and less."""

_GENERIC_WORDS = frozenset(
    {"get", "set", "list", "fetch", "run", "call", "make", "tool", "tools", "api", "the", "and"}
)
"""Words of tool names that say nothing of what a request needs."""


def tool_words(names: Iterable[str]) -> frozenset[str]:
    """The words of tool names that show a request needs them (`get_weather` -> `weather`)."""
    words: set[str] = set()
    for name in names:
        spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name).lower()
        words.update(re.findall(r"[a-z0-9]+", spaced))
    return frozenset(word for word in words if len(word) >= 3 and word not in _GENERIC_WORDS)


def names_a_tool(request: str, words: frozenset[str]) -> bool:
    """Whether a word of the request starts with a tool word (`pages` names `page`)."""
    return any(
        said.startswith(word)
        for said in re.findall(r"[a-z0-9]+", request.lower())
        for word in words
    )


def plan_point(state: LoopState, words: frozenset[str], *, tools: bool) -> Point:
    """Place the next plan of a run from its state and the loop's tool words."""
    if not tools:
        return "no_tools"
    round_state = state.get("round_state") or empty_round_state()
    if state.get("rollback_note"):
        return "after_failure"
    if not round_state["round_index"]:
        return "tool_request" if names_a_tool(state.get("user_input", ""), words) else "chat"
    records = round_state["last_round_records"]
    return "after_success" if all(record["success"] for record in records) else "after_failure"


def replies_in_order(model: object) -> bool:
    """Whether a model's replies follow the order of its requests (it says so itself)."""
    return getattr(model, "replies_in_order", False) is True


def should_speculate(
    mode: Speculation, point: Point, response_rate: float, *, in_order: bool = False
) -> bool:
    """Whether to request the answer alongside the plan.

    Args:
        mode: `True` (always), `False` (never) or `"auto"`.
        point: Where the plan stands (`plan_point`).
        response_rate: The loop's estimate of how often a plan there says `response`.
        in_order: The answer model's replies follow the order of its requests.
    """
    if mode != "auto":
        return bool(mode)
    if in_order:
        return False
    return point == "no_tools" or response_rate >= MIN_RESPONSE_RATE


@dataclass
class _Count:
    responses: float
    plans: float


class SpeculationEstimate:
    """How often a plan at each point said `response`, over a loop's runs (thread-safe).

    The plan node of a loop asks it where a plan stands (`point`) and whether to
    speculate there (`wanted`), then tells it what the plan decided (`observe`).
    """

    def __init__(self) -> None:
        """Start every point at its prior."""
        self._counts = {point: _Count(*prior) for point, prior in PRIORS.items()}
        self._lock = threading.Lock()
        self._words: tuple[tuple[str, ...], frozenset[str]] = ((), frozenset())

    def point(self, state: LoopState, tool_names: Iterable[str]) -> Point:
        """Place the next plan of a run (`plan_point`; tool words rebuilt when tools change)."""
        names = tuple(tool_names)
        if self._words[0] != names:
            self._words = (names, tool_words(names))
        return plan_point(state, self._words[1], tools=bool(names))

    def wanted(self, mode: Speculation, point: Point, answer_model: object) -> bool:
        """Whether to request the answer alongside a plan at `point` (`should_speculate`)."""
        in_order = replies_in_order(answer_model)
        return should_speculate(mode, point, self.rate(point), in_order=in_order)

    def rate(self, point: Point) -> float:
        """The estimated share of plans at `point` that say `response`."""
        with self._lock:
            count = self._counts[point]
            return count.responses / count.plans

    def observe(self, point: Point, responded: bool) -> None:
        """Count a decided plan at `point`."""
        with self._lock:
            count = self._counts[point]
            if count.plans >= WINDOW:
                count.responses, count.plans = count.responses / 2, count.plans / 2
            count.responses += responded
            count.plans += 1
