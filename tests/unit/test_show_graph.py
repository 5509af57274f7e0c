"""`show_graph`: a compiled graph as a Mermaid diagram that Jupyter draws offline."""

from __future__ import annotations

from pathlib import Path

import pytest
from IPython.core.formatters import DisplayFormatter
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph

from agentloop import create_tool_loop
from agentloop.observability.display import MermaidDiagram, show_graph
from agentloop.testing import ScriptedChatModel

SNAPSHOT = Path(__file__).with_name("snapshots") / "tool_loop.mmd"
LOOP_NODES = ("prepare", "plan", "execute", "call_tool", "answer")


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def test_the_diagram_is_the_drawn_graph() -> None:
    diagram = show_graph(create_tool_loop(ScriptedChatModel([]), [add]))
    assert isinstance(diagram, MermaidDiagram)
    assert diagram.source == SNAPSHOT.read_text()
    assert str(diagram) == diagram.source


def test_without_graphviz_jupyter_gets_the_mermaid_mime_type_and_a_text_fallback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", "")  # no `dot` program: no picture, and no error either
    diagram = show_graph(create_tool_loop(ScriptedChatModel([]), [add]))
    data, metadata = DisplayFormatter().format(diagram)
    assert set(data) == {"text/vnd.mermaid", "text/plain"}
    assert data["text/vnd.mermaid"] == diagram.source
    assert data["text/plain"] == diagram.source
    assert metadata == {}


def test_show_graph_is_exported_at_the_top_level() -> None:
    import agentloop

    assert agentloop.show_graph is show_graph
    assert "show_graph" in agentloop.__all__


def test_the_repr_is_short() -> None:
    diagram = MermaidDiagram("graph TD;\n\ta --> b;")
    assert repr(diagram) == "<MermaidDiagram of 2 lines>"


def test_xray_draws_the_loop_inside_the_app_node() -> None:
    builder = StateGraph(MessagesState)
    builder.add_node("agent", create_tool_loop(ScriptedChatModel([]), [add]))
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    app = builder.compile()

    flat = show_graph(app).source
    assert "agent(agent)" in flat
    assert "call_tool" not in flat

    xray = show_graph(app, xray=True).source
    assert "subgraph agent" in xray
    for node in LOOP_NODES:
        assert f"agent\\3a{node}({node})" in xray, node
