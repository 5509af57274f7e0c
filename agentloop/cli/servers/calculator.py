"""An MCP server that evaluates arithmetic safely, by walking the expression's syntax tree.

Run it over stdio with `python -m agentloop.cli.servers.calculator`.
"""

from __future__ import annotations

import ast
import math
import operator
import time
from collections.abc import Callable
from typing import Any

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

__all__ = ["Calculation", "calculate", "evaluate", "main", "mcp"]

Number = int | float

MAX_EXPRESSION_CHARS = 500
MAX_EXPONENT = 1_000
MAX_INT_BITS = 4_096
"""Integers above about 10**1233 are refused, so no expression can eat the memory."""
MAX_ROUND_DIGITS = 1_300
"""`round`'s precision is limited to this many digits either side of the point (beyond
it every number this calculator holds rounds to itself or 0); Python would compute 10 to
that power first."""
MAX_DEPTH = 100
"""Deepest nesting of operations and calls."""
MAX_EVALUATION_S = 1.0
"""Time limit of one evaluation. Every single operation is bounded by the limits above,
so this is a last line of defence, checked between operations."""

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def _round(value: Number, ndigits: Number | None = None) -> Number:
    if ndigits is not None and (not isinstance(ndigits, int) or abs(ndigits) > MAX_ROUND_DIGITS):
        msg = f"round's precision must be an integer within ±{MAX_ROUND_DIGITS}"
        raise ValueError(msg)
    return round(value) if ndigits is None else round(value, ndigits)


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt,
    "log": math.log,
    "sin": math.sin,
    "cos": math.cos,
    "abs": abs,
    "round": _round,
    "min": min,
    "max": max,
}
_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e}

mcp = FastMCP("agentloop-calculator", log_level="WARNING")


class Calculation(TypedDict):
    """The expression and its value."""

    expression: str
    result: int | float


def _check(value: Any) -> Number:
    if isinstance(value, bool) or not isinstance(value, int | float):
        msg = f"the result is not a real number: {value!r}"
        raise ValueError(msg)
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        msg = "the number is too large"
        raise ValueError(msg)
    if isinstance(value, float) and not math.isfinite(value):
        msg = "the result is not a finite number"
        raise ValueError(msg)
    return value


def _power(base: Number, exponent: Number) -> Number:
    if abs(exponent) > MAX_EXPONENT:
        msg = f"exponents are limited to {MAX_EXPONENT}"
        raise ValueError(msg)
    if isinstance(base, int) and base.bit_length() * exponent > MAX_INT_BITS + 64:
        msg = "the number is too large"
        raise ValueError(msg)
    return _check(operator.pow(base, exponent))


def _depth(tree: ast.AST) -> int:
    """The nesting depth of a syntax tree (without recursion)."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


class _Evaluation:
    """One evaluation, with its deadline."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline

    def __call__(self, node: ast.AST) -> Number:
        if time.monotonic() > self.deadline:
            msg = f"the evaluation took longer than {MAX_EVALUATION_S:g}s"
            raise ValueError(msg)
        return _eval(node, self)


def _eval(node: ast.AST, sub: Callable[[ast.AST], Number]) -> Number:
    if isinstance(node, ast.Constant) and not isinstance(node.value, bool | complex):
        return _check(node.value)
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _check(_UNARY[type(node.op)](sub(node.operand)))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = sub(node.left), sub(node.right)
        if isinstance(node.op, ast.Pow):
            return _power(left, right)
        return _check(_BINARY[type(node.op)](left, right))
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCTIONS
        and not node.keywords
    ):
        args = [sub(arg) for arg in node.args]
        return _check(_FUNCTIONS[node.func.id](*args))
    msg = f"unsupported syntax: {ast.unparse(node)!r}"
    raise ValueError(msg)


def evaluate(expression: str) -> Number:
    """Evaluate an arithmetic expression without `eval`.

    Args:
        expression: Numbers, `+ - * / // % **`, parentheses, the constants `pi`
            and `e`, and the functions sqrt, log, sin, cos, abs, round, min, max.

    Returns:
        The value, an `int` when every step stayed integral.

    Every operation's cost is bounded (the length of the expression, its nesting, the
    size of integers, exponents and `round`'s precision) and so is the evaluation's time.

    Raises:
        ValueError: The expression is too long, too deeply nested, malformed, uses
            anything else, divides by zero, its value is too large or not finite, or
            it takes longer than `MAX_EVALUATION_S`.
    """
    if len(expression) > MAX_EXPRESSION_CHARS:
        msg = f"the expression is longer than {MAX_EXPRESSION_CHARS} characters"
        raise ValueError(msg)
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, RecursionError, MemoryError) as exc:
        msg = f"invalid expression: {getattr(exc, 'msg', None) or 'too complex'}"
        raise ValueError(msg) from None
    if _depth(tree) > MAX_DEPTH:
        msg = f"the expression is nested more than {MAX_DEPTH} levels deep"
        raise ValueError(msg)
    try:
        return _Evaluation(time.monotonic() + MAX_EVALUATION_S)(tree.body)
    except ZeroDivisionError:
        msg = "division by zero"
        raise ValueError(msg) from None
    except (OverflowError, TypeError) as exc:
        msg = f"cannot evaluate: {exc}"
        raise ValueError(msg) from None


@mcp.tool(
    annotations=ToolAnnotations(
        readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False
    )
)
def calculate(expression: str) -> Calculation:
    """Evaluate an arithmetic expression exactly as written.

    Supports numbers, + - * / // % ** (exponents up to 1000), parentheses,
    the constants pi and e, and sqrt, log, sin, cos, abs, round (precision up to
    1300 digits), min, max.

    Args:
        expression: For example "2 * (3 + 4)" or "round(sqrt(2), 3)".
    """
    try:
        result = evaluate(expression)
    except ValueError as error:  # the caller's mistake: its message reaches the model
        raise ToolError(str(error)) from None
    return Calculation(expression=expression, result=result)


def main() -> None:
    """Serve the tool over stdio until the client closes the connection."""
    mcp.run()


if __name__ == "__main__":
    main()
