"""A read-only MCP server that searches the documents bundled in `agentloop/cli/servers/data`.

Run it over stdio with `python -m agentloop.cli.servers.docsearch`.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from functools import cache
from importlib.resources import files

try:
    from mcp.server.fastmcp import FastMCP
    from mcp.server.fastmcp.exceptions import ToolError
except ImportError:  # mcp 2.x names it MCPServer
    from mcp.server.mcpserver import MCPServer as FastMCP  # type: ignore[import-not-found, no-redef]
    from mcp.server.mcpserver.exceptions import (  # type: ignore[import-not-found, no-redef, unused-ignore]
        ToolError,
    )
from mcp.types import ToolAnnotations
from typing_extensions import TypedDict

__all__ = [
    "Document",
    "DocumentText",
    "SearchHit",
    "load_documents",
    "main",
    "mcp",
    "read_document",
    "search_documents",
]

TITLE_BONUS = 3
"""Extra score for each query term found in a document's title."""
MAX_LIMIT = 20
SNIPPET_CHARS = 240

_TOKEN = re.compile(r"[a-z0-9]+(?:\.[0-9]+)?")
_STOPWORDS = frozenset((
    "a", "an", "and", "are", "as", "at", "be", "by", "do", "does", "for", "from", "has",
    "have", "how", "in", "is", "it", "its", "of", "on", "or", "the", "to", "was", "what",
    "when", "where", "which", "who", "why", "with",
))  # fmt: skip

mcp = FastMCP("agentloop-docs", log_level="WARNING")
_READ_ONLY = ToolAnnotations(
    readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False
)


@dataclass(frozen=True)
class Document:
    """One bundled document."""

    doc_id: str
    """The file name without `.md`."""
    title: str
    """The first `# ` heading, or the id when there is none."""
    text: str
    """The whole Markdown text."""


class SearchHit(TypedDict):
    """One ranked search result."""

    doc_id: str
    title: str
    score: int
    snippet: str


class DocumentText(TypedDict):
    """A whole document."""

    doc_id: str
    title: str
    text: str


def _stem(token: str) -> str:
    if len(token) > 3 and token.endswith("s") and not token.endswith("ss"):
        return token[:-1]
    return token


def _terms(text: str) -> list[str]:
    return [_stem(t) for t in _TOKEN.findall(text.lower()) if t not in _STOPWORDS]


@cache
def load_documents() -> dict[str, Document]:
    """Read the bundled documents once, keyed by id.

    Returns:
        Every `.md` file of the package's `data` folder, sorted by id.
    """
    documents: dict[str, Document] = {}
    data = files("agentloop.cli.servers") / "data"
    for entry in sorted(data.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".md"):
            continue
        text = entry.read_text(encoding="utf-8")
        doc_id = entry.name.removesuffix(".md")
        heading = next((ln[2:].strip() for ln in text.splitlines() if ln.startswith("# ")), "")
        documents[doc_id] = Document(doc_id=doc_id, title=heading or doc_id, text=text)
    return documents


def _snippet(text: str, terms: set[str]) -> str:
    body = " ".join(ln for ln in text.splitlines() if not ln.startswith("# "))
    body = " ".join(body.split())
    starts = [m.start() for m in _TOKEN.finditer(body.lower()) if _stem(m.group()) in terms]
    start = max(0, starts[0] - SNIPPET_CHARS // 4) if starts else 0
    snippet = body[start : start + SNIPPET_CHARS].strip()
    prefix = "..." if start > 0 else ""
    suffix = "..." if start + SNIPPET_CHARS < len(body) else ""
    return f"{prefix}{snippet}{suffix}"


@mcp.tool(annotations=_READ_ONLY)
def search_documents(query: str, limit: int = 3) -> list[SearchHit]:
    """Search the bundled documents and return the best matches, best first.

    Scoring counts how often each query term appears in a document, plus a
    bonus for terms in its title. Use `read_document` for the full text.

    Args:
        query: Keywords to look for, for example "tram lines airport".
        limit: How many results to return, from 1 to 20.
    """
    if not 1 <= limit <= MAX_LIMIT:
        msg = f"limit must be between 1 and {MAX_LIMIT}, got {limit}"
        raise ToolError(msg)
    terms = set(_terms(query))
    if not terms:
        msg = "query has no searchable words"
        raise ToolError(msg)
    hits: list[SearchHit] = []
    for doc in load_documents().values():
        counts = Counter(_terms(doc.text))
        title_terms = set(_terms(doc.title))
        score = sum(counts[t] for t in terms) + TITLE_BONUS * len(terms & title_terms)
        if score > 0:
            snippet = _snippet(doc.text, terms)
            hits.append(SearchHit(doc_id=doc.doc_id, title=doc.title, score=score, snippet=snippet))
    hits.sort(key=lambda h: (-h["score"], h["doc_id"]))
    return hits[:limit]


@mcp.tool(annotations=_READ_ONLY)
def read_document(doc_id: str) -> DocumentText:
    """Return the full text of one document found by `search_documents`.

    Args:
        doc_id: The `doc_id` of a search result.
    """
    documents = load_documents()
    doc = documents.get(doc_id)
    if doc is None:
        known = ", ".join(documents)
        msg = f"unknown doc_id {doc_id!r}; known ids: {known}"
        raise ToolError(msg)
    return DocumentText(doc_id=doc.doc_id, title=doc.title, text=doc.text)


def main() -> None:
    """Serve the tools over stdio until the client closes the connection."""
    mcp.run()


if __name__ == "__main__":
    main()
