"""A demo loop that needs no API key: real MCP servers, a rule-based planner, an extractive answer.

Run it with `agentloop demo ["question"]` (or `python -m agentloop demo ["question"]`;
`--help` tells the options).

The planner is a deterministic local chat model that reads the question (and, in later
rounds, the results gathered so far) and picks tools by simple rules:

- greetings, thanks and questions about the assistant need no tool: it responds at once;
- a weather question calls `get_weather` for the city it names (a follow-up such as
  "And what is the weather there?" takes the city from the conversation);
- arithmetic (`6 * 7`, `12 times 7`, `15% of 80`) calls `calculate`;
- any other question searches the documents (`search_documents`, then `read_document`
  of the best match) or, without the MCP servers, `search_facts`, which quotes the same
  bundled documents: both ways know one set of facts;
- an "X per Y" question searches first, then computes X / Y from the figures found
  (and keeps a note of them only when the question asks for one).

The answer model quotes the tool results (the best matching sentences, the values) and
says plainly when the tools found nothing.
"""

from __future__ import annotations

import asyncio
import re
import tempfile
from pathlib import Path
from typing import Any

from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph

from agentloop.cli.demo.models import demo_answer_model, demo_planner
from agentloop.cli.demo.questions import _terms
from agentloop.cli.servers import bundled_servers_config, docsearch
from agentloop.graph import create_tool_loop
from agentloop.mcp import MCPToolset
from agentloop.options import ModelOptions

__all__ = [
    # the loop
    "DEMO_QUESTION",
    "build_demo_loop",
    "demo_notes_file",
    # its parts
    "demo_answer_model",
    "demo_planner",
    "demo_tools",
]

DEMO_QUESTION = "How long is the Lumen Bay tram network, and how many km per line is that?"

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9])")


@tool
async def search_facts(query: str) -> str:
    """Search the bundled documents and return the sentences that best match the query."""
    await asyncio.sleep(0.05)
    try:
        hits = docsearch.search_documents(query, limit=1)
    except ValueError:  # no searchable words
        hits = []
    if not hits:
        return "No matching fact."
    text = docsearch.load_documents()[hits[0]["doc_id"]].text
    body = " ".join(line for line in text.splitlines() if not line.startswith("#"))
    sentences = _SENTENCE_END.split(" ".join(body.split()))
    missing, chosen = _terms(query), []
    for _ in range(2):  # the best sentence, then the one with the most words still missing
        covered = [len(missing & _terms(sentence)) for sentence in sentences]
        best = max(range(len(sentences)), key=lambda i: covered[i])
        if not covered[best]:
            break
        chosen.append(best)
        missing -= _terms(sentences[best])
    return " ".join(sentences[i] for i in sorted(chosen)) or "No matching fact."


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


# every demo tool only reads: said once here, not left to name rules or defaults
for _reader in (search_facts, get_weather, calculate):
    _reader.metadata = {**(_reader.metadata or {}), "agentloop": {"read_only": True}}


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
    toolset: MCPToolset | None = None,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    **options: Any,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Build the demo loop on local rule-based models (no API key, no network).

    Args:
        use_mcp: Use the bundled MCP servers (documents, calculator, notes) as real
            subprocesses, plus the local `get_weather`; otherwise only local tools.
        toolset: The bundled servers' toolset to use (default: a new one).
        checkpointer: Optional LangGraph checkpointer.
        **options: More `create_tool_loop` options.
    """
    if use_mcp:
        servers = toolset or MCPToolset(bundled_servers_config(demo_notes_file()))
        tools: list[BaseTool | MCPToolset] = [get_weather, servers]
    else:
        tools = [*demo_tools()]
    return create_tool_loop(
        demo_planner(),
        tools,
        models=ModelOptions(answer_model=demo_answer_model()),
        checkpointer=checkpointer,
        name=options.pop("name", "demo_loop"),
        **options,
    )
