"""Short-circuit: a ~2,000-token plan streamed at a fixed rate, `response` first or last.

The planner streams a ~8,000-character reply in 4-character chunks with a fixed delay
before each chunk (the full stream takes about 1-2 s). With `next_action` first, the
loop closes the stream after a few chunks; with the same reply written with
`next_action` last, nothing can be decided before the whole stream is read. The figure
is the time from the start of the run to the `answer_started` event, short-circuited
over full read.
"""

from __future__ import annotations

import json
import time
from typing import Any

from agentloop import ModelOptions, create_tool_loop
from bench.contenders import ONE_CHUNK, BenchChatModel, loop_input, sleeping_tool
from bench.harness import Figure, Settings, Target, median

__all__ = ["NAME", "profile_workload", "run"]

NAME = "short_circuit"
REPLY_CHARS = 8_000
CHUNK_SIZE = 4
CHUNK_DELAY_S = 0.0005
TARGET = Target(0.05)


def _commands() -> list[dict[str, Any]]:
    commands: list[dict[str, Any]] = []
    while len(json.dumps(commands)) < REPLY_CHARS - 60:
        n = len(commands)
        commands.append(
            {
                "purpose": f"look up record {n} and compare it with the previous ones",
                "tool_name": "get_item",
                "tool_kwargs": {"n": n},
                "todo_suggestion": "check the values against the reference table " * 2,
            }
        )
    return commands


def reply(*, response_first: bool) -> str:
    """Return the planner's reply: `response` with many commands, `next_action` first or last."""
    commands = _commands()
    body = (
        {"next_action": "response", "execution_commands": commands}
        if response_first
        else {"execution_commands": commands, "next_action": "response"}
    )
    return json.dumps(body)


async def _time_to_answer(*, response_first: bool) -> tuple[float, dict[str, Any]]:
    planner = BenchChatModel(
        [reply(response_first=response_first)],
        chunk_size=CHUNK_SIZE,
        chunk_delay_s=CHUNK_DELAY_S,
    )
    answerer = BenchChatModel(["Answered."], chunk_size=ONE_CHUNK)
    graph = create_tool_loop(
        planner, [sleeping_tool("get_item", 0)], models=ModelOptions(answer_model=answerer)
    )
    decided: dict[str, Any] = {}
    started = time.time()
    async for event in graph.astream(loop_input(), stream_mode="custom"):
        if event["type"] == "plan_decided":
            decided = event
        if event["type"] == "answer_started":
            return (event["ts"] - started) * 1000, decided
    msg = "the run ended without reaching the answer node"
    raise RuntimeError(msg)


async def run(settings: Settings) -> list[Figure]:
    """Time both replies (interleaved, median of repeats)."""
    short: list[float] = []
    full: list[float] = []
    chunks: dict[str, int] = {}
    for _ in range(settings.repeats):
        ms, event = await _time_to_answer(response_first=True)
        short.append(ms)
        chunks["short"] = event.get("chunks", -1)
        ms, event = await _time_to_answer(response_first=False)
        full.append(ms)
        chunks["full"] = event.get("chunks", -1)
    total = -(-len(reply(response_first=True)) // CHUNK_SIZE)
    return [
        Figure(
            "Short-circuit: time to answer node, ~2,000-token plan",
            median(short),
            median(full),
            "ms",
            "same reply, next_action last",
            TARGET,
            {"ours": short, "contender": full},
            f"chunks read: {chunks['short']} vs {chunks['full']} (of {total}); "
            f"{CHUNK_SIZE}-char chunks, {CHUNK_DELAY_S * 1000:g} ms before each",
        )
    ]


async def profile_workload(settings: Settings) -> None:
    """Run the short-circuited side a few times (for `--profile short_circuit`)."""
    for _ in range(max(3, settings.repeats)):
        await _time_to_answer(response_first=True)
