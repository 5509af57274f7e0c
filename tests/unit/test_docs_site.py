"""The README is a short landing page, and the documentation's links and picture hold.

Every relative link of the README and of the pages under docs/ names a file or folder of
the repository (and, with an anchor, a heading of that page, by GitHub's anchors and by
the site's alike); every Mermaid picture of the loop is the graph LangGraph draws.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest
from langchain_core.tools import tool

from agentloop import create_tool_loop
from agentloop.testing import ScriptedChatModel

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
FENCED = re.compile(r"^```.*?^```$", re.DOTALL | re.MULTILINE)
CODE_SPAN = re.compile(r"(`+).*?\1", re.DOTALL)
LINK = re.compile(r"\]\(([^)\s]+)\)")
MERMAID = re.compile(r"^```mermaid\n(.*?)^```$", re.DOTALL | re.MULTILINE)
EDGE = re.compile(r"^\s*(\w+)(?:\(\[\w+\]\))?\s+(-\.->|-->)\s+(\w+)", re.MULTILINE)


def page_id(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def prose(page: Path) -> str:
    """A page without its code: fenced blocks and code spans hold no links."""
    return CODE_SPAN.sub("", FENCED.sub("", page.read_text(encoding="utf-8")))


def headings(page: Path) -> list[str]:
    text = FENCED.sub("", page.read_text(encoding="utf-8"))
    return [m[1] for m in re.finditer(r"^#{1,6} (.+)$", text, re.MULTILINE)]


def site_anchor(heading: str) -> str:
    """The anchor MkDocs (Python-Markdown's `toc`) gives a heading."""
    text = heading.replace("`", "")
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    text = heading.replace("`", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors a link may name: those GitHub and the site give a heading alike."""
    return {site_anchor(h) for h in headings(page)} & {github_anchor(h) for h in headings(page)}


def test_the_readme_is_a_landing_page_of_at_most_250_lines() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    assert "(docs/getting-started.md)" in text and "```mermaid" in text


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_relative_link_names_what_exists(page: Path) -> None:
    for target in LINK.findall(prose(page)):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), f"{page_id(page)} links to {target}, which does not exist"
        assert ROOT in linked.parents or linked == ROOT, f"{target} leaves the repository"
        if anchor:
            assert linked.suffix == ".md", f"{page_id(page)}: {target} has an anchor"
            assert anchor in anchors(linked), f"{page_id(page)}: no heading for {target}"


def test_the_pages_link_to_each_other() -> None:
    readme_links = {
        (README.parent / target.partition("#")[0]).resolve()
        for target in LINK.findall(prose(README))
    }
    assert set(PAGES[1:]) <= readme_links, "the README links to every page of the site"


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def drawn_edges() -> set[tuple[str, str, bool]]:
    graph = create_tool_loop(ScriptedChatModel([]), [add]).get_graph()
    names = {"__start__": "start", "__end__": "finish"}
    return {
        (names.get(edge.source, edge.source), names.get(edge.target, edge.target), edge.conditional)
        for edge in graph.edges
    }


@pytest.mark.parametrize(
    "page", [page for page in PAGES if "```mermaid" in page.read_text()], ids=page_id
)
def test_every_picture_of_the_loop_is_the_drawn_graph(page: Path) -> None:
    (picture,) = MERMAID.findall(page.read_text(encoding="utf-8"))
    shown = {(source, target, arrow == "-.->") for source, arrow, target in EDGE.findall(picture)}
    assert shown == drawn_edges()
