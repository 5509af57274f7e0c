"""MkDocs hooks: the notebooks of `notebooks/` as pages of the site.

The notebooks live beside the package, not under `docs/`, so they join the site's files
here (mkdocs-jupyter renders them as they are saved, without running them: CI runs them in
`tests/integration/test_notebooks.py`). A page links to a notebook by its path in the
repository (`../../notebooks/01_quickstart.ipynb`), which GitHub follows; the link is
rewritten to the notebook's page of the site before MkDocs checks it.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
NOTEBOOK_LINK = re.compile(r"\]\(([^)\s#]+\.ipynb)(#[^)\s]*)?\)")


@event_priority(100)  # before mkdocs-jupyter, which makes pages of the notebooks it finds
def on_files(files: Files, config: Any) -> Files:
    """Add each notebook as `notebooks/<name>.ipynb` of the site."""
    for notebook in sorted(NOTEBOOKS.glob("*.ipynb")):
        files.append(
            File(
                f"notebooks/{notebook.name}",
                str(ROOT),
                config["site_dir"],
                config["use_directory_urls"],
            )
        )
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """Point a page's links to a notebook of the repository at its page of the site."""
    folder = Path(page.file.abs_src_path).parent
    here = posixpath.dirname(page.file.src_uri) or "."

    def to_site(link: re.Match[str]) -> str:
        target = (folder / link[1]).resolve()
        if target.parent != NOTEBOOKS or not target.is_file():
            return link[0]
        return f"]({posixpath.relpath(f'notebooks/{target.name}', here)}{link[2] or ''})"

    return NOTEBOOK_LINK.sub(to_site, markdown)
