"""The bundled servers cannot be stalled or filled by one caller."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentloop.mcp import MCPSessionPool, MCPToolError, load_mcp_config
from agentloop.servers import bundled_servers_config

pytestmark = pytest.mark.integration

HOSTILE_EXPRESSIONS = [
    "round(7, -10**9)",
    "round(7, -10**7)",
    "round(1.5, 10**9)",
    "-" * 499 + "1",
    "(1+" * 120 + "1" + ")" * 120,
    "9**999*9**999*9**999",
    "(10**999)**999",
    "max(" + ",".join(["9**999"] * 40) + ")*9**999",
    "sqrt(10**1000)",
]


@pytest.fixture
async def pool(tmp_path: Path) -> AsyncIterator[MCPSessionPool]:
    config = bundled_servers_config(tmp_path / "notes.jsonl")
    async with MCPSessionPool(load_mcp_config(config)) as pool:
        yield pool


async def test_hostile_expressions_do_not_stall_the_calculator(pool: MCPSessionPool) -> None:
    assert (await pool.call_tool("calculator", "calculate", {"expression": "1+1"}))["result"] == 2

    async def timed(expression: str) -> tuple[str, float]:
        started = time.perf_counter()
        try:
            value = await pool.call_tool("calculator", "calculate", {"expression": expression})
            outcome = str(value["result"])
        except MCPToolError as error:
            outcome = f"error: {error}"
        return outcome, time.perf_counter() - started

    hostile = asyncio.gather(*(timed(expression) for expression in HOSTILE_EXPRESSIONS))
    sums = asyncio.gather(*(timed(f"{i}+2") for i in range(5)))
    hostile_results, sum_results = await asyncio.wait_for(asyncio.gather(hostile, sums), 60)
    assert [outcome for outcome, _ in sum_results] == [str(i + 2) for i in range(5)]
    assert all(outcome.startswith("error") for outcome, _ in hostile_results), hostile_results
    # round(7, -10**9) alone ran for minutes before: every call now ends in seconds at most
    slowest = max(seconds for _, seconds in [*hostile_results, *sum_results])
    assert slowest < 20, hostile_results
