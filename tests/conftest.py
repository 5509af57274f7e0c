"""Shared test setup: no test may reach a real model over the network.

Also what running in parallel (`pytest -n auto`, pytest-xdist) needs: each worker gets a
temp folder and a PostgreSQL database of its own, the figures tests report reach the end
of the run from every worker, and the tests a missing service skipped are summed up in
one line.
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import logging
import os
import socket
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from agentloop import PlanningOptions
from agentloop.observability.redaction import installed_log_redaction

FIGURE = "figure"
"""The `user_properties` name of a figure line (it travels from an xdist worker)."""

SERVICES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    (
        "PostgreSQL",
        ("AGENTLOOP_TEST_POSTGRES_DSN",),
        "starts one on loopback and sets AGENTLOOP_TEST_POSTGRES_DSN",
    ),
    (
        "a PostgreSQL server of the test's own",
        ("PostgreSQL server of its own", "could not start a PostgreSQL server"),
        "runs as root with PostgreSQL installed",
    ),
    (
        "the LangGraph server on PostgreSQL and Redis",
        ("AGENTLOOP_TEST_LANGGRAPH_PG_PYTHON", "redis-server"),
        "installs it with .ci/langgraph-pg",
    ),
    (
        "the node MCP servers",
        ("@modelcontextprotocol/", "node is not installed"),
        "npm ci --prefix .ci/mcp-servers",
    ),
    ("the Python MCP servers", ("mcp-server-",), 'pip install -e ".[dev]"'),
    ("git", ("git is not installed",), "apt-get install git"),
    (
        "the MCP conformance suite",
        ("conformance suite", ".ci/conformance"),
        "npm ci --prefix .ci/conformance",
    ),
    ("Graphviz", ("Graphviz",), "apt-get install graphviz"),
)
"""The services `bash .ci/run` provides: a name, words of the skip reasons that say it is
missing, and how `.ci/run` provides it."""

SPREAD_ONE_BY_ONE = (
    "tests/integration/test_crash_resume.py",
    "tests/integration/test_deploy_resume.py",
    "tests/integration/test_mcp_conformance.py",
    "tests/integration/test_load.py",
)
"""Files whose tests need no module fixture or order among themselves (each its own
subprocesses, thread ids and files; the conformance runs compare through a shared file,
whichever finishes second) and long enough together to be spread over the xdist workers
one by one."""

LONG_FIRST = (
    "tests/integration/test_crash_resume.py::test_random_kills",
    "tests/integration/test_mcp_conformance.py",
    "tests/integration/test_load.py::test_1000_concurrent_runs_rss",
    "tests/integration/test_load.py",
    "tests/integration/test_packaging.py",
    "tests/integration/test_crash_resume.py",
    "tests/integration/test_deploy_resume.py",
    "tests/integration/test_cli_model_errors.py",
    "tests/integration/test_hostile_processes.py",
    "tests/integration/test_studio.py",
)
"""The longest work (a few minutes each on 2 cores), started first so that it does not
end the run alone; the rest follows, the files with the most tests first."""

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
def report(request: pytest.FixtureRequest) -> Callable[[str], None]:
    """Add a line to the figures printed at the end of the test run."""

    def add(line: str) -> None:
        request.node.user_properties.append((FIGURE, line))

    return add


def _missing_service(reason: str) -> tuple[str, str] | None:
    """The service a skip reason says is missing, and how `.ci/run` provides it."""
    for name, words, how in SERVICES:
        if any(word in reason for word in words):
            return name, how
    return None


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print the figures, then fold the skips of missing services into one line."""
    stats = terminalreporter.stats
    figures = [
        str(value)
        for key in ("passed", "failed")
        for report in stats.get(key, [])
        if report.when == "call"
        for name, value in report.user_properties
        if name == FIGURE
    ]
    if figures:
        terminalreporter.section("figures")
        for line in figures:
            terminalreporter.write_line(line)
    skipped = [
        (report, found)
        for report in stats.get("skipped", [])
        if isinstance(report.longrepr, tuple)
        and (found := _missing_service(str(report.longrepr[2]))) is not None
    ]
    if not skipped:
        return
    services = dict(found for _, found in skipped)
    line = (
        f"{len(skipped)} tests need services missing here, which `bash .ci/run` provides: "
        + "; ".join(f"{name} ({how})" for name, how in services.items())
    )
    for report, _ in skipped:  # the short summary (-ra) shows them as this one line
        report.longrepr = (str(Path(__file__)), None, line)
    if "s" not in terminalreporter.reportchars:
        terminalreporter.write_line(line)


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook (the dev extras install it)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: one worker more than the cores the process may use.

    About a third of the suite's time is waiting (on subprocesses, servers, a model
    client's retries, a killed process's restart), during which a worker uses no CPU:
    the extra worker fills those waits, so every core stays busy.
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (cores or 1) + 1


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook (the dev extras install it)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadfile`, with the files of `SPREAD_ONE_BY_ONE` spread test by test.

    Every other file stays on one worker: its module fixtures start once and its tests
    run in order, as without xdist. The work of `LONG_FIRST` is handed out first.
    """
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    def rank(scope: str) -> int:
        starts = [i for i, prefix in enumerate(LONG_FIRST) if scope.startswith(prefix)]
        return starts[0] if starts else len(LONG_FIRST)

    class FileByFile(LoadFileScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return nodeid if path in SPREAD_ONE_BY_ONE else path

        def _assign_work_unit(self, node: Any) -> None:
            if not getattr(self, "_long_first", False):  # once: the queue is complete
                self._long_first = True
                ordered = sorted(self.workqueue.items(), key=lambda unit: rank(unit[0]))
                self.workqueue.clear()
                self.workqueue.update(ordered)
            super()._assign_work_unit(node)

    return FileByFile(config, log)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "json_only(reason): the test cannot hold in plan_mode='native', for this reason "
        "(it skips there)",
    )
    _temp_folder_per_worker()
    _database_per_worker()


def _checkout() -> str:
    """A short name of this checkout (parallel checkouts on one machine do not meet)."""
    return hashlib.sha256(str(Path(__file__).resolve()).encode()).hexdigest()[:8]


def _temp_folder_per_worker() -> None:
    """Give this xdist worker (and the processes it starts) a temp folder of its own.

    The demo and the CLI keep their notes file in the temp folder, under one name: two
    workers running the demo at once would share it.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker:
        return
    folder = Path(tempfile.gettempdir()) / f"agentloop-tests-{_checkout()}-{worker}"
    folder.mkdir(exist_ok=True)
    os.environ["TMPDIR"] = str(folder)
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again


def _database_per_worker() -> None:
    """Point AGENTLOOP_TEST_POSTGRES_DSN at a database of this xdist worker's own.

    Workers share the PostgreSQL server but not its tables, so two savers never create
    the same tables at once. The database is made on first use and kept for the next
    run (named after the checkout, so parallel checkouts do not meet either). Where the
    server does not answer, the DSN stays as it is and the tests say so.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    dsn = os.environ.get("AGENTLOOP_TEST_POSTGRES_DSN", "")
    if not worker or not dsn:
        return
    name = f"agentloop_test_{_checkout()}_{worker}"
    try:
        import psycopg

        with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
            found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
            if found.fetchone() is None:
                conn.execute(f'CREATE DATABASE "{name}"')
    except Exception:  # the tests that need it find out, and say why
        return
    os.environ["AGENTLOOP_TEST_POSTGRES_DSN"] = urlunsplit(urlsplit(dsn)._replace(path=f"/{name}"))


@pytest.fixture(params=["invoke", "ainvoke"])
def run_loop(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """Run a graph through `invoke` (in a worker thread) or `ainvoke`: tests using it run twice.

    `await run_loop(graph, payload, config, **kwargs)` returns the graph's output;
    `await run_loop.stream(graph, payload, config, stream_mode=...)` the list of what the
    run streamed, through `stream` (in a worker thread) or `astream` in the same way.
    """

    async def run(graph: Any, payload: Any, config: Any = None, **kwargs: Any) -> Any:
        if request.param == "invoke":
            return await asyncio.to_thread(graph.invoke, payload, config, **kwargs)
        return await graph.ainvoke(payload, config, **kwargs)

    async def stream(graph: Any, payload: Any, config: Any = None, **kwargs: Any) -> list[Any]:
        if request.param == "invoke":
            return await asyncio.to_thread(lambda: list(graph.stream(payload, config, **kwargs)))
        return [chunk async for chunk in graph.astream(payload, config, **kwargs)]

    run.entry = request.param  # type: ignore[attr-defined]
    run.stream = stream  # type: ignore[attr-defined]
    return run


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
