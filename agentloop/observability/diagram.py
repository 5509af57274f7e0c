"""A compiled graph as a picture in every notebook viewer, drawn offline.

`show_graph(loop)` returns a `MermaidDiagram`: the graph's Mermaid source, plus an SVG
and a PNG picture drawn locally by Graphviz (its `dot` program, e.g. Debian's `graphviz`
package, and the `graphviz` Python package of the `notebooks` extra). Jupyter front ends
pick the richest form they can show: JupyterLab and VS Code draw the picture (JupyterLab
4.1+ can also draw the Mermaid source itself), GitHub's notebook viewer and an nbconvert
HTML export show the picture, a terminal shows the Mermaid source. Without Graphviz the
diagram carries the Mermaid source alone. Nothing is fetched from the network.
"""

from __future__ import annotations

import base64
from functools import cached_property
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_core.runnables.graph import Graph
    from langgraph.pregel import Pregel

__all__ = ["MermaidDiagram", "Picture", "draw_picture", "show_graph"]

MERMAID_MIME_TYPE = "text/vnd.mermaid"
"""The MIME type of Mermaid source, which JupyterLab (4.1 and later) draws as a diagram."""

_NODE_STYLE = {
    "shape": "box",
    "style": "rounded,filled",
    "fillcolor": "#f2f0ff",
    "color": "#8c82d9",
    "fontname": "Helvetica",
    "fontsize": "12",
}
_END_STYLE = {"shape": "oval", "style": "filled", "fillcolor": "#bfb6fc", "color": "#8c82d9"}


class Picture:
    """A graph drawn by Graphviz: its SVG text and PNG bytes."""

    def __init__(self, svg: str, png: bytes) -> None:
        self.svg = svg
        """The picture as SVG."""
        self.png = png
        """The picture as PNG."""


def draw_picture(graph: Graph) -> Picture | None:
    """Draw a LangGraph drawable graph with Graphviz, offline.

    Args:
        graph: A drawable graph (`compiled.get_graph()`).

    Returns:
        The picture, or None when Graphviz (the Python package or the `dot` program)
        is not installed or cannot draw it.
    """
    try:
        import graphviz  # type: ignore[import-untyped]
    except ImportError:
        return None
    dot = graphviz.Digraph(
        graph_attr={"rankdir": "TB", "bgcolor": "transparent", "nodesep": "0.4"},
        node_attr=_NODE_STYLE,
        edge_attr={"fontname": "Helvetica", "fontsize": "10", "color": "#555555"},
    )
    ids = {node_id: f"n{number}" for number, node_id in enumerate(graph.nodes)}
    for node_id, node in graph.nodes.items():
        label = node.name
        metadata = node.metadata or {}
        if "__interrupt" in metadata:
            label += f"\n(interrupt {metadata['__interrupt']})"
        style = _END_STYLE if node_id in ("__start__", "__end__") else {}
        dot.node(ids[node_id], label=label.strip("_") or label, **style)
    for edge in graph.edges:
        dot.edge(
            ids[edge.source],
            ids[edge.target],
            label=str(edge.data) if edge.data is not None else "",
            style="dashed" if edge.conditional else "solid",
        )
    try:
        svg = dot.pipe(format="svg", encoding="utf-8")
        png = dot.pipe(format="png")
    except (graphviz.ExecutableNotFound, graphviz.CalledProcessError, OSError):
        return None
    return Picture(str(svg), bytes(png))


class MermaidDiagram:
    """A graph's diagram: Mermaid source, and a picture where Graphviz can draw one.

    Jupyter shows the richest form its front end can render (see the module docstring);
    `str()` and the `text/plain` form are the Mermaid source, which GitHub, VS Code or
    mermaid.live also render.

    Args:
        source: The Mermaid source, e.g. `graph.get_graph().draw_mermaid()`.
        graph: The drawable graph the picture is drawn from (none: no picture).
    """

    def __init__(self, source: str, graph: Graph | None = None) -> None:
        self.source = source
        """The Mermaid source of the diagram."""
        self._graph = graph

    @cached_property
    def picture(self) -> Picture | None:
        """The picture Graphviz draws (drawn once, on first use), or None without it."""
        return draw_picture(self._graph) if self._graph is not None else None

    def __str__(self) -> str:
        return self.source

    def __repr__(self) -> str:
        lines = self.source.count("\n") + 1
        return f"<MermaidDiagram of {lines} lines>"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        """Give Jupyter the picture (SVG and PNG), the Mermaid diagram and its text form."""
        bundle: dict[str, str] = {}
        picture = self.picture
        if picture is not None:
            bundle["image/svg+xml"] = picture.svg
            bundle["image/png"] = base64.b64encode(picture.png).decode("ascii")
        bundle[MERMAID_MIME_TYPE] = self.source
        bundle["text/plain"] = self.source
        return bundle


def show_graph(graph: Pregel[Any, Any, Any, Any], *, xray: bool | int = False) -> MermaidDiagram:
    """Draw a compiled graph as a diagram, without any network access.

    Args:
        graph: A compiled graph, such as the one `create_tool_loop` returns, or any app
            built with `StateGraph(...).compile()`.
        xray: Draw the nodes of subgraphs inside the nodes that run them: `True` for
            every level, or how many levels deep.

    Returns:
        A diagram that renders as the last expression of a notebook cell (or through
        `IPython.display.display`) as a picture; `str()` gives its Mermaid source.

    Example:
        ```python
        show_graph(create_tool_loop(model, tools))
        ```
    """
    drawable = graph.get_graph(xray=xray)
    return MermaidDiagram(drawable.draw_mermaid(), drawable)
