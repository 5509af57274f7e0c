"""The table of stock middleware and decorators is checked against the suite.

Every middleware `langchain.agents.middleware` exports and each of its seven decorators
has a row in the documentation's "Coming from `create_agent`" page
(docs/how-to/create-agent.md), and each row names a test file that exists and runs that
middleware (mentions its name).
"""

from __future__ import annotations

import inspect
from pathlib import Path

import langchain.agents.middleware as stock
import pytest
from langchain.agents.middleware import AgentMiddleware

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "how-to" / "create-agent.md"
TABLE = "\n## Stock middleware and decorators\n"
DECORATORS = (
    "before_agent",
    "before_model",
    "after_model",
    "after_agent",
    "wrap_model_call",
    "wrap_tool_call",
    "dynamic_prompt",
)


def _rows() -> dict[str, str]:
    """The table's rows: the middleware's or decorator's name, and the test file named."""
    text = PAGE.read_text()
    assert text.startswith("# Coming from `create_agent`\n")
    assert TABLE in text, "the table has its section in Coming from `create_agent`"
    lines = text.split(TABLE, 1)[1].split("\n## ", 1)[0].strip().splitlines()
    lines = lines[lines.index(next(line for line in lines if line.startswith("|"))) :]
    rows: dict[str, str] = {}
    for line in lines[2:]:  # after the header and its rule
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        name, test = cells[0].strip("`").removeprefix("@"), cells[-1].strip("`")
        assert name not in rows, f"two rows for {name}"
        rows[name] = test
    return rows


def _stock_middleware() -> list[str]:
    return [
        name
        for name in stock.__all__
        if inspect.isclass(member := getattr(stock, name))
        and issubclass(member, AgentMiddleware)
        and member is not AgentMiddleware
    ]


def test_every_stock_middleware_and_decorator_has_a_row() -> None:
    names = _stock_middleware()
    assert len(names) == 19
    assert set(DECORATORS) <= set(stock.__all__)
    assert set(_rows()) == {*names, *DECORATORS}


@pytest.mark.parametrize("name", [*_stock_middleware(), *DECORATORS])
def test_each_row_names_a_test_file_that_runs_it(name: str) -> None:
    test = _rows()[name]
    path = ROOT / test
    assert test.startswith("tests/") and path.name.startswith("test_"), test
    assert path.is_file(), f"{name}: {test} does not exist"
    assert name in path.read_text(), f"{test} does not mention {name}"
