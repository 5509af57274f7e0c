"""The demo agrees with itself: one set of facts on every way in.

The demo loop on the bundled MCP servers (as `agentloop demo` runs it), the same loop
with `use_mcp=False` (as the notebooks and the documentation run it), and every figure the
README, the documentation and the notebooks state about the tram network come from the same
documents.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from agentloop import show_graph
from agentloop.cli.demo import DEMO_QUESTION, build_demo_loop
from agentloop.cli.servers.docsearch import load_documents

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
TRACK = re.compile(r"(\d+(?:\.\d+)?) (?:km|kilometers) of track")


def documented_track_km() -> set[str]:
    return set(TRACK.findall(load_documents()["lumen-bay-tram-network"].text.replace("\n", " ")))


async def test_with_and_without_mcp_the_demo_finds_the_same_figures() -> None:
    answers: dict[bool, dict[str, Any]] = {}
    for use_mcp in (True, False):
        out = await build_demo_loop(use_mcp=use_mcp).ainvoke({"user_input": DEMO_QUESTION})
        answers[use_mcp] = out
    with_mcp, local = answers[True], answers[False]
    assert documented_track_km() == {"42"}
    for out in (with_mcp, local):
        figures = set(TRACK.findall(out["answer"]))
        assert figures == {"42"}, out["answer"]
        assert "10.5" in out["answer"]
        # the question's own lookups only: a search, then the arithmetic
        assert [r["tool_name"] for r in out["tool_logs"]][-1] == "calculate"
        assert not {"get_weather", "save_note"} & {r["tool_name"] for r in out["tool_logs"]}
    assert with_mcp["action_results"]["Compute km per line"]["result"] == 10.5
    assert local["action_results"]["Compute km per line"] == 10.5


@pytest.mark.parametrize(
    "path",
    [
        ROOT / "README.md",
        *sorted((ROOT / "docs").rglob("*.md")),
        *sorted((ROOT / "notebooks").glob("*.ipynb")),
    ],
    ids=lambda path: path.relative_to(ROOT).as_posix(),
)
def test_the_docs_state_the_documented_track_length(path: Path) -> None:
    stated = set(TRACK.findall(path.read_text(encoding="utf-8")))
    assert stated <= documented_track_km(), f"{path.name} states {stated} km of track"


def test_show_graph_is_exported_at_the_top_level() -> None:
    import agentloop.observability.display

    assert show_graph is agentloop.observability.display.show_graph
