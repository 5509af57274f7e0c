"""Token usage and cost, per agent (a loop and each of its sub-agents)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from langchain_core.messages import BaseMessage

__all__ = [
    "Prices",
    "USAGE_FIELDS",
    "add_usage",
    "message_usage",
    "sum_usage",
    "usage_entry",
    "wasted_usage",
]

Prices = Mapping[str, tuple[float, float]]
"""Model name -> (USD per million input tokens, USD per million output tokens)."""

USAGE_FIELDS = (
    "input_tokens",
    "output_tokens",
    "model_calls",
    "cost_usd",
    "wasted_answers",
    "wasted_input_tokens",
)
"""What a usage entry counts. `wasted_answers`: speculative answers requested and not
used (cancelled, stale or unusable); `wasted_input_tokens`: their input tokens. Both are
also in `model_calls` and `input_tokens`."""


def message_usage(messages: Iterable[BaseMessage]) -> tuple[int, int]:
    """Sum the `usage_metadata` of messages or chunks: (input tokens, output tokens)."""
    tokens_in = tokens_out = 0
    for message in messages:
        usage = getattr(message, "usage_metadata", None) or {}
        tokens_in += int(usage.get("input_tokens", 0) or 0)
        tokens_out += int(usage.get("output_tokens", 0) or 0)
    return tokens_in, tokens_out


def usage_entry(
    model: str, tokens_in: int, tokens_out: int, prices: Prices | None = None
) -> dict[str, float]:
    """One model call's usage, priced when the model is in `prices`."""
    price_in, price_out = (prices or {}).get(model, (0.0, 0.0))
    return {
        "input_tokens": tokens_in,
        "output_tokens": tokens_out,
        "model_calls": 1,
        "cost_usd": round((tokens_in * price_in + tokens_out * price_out) / 1_000_000, 8),
    }


def wasted_usage(
    model: str, tokens_in: int, tokens_out: int, prices: Prices | None = None
) -> dict[str, float]:
    """The usage of a speculative answer that was not used (it counts as spent too)."""
    entry = usage_entry(model, tokens_in, tokens_out, prices)
    return {**entry, "wasted_answers": 1, "wasted_input_tokens": tokens_in}


def add_usage(
    current: Mapping[str, Mapping[str, Any]] | None, update: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Add per-agent usage together (a new dict; neither argument is changed)."""
    merged = {agent: dict(entry) for agent, entry in (current or {}).items()}
    for agent, delta in update.items():
        entry = merged.setdefault(agent, dict.fromkeys(USAGE_FIELDS, 0))
        for field in USAGE_FIELDS:
            if field in delta:
                entry[field] = entry.get(field, 0) + (delta[field] or 0)
            elif field not in entry:
                entry[field] = 0
        entry["cost_usd"] = round(float(entry["cost_usd"]), 8)
    return merged


def sum_usage(entries: Iterable[Mapping[str, Mapping[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Add several per-agent usage summaries together."""
    total: dict[str, dict[str, Any]] = {}
    for entry in entries:
        total = add_usage(total, entry)
    return total
