"""The official MCP conformance suite's client scenarios, through agentloop and a baseline.

The suite of the installed SDK's protocol: on mcp 1.x `@modelcontextprotocol/conformance`
0.1.16 (pinned in `.ci/conformance`), with `langchain-mcp-adapters` as the baseline; on
mcp 2.x 0.2.0-alpha.12 (protocol 2026-07-28, pinned in `.ci/conformance-2026`), with the
SDK's own `Client` making the same calls as the baseline. Each starts each client
scenario's server and runs `conformance_client.py` against it: once through agentloop's
documented MCP configuration, once through the baseline. Each client is kept warm
(`warm_python.py`: its libraries imported once, a fresh process forked for each
scenario's run). agentloop must pass at least as many scenarios as the baseline and at
least `FLOOR` of them; the per-scenario table is in the figures at the end of the run
either way.

Each client's run is a test of its own, so that under `pytest -n auto` the two run on
different workers at once. Each writes its outcomes to the session's shared temp folder;
whichever finishes second compares them (no test waits for another, so no order of the
workers can stall the run).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from conformance_client import PRELOADED
from warm_python import warm_process

from agentloop.mcp.sdk import MCP_MAJOR

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SUITE_FOLDER, CLIENTS, SCENARIO_COUNT, FLOOR = {
    1: ("conformance", ("agentloop", "adapters"), 26, 24),
    2: ("conformance-2026", ("agentloop", "sdk"), 48, 43),
}[MCP_MAJOR]
"""Per SDK major: the suite's folder in `.ci`, the clients (agentloop, then the baseline),
how many client scenarios the pinned suite has, and how many agentloop must pass."""
SUITE = ROOT / ".ci" / SUITE_FOLDER / "node_modules" / ".bin"
DRIVER = Path(__file__).with_name("conformance_client.py")
SCENARIO_TIMEOUT_MS = 60_000
"""Per scenario and client (the suite's default is 30 s; the machine may be busy)."""
WORKERS = 3
"""Scenarios run side by side (each a process forked from the warm client)."""


def _suite_missing() -> str | None:
    """Why the suite cannot run here, or None."""
    install = f"npm ci --prefix .ci/{SUITE_FOLDER} (see .ci/run)"
    if not (SUITE / "conformance").exists() or not (SUITE / "node").exists():
        return f"the MCP conformance suite is not installed: {install}"
    try:
        version = subprocess.run(
            [str(SUITE / "node"), "--version"], capture_output=True, text=True, timeout=30
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"the Node of .ci/conformance does not run ({error}): {install}"
    major = re.match(r"v(\d+)\.", version)
    if major is None or int(major.group(1)) < 22:
        return f"the conformance suite needs Node 22 or later, found {version or 'none'}: {install}"
    return None


@dataclass(frozen=True)
class Outcome:
    passed: bool
    detail: str


def _env(node_cache: Path | None = None) -> dict[str, str]:
    """The suite's environment; with `node_cache`, Node keeps the suite's compiled code there
    (`NODE_COMPILE_CACHE`), so that each scenario's run does not compile it again."""
    env = dict(os.environ)
    env["PATH"] = f"{SUITE}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    if node_cache is not None:
        env["NODE_COMPILE_CACHE"] = str(node_cache)
    return env


def scenarios() -> list[str]:
    """The suite's client scenarios (`conformance list`)."""
    listed = subprocess.run(
        [str(SUITE / "conformance"), "list"],
        capture_output=True, text=True, env=_env(), timeout=60, check=True,
    ).stdout  # fmt: skip
    client_part = listed.split("Client scenarios", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^\s+-\s+(\S+)", client_part, re.MULTILINE)  # up to the next list


def run_scenario(
    client: str, command: str, scenario: str, out: Path, node_cache: Path | None = None
) -> Outcome:
    """Run one scenario against one client; passed as the suite judges it (its exit code)."""
    out_dir = out / client
    try:
        done = subprocess.run(
            [
                str(SUITE / "conformance"), "client", "--command", command,
                "--scenario", scenario, "--timeout", str(SCENARIO_TIMEOUT_MS),
                "-o", str(out_dir),
            ],
            capture_output=True, text=True, env=_env(node_cache), cwd=out,
            timeout=SCENARIO_TIMEOUT_MS / 1000 + 60,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return Outcome(False, "the suite did not finish")
    failed = [
        _why(check)
        for checks in sorted(out_dir.glob(f"{scenario}-*/checks.json"))
        for check in json.loads(checks.read_text())
        if check.get("status") in ("FAILURE", "WARNING")
    ]
    if "CLIENT TIMED OUT" in done.stderr:
        failed.append("the client timed out")
    if done.returncode != 0 and not failed:
        failed.append(f"the client exited with an error: {done.stderr.strip()[-300:]}")
    return Outcome(done.returncode == 0, "; ".join(failed)[:300])


def _why(check: dict[str, str]) -> str:
    """A failed check in one phrase: its message, with its name unless the message has it."""
    name, message = check.get("name", ""), check.get("errorMessage") or check.get("description")
    return message if message and name in message else f"{name}: {message}"


def table(results: dict[str, dict[str, Outcome]]) -> str:
    width = max(len(scenario) for scenario in results)
    baseline = CLIENTS[1]
    lines = [f"{'scenario':<{width}}  agentloop  {baseline:<8}  (what failed)"]
    for scenario, by_client in results.items():
        marks = [("pass" if by_client[c].passed else "FAIL") for c in CLIENTS]
        why = " | ".join(f"{c}: {by_client[c].detail}" for c in CLIENTS if by_client[c].detail)
        lines.append(f"{scenario:<{width}}  {marks[0]:<9}  {marks[1]:<8}  {why}")
    totals = [sum(by_client[c].passed for by_client in results.values()) for c in CLIENTS]
    lines.append(
        f"passed (mcp {MCP_MAJOR}.x): agentloop {totals[0]} of {len(results)}, "
        f"{baseline} {totals[1]} of {len(results)}"
    )
    return "\n".join(lines)


def _session_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder this test session's processes share (all xdist workers, or the one)."""
    base = tmp_path_factory.getbasetemp()
    # an xdist worker's base is `<the session's base>/<worker name>`
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = shared / "mcp-conformance"
    folder.mkdir(exist_ok=True)
    return folder


def _save(folder: Path, client: str, outcomes: dict[str, Outcome]) -> None:
    """Write one client's outcomes whole (the other client's test may read them any time)."""
    written = folder / f"{client}.json.part"
    written.write_text(json.dumps({name: [o.passed, o.detail] for name, o in outcomes.items()}))
    os.replace(written, folder / f"{client}.json")


def _load(folder: Path, client: str) -> dict[str, Outcome] | None:
    """A client's outcomes, once its test has saved them."""
    saved = folder / f"{client}.json"
    if not saved.exists():
        return None
    return {name: Outcome(*pair) for name, pair in json.loads(saved.read_text()).items()}


def _claim_comparison(folder: Path) -> bool:
    """True for exactly one caller: the test that makes the comparison."""
    try:
        os.close(os.open(folder / "compared", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


@pytest.mark.timeout(1800)  # 26 or 48 runs of a few seconds each; far longer on a busy machine
@pytest.mark.parametrize("client", CLIENTS)
def test_agentloop_passes_as_many_client_scenarios_as_the_baseline(
    client: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    report: Callable[[str], None],
) -> None:
    """Run every client scenario through one client; the later of the two compares.

    With only one of the two selected (`-k`), the run is made and reported, and the
    figures say that nothing was compared.
    """
    missing = _suite_missing()
    if missing is not None:
        if os.environ.get("CI"):  # .ci/run installs it: a CI run without it is a failure
            pytest.fail(missing)
        pytest.skip(missing)
    names = scenarios()
    assert len(names) == SCENARIO_COUNT, names  # the pinned suite's list was read
    folder = _session_folder(tmp_path_factory)
    node_cache = folder / "node-compile-cache"
    warm = warm_process(DRIVER, PRELOADED[client], _env())
    with warm as launch, ThreadPoolExecutor(WORKERS) as pool:
        command = " ".join(shlex.quote(part) for part in [*launch, client])
        ran = pool.map(
            lambda name: run_scenario(client, command, name, tmp_path, node_cache), names
        )
        mine = dict(zip(names, ran, strict=True))
    passed = sum(outcome.passed for outcome in mine.values())
    if client != "agentloop":
        assert passed > 0, mine  # the baseline ran at all
    _save(folder, client, mine)
    if client == "agentloop":
        failed = {name: outcome.detail for name, outcome in mine.items() if not outcome.passed}
        assert passed >= FLOOR, f"agentloop passed {passed} of {len(mine)}: {failed}"
    [other] = [c for c in CLIENTS if c != client]
    theirs = _load(folder, other)
    other_test = request.node.nodeid.replace(f"[{client}]", f"[{other}]")
    if theirs is None:  # its test runs later, or elsewhere, and compares
        if all(item.nodeid != other_test for item in request.session.items):
            report(
                f"MCP conformance: {client} passed {passed} of {len(mine)} "
                f"(not compared: the {other} run was not selected)"
            )
        return
    if not _claim_comparison(folder):  # the other test finished at the same moment
        return
    outcomes = {client: mine, other: theirs}
    results = {name: {c: outcomes[c][name] for c in CLIENTS} for name in names}
    shown = table(results)
    print(shown)
    for line in shown.splitlines():  # in the figures at the end of the run
        report(f"MCP conformance: {line}")
    totals = {c: sum(by_client[c].passed for by_client in results.values()) for c in CLIENTS}
    assert totals[CLIENTS[1]] > 0, shown  # the baseline ran at all
    assert totals["agentloop"] >= totals[CLIENTS[1]], shown
    assert totals["agentloop"] >= FLOOR, shown
