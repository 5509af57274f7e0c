"""A demo loop that needs no API key: real MCP servers, a rule-based planner, an extractive answer.

Run it with `python -m agentloop.demo ["question"]` (or `agentloop demo ["question"]`).

The planner is a deterministic local chat model that reads the question (and, in later
rounds, the results gathered so far) and picks tools by simple rules:

- greetings, thanks and questions about the assistant need no tool: it responds at once;
- a weather question calls `get_weather` for the city it names;
- arithmetic (`6 * 7`, `12 times 7`, `15% of 80`) calls `calculate`;
- any other question searches the documents (`search_documents`, then `read_document`
  of the best match) or, without the MCP servers, the local fact base (`search_facts`);
- an "X per Y" question searches first, then computes X / Y from the figures found
  (and keeps a note of them when a notes tool is available);
- a question about getting around a named city (trams, ferries, a trip) also checks
  that city's weather.

The answer model quotes the tool results (the best matching sentences, the values) and
says plainly when the tools found nothing.
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

from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph

from agentloop.demo.answer import demo_answer_model
from agentloop.demo.planner import demo_planner
from agentloop.graph import create_tool_loop
from agentloop.servers import bundled_servers_config

__all__ = [
    # the loop
    "DEMO_QUESTION",
    "build_demo_loop",
    "demo_notes_file",
    "main",
    # its parts
    "demo_answer_model",
    "demo_planner",
    "demo_tools",
]

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


# -- the loop -------------------------------------------------------------------------------


def demo_notes_file() -> Path:
    """Where the demo's notes server writes (in the temp folder, not the working dir)."""
    return Path(tempfile.gettempdir()) / "agentloop-demo-notes.jsonl"


def build_demo_loop(
    *,
    use_mcp: bool = True,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    **options: Any,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Build the demo loop on local rule-based models (no API key, no network).

    Args:
        use_mcp: Use the bundled MCP servers (documents, calculator, notes) as real
            subprocesses, plus the local `get_weather`; otherwise only local tools.
        checkpointer: Optional LangGraph checkpointer.
        **options: More `create_tool_loop` options.
    """
    if use_mcp:
        tools: list[BaseTool] = [get_weather]
        options.setdefault("mcp_servers", bundled_servers_config(demo_notes_file()))
    else:
        tools = demo_tools()
    return create_tool_loop(
        demo_planner(),
        tools,
        answer_model=demo_answer_model(),
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
    """Run the demo loop once on a question (default: `DEMO_QUESTION`); print rounds and answer."""
    args = list(sys.argv[1:] if argv is None else argv)
    question = " ".join(args) or DEMO_QUESTION
    print(f"question: {question}\n")
    out = asyncio.run(build_demo_loop().ainvoke({"user_input": question}))
    _print_run(out)
    return 0
