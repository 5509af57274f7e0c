"""The `service` suite's tools and tasks: what each side is asked and decides.

The tools answer from fixed data after a set latency (a slow web search, quick
lookups) and log every call they receive, with its arguments and when it ran. A task
holds the request, the tool calls of each round (the same decisions for both sides),
our planner's plans, and the final answer.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field, create_model

from agentloop.testing import plan_reply
from bench.contenders import tool_call_turns

__all__ = [
    "FAST_S",
    "SLOW_S",
    "TASKS",
    "Command",
    "Task",
    "ToolCallLog",
    "ToolRun",
    "service_tools",
]

SLOW_S = 1.5
"""Latency of the web search."""
FAST_S = 0.3
"""Latency of every other tool."""
PAGE_CHARS = 1_500
"""Characters of one report page (the long task)."""
LONG_ROUNDS = 12

OPERATOR = "Lumen Bay Transit Authority"
DIRECTOR = "Mara Okafor"
BIOGRAPHY_QUERY = f"{DIRECTOR} (director of {OPERATOR})"
BIOGRAPHY = (
    f"{DIRECTOR} has directed the {OPERATOR} since 2019. She led the opening of the "
    "harbour line and the move to a 7-minute daytime frequency."
)


@dataclass(frozen=True)
class ToolRun:
    """One call a tool received."""

    tool_name: str
    """The tool."""
    args: dict[str, Any]
    """The arguments it received."""
    started: float
    """`time.perf_counter()` when it started."""
    ended: float
    """When it returned."""


@dataclass
class ToolCallLog:
    """Every call the tools of one run received."""

    runs: list[ToolRun] = field(default_factory=list)
    """The calls, in the order they returned."""

    def busy_s(self) -> float:
        """Return the seconds during which at least one tool was running."""
        busy, reach = 0.0, float("-inf")
        for run in sorted(self.runs, key=lambda run: run.started):
            start = max(run.started, reach)
            if run.ended > start:
                busy += run.ended - start
            reach = max(reach, run.ended)
        return busy

    def received(self) -> list[tuple[str, dict[str, Any]]]:
        """Return (tool, arguments) of every call, in the order they started."""
        ordered = sorted(self.runs, key=lambda run: run.started)
        return [(run.tool_name, run.args) for run in ordered]


def _page(n: int) -> str:
    line = f"page {n}: the tram report, ridership and maintenance figures by line. "
    return (line * (PAGE_CHARS // len(line) + 1))[:PAGE_CHARS]


_DATA: dict[str, Callable[[Any], str]] = {
    "search_web": lambda query: {
        "operator of the Lumen Bay tram network": OPERATOR,
        "Lumen Bay tram news": "Harbour line extension opens on 4 May; night trams from June.",
    }.get(query, f"no result for {query!r}"),
    "get_organization": lambda name: (
        DIRECTOR if name == OPERATOR else f"no organization named {name!r}"
    ),
    "get_biography": lambda query: (
        BIOGRAPHY if query == BIOGRAPHY_QUERY else f"no biography for {query!r}"
    ),
    "get_population": lambda city: f"{city}: 412,000 inhabitants (2025 estimate)",
    "get_weather": lambda city: f"{city}: 18 C, light wind from the west, dry",
    "get_exchange_rate": lambda currency: f"1 {currency} = 0.92 EUR",
    "get_page": _page,
}
_PARAMETERS: dict[str, tuple[str, type, str, str]] = {
    "search_web": (
        "query",
        str,
        "What to search for",
        "Search the web; return the best matching answer (slow).",
    ),
    "get_organization": (
        "name",
        str,
        "The organization's full name",
        "Return the director of an organization.",
    ),
    "get_biography": (
        "query",
        str,
        "The person, with a hint of who they are",
        "Return the biography of a person.",
    ),
    "get_population": ("city", str, "City name", "Return the population of a city."),
    "get_weather": ("city", str, "City name", "Return today's weather in a city."),
    "get_exchange_rate": (
        "currency",
        str,
        "Currency code, e.g. USD",
        "Return the exchange rate of a currency to EUR.",
    ),
    "get_page": ("n", int, "Page number, from 1", "Return page n of the tram report."),
}


def _tool(name: str, latency_s: float, log: ToolCallLog) -> BaseTool:
    parameter, kind, about, description = _PARAMETERS[name]
    fields: dict[str, Any] = {parameter: (kind, Field(description=about))}
    schema: type[BaseModel] = create_model(f"{name}_args", **fields)
    answer = _DATA[name]

    async def run(**kwargs: Any) -> str:
        started = time.perf_counter()
        await asyncio.sleep(latency_s)
        result = answer(kwargs[parameter])
        log.runs.append(ToolRun(name, dict(kwargs), started, time.perf_counter()))
        return result

    return StructuredTool.from_function(
        coroutine=run, name=name, description=description, args_schema=schema
    )


def service_tools(log: ToolCallLog, time_scale: float) -> list[BaseTool]:
    """Return every tool of the suite (the web search slow, the others quick)."""
    return [
        _tool(name, (SLOW_S if name == "search_web" else FAST_S) * time_scale, log)
        for name in _PARAMETERS
    ]


Command = Mapping[str, Any]
"""One planned call: `{"purpose", "tool_name", "tool_kwargs", "todo_suggestion"}`."""


@dataclass(frozen=True)
class Task:
    """One scenario: the request, each round's calls, our plans and the answer."""

    name: str
    """Short name, used in the report."""
    request: str
    """The user's request."""
    rounds: Sequence[Sequence[Command]]
    """The tool calls of each round, as `create_agent` makes them."""
    answer: str
    """The final answer of both sides."""
    plans: Sequence[Sequence[Command]] | None = None
    """Our planner's commands, plan by plan, when they differ from `rounds`."""
    expected: Sequence[tuple[str, dict[str, Any]]] = ()
    """The calls the tools must receive, in order (empty: those of `rounds`)."""
    agent_task: str = ""
    """The task whose `create_agent` run is the contender ("": this one)."""

    def plan_texts(self) -> list[str]:
        """Return our planner's replies: one plan per round, then `response`.

        Commands are written as the plan prompt's example writes them: a tool and its
        arguments (a purpose and a todo suggestion are optional, and cost output time).
        """
        plans = self.rounds if self.plans is None else self.plans
        replies = [
            json.dumps(
                {
                    "next_action": "execute",
                    "execution_commands": [
                        {"tool_name": command["tool_name"], "tool_kwargs": command["tool_kwargs"]}
                        for command in commands
                    ],
                }
            )
            for commands in plans
        ]
        return [*replies, str(plan_reply("response"))]

    def agent_turns(self) -> list[AIMessage]:
        """Return `create_agent`'s tool-calling turns, one per round."""
        return tool_call_turns(self.rounds)

    def native_plans(self) -> list[AIMessage]:
        """Return our native planner's replies: one turn of tool calls per plan, then text.

        The tool calls are the plan's commands, references included (`"$1"`); the last
        reply has no tool call, so the loop answers: its text is the answer, as a model
        that has what it needs would write it.
        """
        plans = self.rounds if self.plans is None else self.plans
        return [*tool_call_turns(plans), AIMessage(content=self.answer)]

    def expected_calls(self) -> list[tuple[str, dict[str, Any]]]:
        """Return the calls the tools must receive, in order."""
        if self.expected:
            return list(self.expected)
        return [
            (command["tool_name"], dict(command["tool_kwargs"]))
            for commands in self.rounds
            for command in commands
        ]


def _command(purpose: str, tool: str, kwargs: dict[str, Any], todo: str = "") -> Command:
    return {"purpose": purpose, "tool_name": tool, "tool_kwargs": kwargs, "todo_suggestion": todo}


_CHAIN = [
    [
        _command(
            "find who operates the Lumen Bay tram network",
            "search_web",
            {"query": "operator of the Lumen Bay tram network"},
            "look up the director of that operator",
        )
    ],
    [
        _command(
            "find the director of the operator",
            "get_organization",
            {"name": OPERATOR},
            "read the director's biography",
        )
    ],
    [
        _command(
            "read the director's biography",
            "get_biography",
            {"query": BIOGRAPHY_QUERY},
            "answer with the director and the main facts",
        )
    ],
]
_CHAIN_WITH_REFERENCES = [
    [
        _CHAIN[0][0],
        {**_CHAIN[1][0], "tool_kwargs": {"name": "$1"}},
        {**_CHAIN[2][0], "tool_kwargs": {"query": "${2} (director of ${1})"}},
    ]
]
_CHAIN_ANSWER = (
    f"The Lumen Bay tram network is run by the {OPERATOR}, directed since 2019 by "
    f"{DIRECTOR}, who led the opening of the harbour line and the move to 7-minute "
    "daytime trams."
)

TASKS: tuple[Task, ...] = (
    Task(
        "chat",
        "Write a two-sentence welcome for new passengers of the Lumen Bay trams.",
        [],
        "Welcome aboard the Lumen Bay trams! Tap your card when you board, and enjoy "
        "the harbour views on the way.",
    ),
    Task(
        "fanout",
        "Before my trip to Lumen Bay: population, today's weather, the exchange rate "
        "of the Lumen dollar (LBD) and the latest tram news?",
        [
            [
                _command(
                    "latest tram news",
                    "search_web",
                    {"query": "Lumen Bay tram news"},
                    "summarise the news",
                ),
                _command("population of Lumen Bay", "get_population", {"city": "Lumen Bay"}),
                _command("today's weather", "get_weather", {"city": "Lumen Bay"}),
                _command("LBD to EUR", "get_exchange_rate", {"currency": "LBD"}),
            ]
        ],
        "Lumen Bay has about 412,000 inhabitants; today it is 18 C and dry with a light "
        "west wind; 1 LBD is 0.92 EUR; the harbour line extension opens on 4 May and "
        "night trams start in June.",
    ),
    Task(
        "chain",
        "Who runs the Lumen Bay tram network, and what has its director done?",
        _CHAIN,
        _CHAIN_ANSWER,
    ),
    Task(
        "chainref",
        "Who runs the Lumen Bay tram network, and what has its director done?",
        _CHAIN,
        _CHAIN_ANSWER,
        plans=_CHAIN_WITH_REFERENCES,
        agent_task="chain",
    ),
    Task(
        "long",
        f"Read pages 1 to {LONG_ROUNDS} of the tram report one by one and summarise it.",
        [
            [
                _command(
                    f"read page {n} of the report",
                    "get_page",
                    {"n": n},
                    f"read page {n + 1} next" if n < LONG_ROUNDS else "summarise the report",
                )
            ]
            for n in range(1, LONG_ROUNDS + 1)
        ],
        f"The {LONG_ROUNDS}-page tram report gives ridership and maintenance figures for "
        "every line; ridership grew on each line and maintenance stayed within budget.",
    ),
)
"""The suite's tasks, in the order they are reported."""
