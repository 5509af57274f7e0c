"""Every code block of the README is executed (or, for shell commands, run by a named test)."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest

from agentloop.mcp import load_mcp_config

pytestmark = pytest.mark.integration

README = Path(__file__).resolve().parents[2] / "README.md"
TEXT = README.read_text(encoding="utf-8")
PYTHON = re.findall(r"```python\n(.*?)```", TEXT, re.DOTALL)
JSON = re.findall(r"```json\n(.*?)```", TEXT, re.DOTALL)
BASH = re.findall(r"```bash\n(.*?)```", TEXT, re.DOTALL)

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


def expected_prints(code: str) -> list[str]:
    return [m.strip() for m in re.findall(r"^\s*print\(.*\)\s+#\s*(.+)$", code, re.MULTILINE)]


def test_readme_opens_with_the_two_commands() -> None:
    first, second = BASH[:2]
    assert "python -m agentloop demo" in first
    test_command = second.split("&& ")[-1].strip()
    assert test_command == "python -m pytest tests -q -n auto --dist loadfile"
    ci = (README.parent / ".ci" / "run").read_text()
    assert test_command in ci.splitlines()


@pytest.mark.parametrize("code", PYTHON, ids=[f"python{i}" for i in range(len(PYTHON))])
def test_python_blocks_run_and_print_what_they_say(code: str) -> None:
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exec(compile(code, str(README), "exec"), {"__name__": "__readme__"})
    for expected in expected_prints(code):
        assert expected in output.getvalue()


@pytest.mark.parametrize("block", JSON, ids=[f"json{i}" for i in range(len(JSON))])
def test_json_blocks_are_valid_configs(block: str) -> None:
    specs = load_mcp_config(json.loads(block))
    assert specs


def test_shell_blocks_are_run_by_tests() -> None:
    for block in BASH:
        for line in block.splitlines():
            command = line.split("#", 1)[0].strip()
            if command:
                assert command in SHELL_COMMANDS_RUN_ELSEWHERE, command
