"""Shared test setup: no test may reach a real model over the network."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agentloop import PlanningOptions
from agentloop.redaction import installed_log_redaction

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


@pytest.fixture(autouse=True)
def _undo_log_redaction() -> Iterator[None]:
    """Log redaction a test installed (`install_log_redaction`) ends with the test."""
    before = logging.getLogRecordFactory()
    yield
    installed = installed_log_redaction()
    if installed is not None and installed is not before:
        installed.uninstall()


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


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "json_only(reason): the test cannot hold in plan_mode='native', for this reason "
        "(it skips there)",
    )


@pytest.fixture(params=["json", "native"])
def plan_mode(request: pytest.FixtureRequest) -> str:
    """The planner's plan mode: tests using it (or `planning_for`) run once per mode.

    Scripts stay JSON plans (`plan_reply`): bound to the loop's tools in native mode,
    `ScriptedChatModel` replies with the equivalent tool calls. A test marked
    `@pytest.mark.json_only("why")` skips in native mode, saying why.
    """
    json_only = request.node.get_closest_marker("json_only")
    if request.param == "native" and json_only is not None:
        pytest.skip(f"native plan mode: {json_only.args[0]}")
    return str(request.param)


@pytest.fixture
def planning_for(plan_mode: str) -> Callable[..., dict[str, Any]]:
    """The one place a loop gets the test's plan mode.

    `create_tool_loop(model, tools, **planning_for(keep_tool_results=2))`: returns the
    `create_tool_loop` keyword arguments that select the plan mode, with planning `fields`.
    """

    def loop_kwargs(**fields: Any) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"plan_mode": plan_mode}
        if fields:
            kwargs["planning"] = PlanningOptions(**fields)
        return kwargs

    return loop_kwargs
