"""Every code block of the README and of the documentation site is checked.

Python blocks run and print what their `print(...)  # expected` comments say, and are
formatted as `ruff format` formats them; JSON blocks are valid MCP configs; shell
commands are run by a named test; every other block is text or a picture.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agentloop.mcp import load_mcp_config

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.DOTALL | re.MULTILINE)
LANGUAGES = {"python", "json", "bash", "text", "mermaid"}
"""The blocks a page may hold: checked here (python, json, bash), or shown (text, mermaid)."""

SHELL_COMMANDS_RUN_ELSEWHERE = {
    # the demo command: tests/integration/test_packaging.py::test_demo_command_runs_without_a_key
    "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && python -m agentloop demo",
    # the test command: .ci/run runs exactly this pytest command
    'python3 -m venv .venv && . .venv/bin/activate && pip install -e ".[dev]" '
    "&& python -m pytest tests -q -n auto --dist loadfile",
    # the Studio server: tests/integration/test_studio.py
    'pip install -e ".[dev]" && langgraph dev',
    # the CLI demo: tests/integration/test_cli.py
    "agentloop demo",
}


def fenced(page: Path) -> list[tuple[str, str]]:
    """Each fenced block of a page: its language and its text."""
    return FENCE.findall(page.read_text(encoding="utf-8"))


def blocks(language: str) -> list[pytest.ParameterSet]:
    """Each block of a language in every page, named by its page and its place there."""
    found = []
    for page in PAGES:
        code = [text for lang, text in fenced(page) if lang == language]
        name = page.relative_to(ROOT).as_posix()
        found += [
            pytest.param(page, text, id=f"{name}:{language}{i}") for i, text in enumerate(code)
        ]
    return found


def bash_blocks(page: Path) -> list[str]:
    return [text for lang, text in fenced(page) if lang == "bash"]


def expected_prints(code: str) -> list[str]:
    return [m.strip() for m in re.findall(r"^\s*print\(.*\)\s+#\s*(.+)$", code, re.MULTILINE)]


def test_readme_opens_with_the_two_commands() -> None:
    first, second = bash_blocks(README)[:2]
    assert "python -m agentloop demo" in first
    test_command = second.split("&& ")[-1].strip()
    assert test_command == "python -m pytest tests -q -n auto --dist loadfile"
    ci = (ROOT / ".ci" / "run").read_text()
    assert test_command in ci.splitlines()


def test_getting_started_opens_with_the_same_two_commands() -> None:
    page = ROOT / "docs" / "getting-started.md"
    assert bash_blocks(page)[:2] == bash_blocks(README)[:2]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(ROOT).as_posix())
def test_every_block_is_checked_or_shown(page: Path) -> None:
    languages = {lang for lang, _ in fenced(page)}
    assert languages <= LANGUAGES, f"{page.name}: a block of {languages - LANGUAGES} is unchecked"


@pytest.mark.parametrize(("page", "code"), blocks("python"))
def test_python_blocks_run_and_print_what_they_say(page: Path, code: str) -> None:
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exec(compile(code, str(page), "exec"), {"__name__": "__docs__"})
    for expected in expected_prints(code):
        assert expected in output.getvalue()


@pytest.mark.parametrize(("page", "code"), blocks("python"))
def test_python_blocks_are_formatted(page: Path, code: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--diff", "-"],
        input=code,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert done.returncode == 0, f"ruff format would change a block of {page.name}:\n{done.stdout}"


@pytest.mark.parametrize(("page", "block"), blocks("json"))
def test_json_blocks_are_valid_configs(page: Path, block: str) -> None:
    specs = load_mcp_config(json.loads(block))
    assert specs


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(ROOT).as_posix())
def test_shell_blocks_are_run_by_tests(page: Path) -> None:
    for block in bash_blocks(page):
        for line in block.splitlines():
            command = line.split("#", 1)[0].strip()
            if command:
                assert command in SHELL_COMMANDS_RUN_ELSEWHERE, command
