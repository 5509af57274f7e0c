"""`show_graph` draws a picture with the system's Graphviz (`dot`), offline."""

from __future__ import annotations

import base64
import os
import shutil

import pytest
from IPython.core.formatters import DisplayFormatter

from agentloop import create_tool_loop, show_graph
from agentloop.testing import ScriptedChatModel

pytestmark = pytest.mark.integration

LOOP_NODES = ("prepare", "plan", "execute", "call_tool", "answer")


def require_graphviz() -> None:
    """CI installs Graphviz (`.ci/run`); elsewhere the picture tests say what is missing."""
    if shutil.which("dot") is None and not os.environ.get("CI"):
        pytest.skip("Graphviz's `dot` is not installed (apt-get install graphviz)")


def test_jupyter_gets_a_picture_beside_the_mermaid_source() -> None:
    require_graphviz()
    loop = create_tool_loop(ScriptedChatModel([]), [], interrupt_before=["execute"])
    diagram = show_graph(loop)
    data, _ = DisplayFormatter().format(diagram)
    assert set(data) == {"image/svg+xml", "image/png", "text/vnd.mermaid", "text/plain"}
    svg = data["image/svg+xml"]
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    for node in LOOP_NODES:
        assert f">{node}</text>" in svg, node
    assert "interrupt before" in svg
    assert base64.b64decode(data["image/png"]).startswith(b"\x89PNG\r\n\x1a\n")
    assert data["text/vnd.mermaid"] == data["text/plain"] == diagram.source
