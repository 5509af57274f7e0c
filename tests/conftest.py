"""Shared test setup: no test may reach a real model over the network."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest

_REPORT: list[str] = []

_real_connect = socket.socket.connect


def _is_local(address: Any) -> bool:
    if isinstance(address, str):  # AF_UNIX path
        return True
    host = address[0] if isinstance(address, tuple) else address
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _guarded_connect(self: socket.socket, address: Any) -> Any:
    if not _is_local(address):
        msg = f"tests may not open network connections (tried {address!r})"
        raise RuntimeError(msg)
    return _real_connect(self, address)


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)
    yield


@pytest.fixture
def report() -> Callable[[str], None]:
    """Add a line to the figures printed at the end of the test run."""
    return _REPORT.append


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _REPORT:
        terminalreporter.section("figures")
        for line in _REPORT:
            terminalreporter.write_line(line)


@pytest.fixture(params=["invoke", "ainvoke"])
def run_loop(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """Run a graph through `invoke` (in a worker thread) or `ainvoke`: tests using it run twice.

    `await run_loop(graph, payload, config, **kwargs)` returns the graph's output.
    """

    async def run(graph: Any, payload: Any, config: Any = None, **kwargs: Any) -> Any:
        if request.param == "invoke":
            return await asyncio.to_thread(graph.invoke, payload, config, **kwargs)
        return await graph.ainvoke(payload, config, **kwargs)

    run.entry = request.param  # type: ignore[attr-defined]
    return run
