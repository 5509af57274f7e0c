"""A demo loop that needs no API key: real MCP servers, a scripted planner, an extractive answer.

Run it with `python -m agentloop.demo` (or `agentloop demo`).
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph

from agentloop.graph import create_tool_loop
from agentloop.servers import bundled_servers_config
from agentloop.testing import ScriptedChatModel, plan_reply

__all__ = ["DEMO_QUESTION", "build_demo_loop", "demo_notes_file", "demo_tools", "main"]

DEMO_QUESTION = "How long is the Lumen Bay tram network, and how many km per line is that?"

_FACTS = {
    "lumen bay tram": "The Lumen Bay tram network has 4 lines and 37.5 km of track "
    "(city transport report, 2025).",
    "lumen bay harbor": "Lumen Bay harbor handled 1.2 million containers in 2025.",
    "lumen bay festival": "The Lantern Festival of Lumen Bay is held every October since 1898.",
}


@tool
async def search_facts(query: str) -> str:
    """Search a small local fact base and return the best matching fact."""
    await asyncio.sleep(0.05)
    words = set(re.findall(r"\w+", query.lower()))
    scored = sorted(_FACTS.items(), key=lambda item: -len(words & set(item[0].split())))
    best_key, best_fact = scored[0]
    return best_fact if words & set(best_key.split()) else "No matching fact."


@tool
def get_weather(city: str) -> dict[str, Any]:
    """Return today's weather of a city (from a fixed local table)."""
    table = {"lumen bay": {"city": "Lumen Bay", "sky": "clear", "temperature_c": 18}}
    return table.get(city.strip().lower(), {"city": city, "sky": "unknown"})


@tool
def calculate(expression: str) -> float:
    """Evaluate an arithmetic expression with + - * / and parentheses."""
    if not re.fullmatch(r"[\d\s.+\-*/()]+", expression):
        msg = f"unsupported expression: {expression!r}"
        raise ValueError(msg)
    return float(eval(expression, {"__builtins__": {}}, {}))


def demo_tools() -> list[BaseTool]:
    """Return the demo's local tools."""
    return [search_facts, get_weather, calculate]


def _command(purpose: str, tool_name: str, todo: str, **kwargs: Any) -> dict[str, Any]:
    return {
        "purpose": purpose,
        "tool_name": tool_name,
        "tool_kwargs": kwargs,
        "todo_suggestion": todo,
    }


_WEATHER = _command(
    "Check the weather for the trip", "get_weather", "Mention it only briefly.", city="Lumen Bay"
)

_MCP_PLANS = [
    plan_reply(
        "execute",
        [
            _command(
                "Find the tram network's length and number of lines",
                "search_documents",
                "Read the figures, then divide length by lines.",
                query="Lumen Bay tram network lines kilometers",
            ),
            _WEATHER,
        ],
    ),
    plan_reply(
        "execute",
        [
            _command(
                "Compute km per line",
                "calculate",
                "Save the figures, then respond.",
                expression="42 / 4",
            ),
            _command(
                "Keep a note of the figures",
                "save_note",
                "Respond with the figures.",
                title="Lumen Bay trams",
                body="42 km of track, 4 lines",
            ),
        ],
    ),
    plan_reply("response"),
]

_LOCAL_PLANS = [
    plan_reply(
        "execute",
        [
            _command(
                "Find the tram network's size",
                "search_facts",
                "Divide the length by the number of lines.",
                query="Lumen Bay tram network",
            ),
            _WEATHER,
        ],
    ),
    plan_reply(
        "execute",
        [
            _command(
                "Compute km per line",
                "calculate",
                "Respond with the figures.",
                expression="37.5 / 4",
            )
        ],
    ),
    plan_reply("response"),
]


def _round_index(messages: Sequence[BaseMessage]) -> int:
    text = str(messages[-1].content)
    found = re.search(r"round_index: (\d+)", text)
    return int(found.group(1)) if found else 0


def _scripted_planner(plans: Sequence[Any]) -> ScriptedChatModel:
    """A planner that replays `plans[round_index]`, so every run gets the same plans."""

    def plan(messages: list[BaseMessage]) -> str:
        return str(plans[min(_round_index(messages), len(plans) - 1)])

    return ScriptedChatModel(responder=plan, chunk_size=16)


def _extractive_answer(messages: list[BaseMessage]) -> str:
    """Answer by quoting the tool results found in the request."""
    text = str(messages[-1].content)
    found = re.search(r"<action_results>\s*(.*?)\s*</action_results>", text, re.DOTALL)
    if not found:
        return "I can answer without tools: no tool results were needed."
    results = json.loads(found.group(1).replace("<\\/", "</"))
    lines = [
        f"- {purpose}: {json.dumps(value, ensure_ascii=False)}"
        for purpose, value in results.items()
    ]
    return "Here is what the tools found:\n" + "\n".join(lines)


def demo_notes_file() -> Path:
    """Where the demo's notes server writes (in the temp folder, not the working dir)."""
    return Path(tempfile.gettempdir()) / "agentloop-demo-notes.jsonl"


def build_demo_loop(
    *,
    use_mcp: bool = True,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    **options: Any,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Build the demo loop on scripted models (no API key, no network).

    Args:
        use_mcp: Use the bundled MCP servers (documents, calculator, notes) as real
            subprocesses, plus the local `get_weather`; otherwise only local tools.
        checkpointer: Optional LangGraph checkpointer.
        **options: More `create_tool_loop` options.
    """
    answerer = ScriptedChatModel(responder=_extractive_answer, chunk_size=16)
    if use_mcp:
        planner = _scripted_planner(_MCP_PLANS)
        tools: list[BaseTool] = [get_weather]
        options.setdefault("mcp_servers", bundled_servers_config(demo_notes_file()))
    else:
        planner = _scripted_planner(_LOCAL_PLANS)
        tools = demo_tools()
    return create_tool_loop(
        planner,
        tools,
        answer_model=answerer,
        checkpointer=checkpointer,
        name=options.pop("name", "demo_loop"),
        **options,
    )


def _print_run(out: dict[str, Any]) -> None:
    for round_number in range(out["round_state"]["round_index"]):
        print(f"round {round_number + 1}:")
        for record in out["round_state"]["done_plans"]:
            if record.get("round_index") == round_number:
                status = "ok " if record["success"] else "ERR"
                result = json.dumps(record["result"], ensure_ascii=False)
                print(
                    f"  [{status}] {record['tool_name']}({json.dumps(record['kwargs'])})"
                    f" {record.get('duration_ms', 0):.0f} ms -> {result[:100]}"
                )
    print("\nanswer:\n" + out["answer"])


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo loop once and print its rounds and answer."""
    args = list(sys.argv[1:] if argv is None else argv)
    question = " ".join(args) or DEMO_QUESTION
    print(f"question: {question}\n")
    out = asyncio.run(build_demo_loop().ainvoke({"user_input": question}))
    _print_run(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
