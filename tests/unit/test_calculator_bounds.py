"""The bundled calculator bounds the cost of every operation."""

from __future__ import annotations

import pytest

from agentloop.cli.servers.calculator import MAX_DEPTH, evaluate


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("round(7, -10**9)", "round's precision"),
        ("round(7, 1.5)", "round's precision"),
        ("round(1.5, 10**9)", "round's precision"),
        ("-" * 499 + "1", "nested more than"),
        ("(1+" * 120 + "1" + ")" * 120, "nested more than"),
        ("9**999*9**999*9**999", "too large"),
        ("sqrt(10**1000)", "cannot evaluate"),
    ],
)
def test_hostile_expressions_are_refused(expression: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        evaluate(expression)


def test_bounded_operations_still_work() -> None:
    assert evaluate("round(7, -1)") == 10
    assert evaluate("round(1234.5678, 2)") == 1234.57
    assert evaluate("round(10**1000, -999)") == 10**1000
    assert evaluate("-" * (MAX_DEPTH - 2) + "1") == 1
