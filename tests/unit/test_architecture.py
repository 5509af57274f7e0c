"""The layout is the architecture: the parts page, the import contracts and the package agree."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "agentloop"
PAGE = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
CONTRACTS = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
    "importlinter"
]["contracts"]


def top_level_parts() -> set[str]:
    """Every module and package at the top of `agentloop/` (its `__init__` aside)."""
    modules = {path.stem for path in PACKAGE.glob("*.py") if path.stem != "__init__"}
    packages = {path.parent.name for path in PACKAGE.glob("*/__init__.py")}
    return modules | packages


def layers_contract() -> dict[str, object]:
    (layers,) = [contract for contract in CONTRACTS if contract["type"] == "layers"]
    return layers


def contract_layers() -> list[list[str]]:
    return [[part.strip() for part in row.split("|")] for row in layers_contract()["layers"]]


def page_layers() -> list[list[str]]:
    """The parts table's rows, top to bottom: the parts of each layer."""
    rows = re.findall(r"^\| (\d+) \| (.+?) \| .+ \|$", PAGE, re.MULTILINE)
    assert [int(number) for number, _ in rows] == list(range(1, len(rows) + 1))
    return [re.findall(r"`([\w.]+)`", parts) for _, parts in rows]


def test_the_top_of_the_package_holds_at_most_ten_modules() -> None:
    modules = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(modules) <= 10, modules


def test_every_top_level_module_and_package_is_a_part_of_the_page_and_the_contracts() -> None:
    in_contracts = {part for row in contract_layers() for part in row}
    in_page = {part for row in page_layers() for part in row}
    assert top_level_parts() == in_contracts == in_page
    assert layers_contract()["exhaustive"] is True


def test_the_page_lists_the_layers_in_the_contracts_order() -> None:
    assert page_layers() == contract_layers()


def test_every_never_rule_is_a_contract_named_on_the_page() -> None:
    forbidden = [contract["name"] for contract in CONTRACTS if contract["type"] == "forbidden"]
    assert forbidden
    for name in forbidden:
        assert f"**{name}**" in PAGE, name
    assert any(contract["type"] == "acyclic_siblings" for contract in CONTRACTS)


@pytest.mark.parametrize(
    "package",
    sorted(path.parent.relative_to(ROOT).as_posix() for path in PACKAGE.glob("*/__init__.py")),
)
def test_every_package_says_what_it_may_import(package: str) -> None:
    docstring = ast.get_docstring(ast.parse((ROOT / package / "__init__.py").read_text()))
    assert docstring, package
    assert "May import" in docstring, package
