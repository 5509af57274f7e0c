"""The `agentloop` command: subprocesses for the demo and the errors, in-process for `run`.

`run` needs a chat model; with no network, the in-process tests replace the model the
command resolves with a `ScriptedChatModel`, while the MCP servers stay real subprocesses.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from third_party import own_server

import agentloop.cli.app

# The MCP stdio client takes `sys.stderr` as its servers' default error log when first
# imported: importing it at collection time binds pytest's session capture stream, not
# the stream of one test (closed after that test).
import agentloop.mcp.toolset
from agentloop.cli import main
from agentloop.testing import ScriptedChatModel, plan_reply

pytestmark = pytest.mark.integration

ERROR_PREFIX = "agentloop: error: "
FORCED_TERMINAL = ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")
"""What would make `rich` treat a pipe as a terminal."""
NOT_INHERITED = ("AGENTLOOP_MODEL", *FORCED_TERMINAL)


@pytest.fixture(autouse=True)
def _output_is_not_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in FORCED_TERMINAL:
        monkeypatch.delenv(name, raising=False)


def agentloop_command() -> list[str]:
    """The installed console script, or the module when it is not on this venv's path."""
    script = Path(sys.executable).with_name("agentloop")
    found = str(script) if script.exists() else shutil.which("agentloop")
    return [found] if found else [sys.executable, "-m", "agentloop.cli"]


def cli(*args: str, tmp_path: Path, env: dict[str, str] | None = None) -> Any:
    environment = {k: v for k, v in os.environ.items() if k not in NOT_INHERITED}
    environment.update(env or {})
    return subprocess.run(
        [*agentloop_command(), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=environment,
        check=False,
    )


def module(*args: str, tmp_path: Path) -> Any:
    environment = {k: v for k, v in os.environ.items() if k not in NOT_INHERITED}
    return subprocess.run(
        [sys.executable, "-m", "agentloop.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=environment,
        check=False,
    )


def assert_one_line_error(stderr: str, *needles: str) -> None:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith(ERROR_PREFIX), stderr
    assert "Traceback" not in stderr
    for needle in needles:
        assert needle in lines[0]


# -- subprocesses --------------------------------------------------------------------------


def test_demo_prints_the_answer_and_progress(tmp_path: Path) -> None:
    done = cli("demo", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "10.5" in done.stdout
    assert done.stdout.startswith("Here is what the tools found:")
    # progress and summary go to stderr, one line per event when it is not a terminal
    assert "round 1: planning..." in done.stderr
    assert '  -> calculate({"expression":"42 / 4"}) ...' in done.stderr
    assert any(line.startswith("  ok calculate ") for line in done.stderr.splitlines())
    assert "\r" not in done.stderr and "\x1b" not in done.stderr
    assert "2 rounds, 2 calls, 0 failed" in done.stderr


def test_demo_json_is_one_document_on_stdout(tmp_path: Path) -> None:
    done = cli("demo", "--json", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert set(document) >= {"answer", "rounds", "records", "action_results", "error"}
    assert document["rounds"] == 2
    assert document["error"] is None
    assert "10.5" in document["answer"]
    # the question's own lookups only: no weather, no note it did not ask for
    assert [r["tool_name"] for r in document["records"]] == ["search_documents", "calculate"]
    assert all(r["success"] for r in document["records"])
    assert document["action_results"]["Compute km per line"]["result"] == 10.5


def test_demo_keeps_a_note_only_when_asked(tmp_path: Path) -> None:
    question = "How long is the Lumen Bay tram network, and how many km per line? Keep a note."
    done = cli("demo", "--json", question, tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    records = json.loads(done.stdout)["records"]
    assert [r["tool_name"] for r in records] == ["search_documents", "calculate", "save_note"]
    assert records[-1]["kwargs"]["title"] == "Lumen Bay trams"
    assert records[-1]["kwargs"]["body"] == "42 kilometers of track, 4 lines"


def test_python_dash_m_agentloop_demo_has_real_help(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agentloop", "demo", "--help"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: agentloop demo [-h]")
    assert "--json" in done.stdout and "exit codes:" in done.stdout
    assert done.stderr == ""


def test_demo_quiet_writes_only_the_answer(tmp_path: Path) -> None:
    done = module("demo", "--quiet", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert "10.5" in done.stdout


def test_python_dash_m_agentloop(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agentloop", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0
    assert "exit codes:" in done.stdout
    assert "130  interrupted" in done.stdout
    assert "4    the model stayed unavailable" in done.stdout


def test_run_without_a_model(tmp_path: Path) -> None:
    done = cli("run", "What is 6*7?", tmp_path=tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    assert_one_line_error(done.stderr, "no model", "--model", "AGENTLOOP_MODEL", "agentloop demo")


def json_failure(stdout: str, question: str) -> str:
    """The `error` of a `--json` document that holds the question and nothing else."""
    document = json.loads(stdout)
    assert document["question"] == question
    assert (document["answer"], document["rounds"], document["records"]) == ("", 0, [])
    assert document["error"], document
    return str(document["error"])


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["run", "--json", "What is 6*7?"], 2, "no model"),
        (["run", "--json", "--model", "nosuch:thing", "What is 6*7?"], 2, "nosuch:thing"),
        (["run", "--json", "--model", "x:y", "--mcp-config", "gone.json", "What is 6*7?"], 2,
         "gone.json"),
    ],
    ids=["missing-key", "unknown-model", "missing-config"],
)  # fmt: skip
def test_json_prints_its_document_on_every_failure(
    args: list[str], code: int, needle: str, tmp_path: Path
) -> None:
    done = cli(*args, tmp_path=tmp_path)
    assert done.returncode == code, done.stderr
    assert needle in json_failure(done.stdout, "What is 6*7?")
    assert_one_line_error(done.stderr, needle)


def test_run_with_an_unknown_model(tmp_path: Path) -> None:
    done = module("run", "--model", "nosuch:thing", "q", tmp_path=tmp_path)
    assert done.returncode == 2
    assert_one_line_error(done.stderr, "nosuch:thing")


def test_run_with_a_model_from_the_environment(tmp_path: Path) -> None:
    done = cli("run", "q", tmp_path=tmp_path, env={"AGENTLOOP_MODEL": "nosuch:thing"})
    assert done.returncode == 2
    assert_one_line_error(done.stderr, "nosuch:thing")


def test_run_with_a_missing_config_file(tmp_path: Path) -> None:
    done = module("run", "--model", "x:y", "--mcp-config", "missing.json", "q", tmp_path=tmp_path)
    assert done.returncode == 2
    assert_one_line_error(done.stderr, "missing.json", "not found")


def test_run_with_a_broken_config_file(tmp_path: Path) -> None:
    (tmp_path / "servers.json").write_text('{"mcpServers": {"x": ', encoding="utf-8")
    done = module("run", "--model", "x:y", "--mcp-config", "servers.json", "q", tmp_path=tmp_path)
    assert done.returncode == 2
    assert_one_line_error(done.stderr, "servers.json", "invalid JSON")


def test_usage_errors_are_one_line(tmp_path: Path) -> None:
    done = module("run", "--max-rounds", "many", "q", tmp_path=tmp_path)
    assert done.returncode == 2
    assert_one_line_error(done.stderr, "--max-rounds", "--help")
    done = module("nosuch", tmp_path=tmp_path)
    assert done.returncode == 2
    assert_one_line_error(done.stderr, "nosuch")


# -- in process: the model is scripted, the MCP servers are real ---------------------------


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Make `--model` resolve to a scripted model; returns a setter for its replies."""
    models: list[ScriptedChatModel] = []
    asked: list[str] = []

    def use(*replies: Any) -> list[str]:
        models.append(ScriptedChatModel(list(replies)))
        return asked

    def fake_resolve(name: str) -> ScriptedChatModel:
        asked.append(name)
        return models[-1]

    monkeypatch.setattr(agentloop.cli.app, "resolve_model", fake_resolve)
    monkeypatch.delenv("AGENTLOOP_MODEL", raising=False)
    monkeypatch.chdir(Path(__file__).parent)
    return use


def calc(expression: str, purpose: str = "compute") -> dict[str, Any]:
    return {"purpose": purpose, "tool_name": "calculate", "tool_kwargs": {"expression": expression}}


def test_run_happy_path_with_the_bundled_servers(scripted: Any, capfd: Any) -> None:
    asked = scripted(
        plan_reply("execute", [calc("42 / 4", "km per line")]),
        plan_reply("response"),
        "Each line has 10.5 km of track.",
    )
    code = main(["run", "--model", "fake:model", "How", "long", "is", "each", "line?"])
    captured = capfd.readouterr()
    assert code == 0, captured.err
    assert asked == ["fake:model"]
    assert captured.out == "Each line has 10.5 km of track.\n"
    assert "starting MCP servers: docs, calculator, notes" in captured.err
    assert '  -> calculate({"expression":"42 / 4"}) ...' in captured.err
    assert "1 round, 1 call, 0 failed" in captured.err


def test_run_json_reads_the_model_from_the_environment(
    scripted: Any, capfd: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = scripted(
        plan_reply("execute", [calc("6 * 7")]),
        plan_reply("response"),
        "42",
    )
    monkeypatch.setenv("AGENTLOOP_MODEL", "env:model")
    code = main(["run", "--json", "--max-rounds", "2", "--concurrency", "1", "what is 6*7?"])
    captured = capfd.readouterr()
    assert code == 0, captured.err
    assert asked == ["env:model"]
    document = json.loads(captured.out)
    assert document["answer"] == "42"
    assert document["question"] == "what is 6*7?"
    assert document["rounds"] == 1
    assert document["records"][0]["result"]["result"] == 42
    assert document["action_results"] == {"compute": {"expression": "6 * 7", "result": 42.0}}


def test_run_plan_mode_native_binds_the_servers_tools_to_the_planner(
    scripted: Any, capfd: Any
) -> None:
    scripted(
        plan_reply("execute", [calc("42 / 4")]),  # the planner's tool call, in native mode
        "Each line has 10.5 km of track.",  # its text reply, the answer: one model, no 2nd call
    )
    model = agentloop.cli.app.resolve_model("fake:model")
    code = main(["run", "--model", "fake:model", "--plan-mode", "native", "--json", "km?"])
    captured = capfd.readouterr()
    assert code == 0, captured.err
    document = json.loads(captured.out)
    assert document["answer"] == "Each line has 10.5 km of track."
    assert document["records"][0]["result"]["result"] == 10.5
    planner_tools = [tool["function"]["name"] for tool in model.request_options[0]["tools"]]
    assert "calculate" in planner_tools and "PlanDecision" not in planner_tools
    assert len(model.request_options) == 2  # two planner calls; the second's reply is the answer


def test_run_with_an_mcp_config_replaces_the_bundled_servers(
    scripted: Any, capfd: Any, tmp_path: Path
) -> None:
    config = {
        "mcpServers": {
            "calc": {
                "command": sys.executable,
                "args": ["-m", "agentloop.cli.servers.calculator"],
                "env": {"PYTHONPATH": os.pathsep.join(sys.path)},
            }
        }
    }
    path = tmp_path / "servers.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    scripted(
        plan_reply(
            "execute",
            [
                calc("1 + 1"),
                {"purpose": "docs", "tool_name": "search_documents", "tool_kwargs": {"query": "x"}},
            ],
        ),
        plan_reply("response"),
        "2",
    )
    code = main(["run", "--model", "fake:model", "--mcp-config", str(path), "--json", "1+1?"])
    captured = capfd.readouterr()
    assert code == 0, captured.err
    assert "starting MCP servers: calc" in captured.err
    records = json.loads(captured.out)["records"]
    assert records[0]["success"] is True
    assert records[1]["success"] is False  # search_documents is not offered any more
    assert records[1]["error_type"] == "tool_not_found"


def test_run_exits_1_when_every_tool_call_fails(scripted: Any, capfd: Any) -> None:
    scripted(
        plan_reply("execute", [calc("1 / 0"), calc("2 ** ** 3", "other")]),
        plan_reply("response"),
        "Nothing worked.",
    )
    code = main(["run", "--model", "fake:model", "divide"])
    captured = capfd.readouterr()
    assert code == 1
    assert captured.out == "Nothing worked.\n"
    assert "  ERR calculate: " in captured.err


def test_a_model_failure_is_one_error_line_and_no_answer(scripted: Any, capfd: Any) -> None:
    failure = PermissionError("401 invalid api key")
    scripted(failure, failure, failure, failure, failure, failure)
    code = main(["run", "--model", "fake:model", "hello"])
    captured = capfd.readouterr()
    assert code == 2
    assert captured.out == ""
    error_lines = [line for line in captured.err.splitlines() if line.startswith(ERROR_PREFIX)]
    assert error_lines == [
        f"{ERROR_PREFIX}planner model failed: the model failed (401 invalid api key)"
    ]
    assert captured.err.count("401 invalid api key") == 1
    assert "Traceback" not in captured.err
    assert "answering" not in captured.err  # no progress line as if work went on


def test_version(tmp_path: Path) -> None:
    done = cli("--version", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"agentloop {agentloop.__version__}\n"


def test_an_unexpected_error_is_one_line_unless_verbose(
    monkeypatch: pytest.MonkeyPatch, capfd: Any
) -> None:
    def broken(name: str) -> Any:
        raise RuntimeError("something\nbroke")

    monkeypatch.setattr(agentloop.cli.app, "resolve_model", broken)
    assert main(["run", "--model", "fake:model", "q"]) == 1
    err = capfd.readouterr().err
    assert err.strip().splitlines()[-1] == (
        f"{ERROR_PREFIX}RuntimeError: something broke (run with --verbose for the traceback)"
    )
    assert "Traceback" not in err
    assert main(["run", "--model", "fake:model", "-v", "q"]) == 1
    err = capfd.readouterr().err
    assert "Traceback (most recent call last)" in err
    assert err.strip().splitlines()[-1] == f"{ERROR_PREFIX}RuntimeError: something broke"


def test_run_exits_3_when_a_server_cannot_start(scripted: Any, capfd: Any, tmp_path: Path) -> None:
    path = tmp_path / "servers.yaml"
    path.write_text("mcpServers:\n  ghost:\n    command: /no/such/server-binary\n")
    scripted("unused")
    code = main(["run", "--model", "fake:model", "--mcp-config", str(path), "q"])
    captured = capfd.readouterr()
    assert code == 3
    assert captured.out == ""
    error_lines = [line for line in captured.err.splitlines() if line.startswith(ERROR_PREFIX)]
    assert len(error_lines) == 1
    assert "'ghost'" in error_lines[0]
    assert "could not be started" in error_lines[0]
    assert "Traceback" not in captured.err


def test_interrupt_exits_130(monkeypatch: pytest.MonkeyPatch, capfd: Any) -> None:
    def interrupted(name: str) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(agentloop.cli.app, "resolve_model", interrupted)
    code = main(["run", "--model", "fake:model", "q"])
    assert code == 130
    assert capfd.readouterr().err.strip().endswith(f"{ERROR_PREFIX}interrupted")


def test_quiet_leaves_only_the_answer_even_with_noisy_and_dead_servers(
    scripted: Any, capfd: Any, tmp_path: Path
) -> None:
    config = {
        "mcpServers": {
            "dynamic": own_server("dynamic"),  # writes to stderr when it starts and works
            "late": own_server("wakes_late", str(tmp_path / "never")),  # cannot start
        }
    }
    path = tmp_path / "servers.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    for quiet in (True, False):
        scripted(
            plan_reply("execute", [{"tool_name": "shout", "tool_kwargs": {"text": "hi"}}]),
            plan_reply("response"),
            "HI",
        )
        flags = ["--quiet"] if quiet else []
        code = main(["run", "--model", "fake:model", *flags, "--mcp-config", str(path), "shout"])
        captured = capfd.readouterr()
        assert code == 0, captured.err
        assert captured.out == "HI\n"
        assert "shouting" not in captured.err and "dynamic server starting" not in captured.err
        assert "loop is closed" not in captured.err and "Traceback" not in captured.err
        if quiet:
            assert captured.err == ""
        else:
            assert "agentloop: WARNING: MCP server 'late' is unavailable" in captured.err


def test_verbose_shows_server_stderr_and_unavailable_reasons(
    scripted: Any, capfd: Any, tmp_path: Path
) -> None:
    config = {
        "mcpServers": {
            "dynamic": own_server("dynamic"),  # writes to stderr when it starts and works
            "field": own_server("dies_saying", "missing setting FIELD_API_TOKEN"),
        }
    }
    path = tmp_path / "servers.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    scripted(
        plan_reply("execute", [{"tool_name": "shout", "tool_kwargs": {"text": "hi"}}]),
        plan_reply("response"),
        "HI",
    )
    code = main(["run", "--model", "fake:model", "-v", "--mcp-config", str(path), "shout"])
    captured = capfd.readouterr()
    assert code == 0, captured.err
    assert captured.out == "HI\n"
    assert "[dynamic] dynamic server starting" in captured.err
    assert "[dynamic] shouting 'hi'" in captured.err
    (warning,) = [line for line in captured.err.splitlines() if "'field' is unavailable" in line]
    assert "missing setting FIELD_API_TOKEN" in captured.err.split(warning, 1)[1] or (
        "missing setting FIELD_API_TOKEN" in warning
    )


def test_run_exits_3_with_the_server_stderr_when_no_server_starts(
    scripted: Any, capfd: Any, tmp_path: Path
) -> None:
    config = {"mcpServers": {"field": own_server("dies_saying", "missing setting API_TOKEN")}}
    path = tmp_path / "servers.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    scripted("unused")
    code = main(["run", "--model", "fake:model", "--mcp-config", str(path), "q"])
    captured = capfd.readouterr()
    assert code == 3
    (error,) = [line for line in captured.err.splitlines() if line.startswith(ERROR_PREFIX)]
    assert "'field' could not be started" in error and "missing setting API_TOKEN" in error
    assert captured.err.count("missing setting API_TOKEN") == 1  # the cause is said once


@pytest.mark.parametrize(
    ("question", "tools", "needles"),
    [
        (
            "When was the Glass Lighthouse built?",
            ["search_documents", "read_document"],
            ['"The Glass Lighthouse on Beacon Point was built in 1889."'],
        ),
        (
            "How many containers did the harbor handle per berth?",
            ["search_documents", "read_document", "calculate"],
            ["1.27 million containers", "14 deep-water berths", "1270000 / 14 = about 90714.2857"],
        ),
        ("What's the weather like in Lumen Bay?", ["get_weather"], ["clear, 18 °C in Lumen Bay"]),
        ("Hello!", [], ["Hello! I am the agentloop demo"]),
        ("Who won the 1998 World Cup?", ["search_documents"], ["I found nothing to answer this:"]),
    ],
    ids=["fact", "figures", "weather", "greeting", "unknown"],
)
def test_demo_answers_the_question_it_is_given(
    question: str, tools: list[str], needles: list[str], tmp_path: Path
) -> None:
    done = cli("demo", "--json", question, tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["question"] == question
    assert [record["tool_name"] for record in document["records"]] == tools
    assert all(record["success"] for record in document["records"])
    for needle in needles:
        assert needle in document["answer"]


_IMPORTED_HEAVY = (
    "import sys\n"
    "from agentloop.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('langchain', 'langchain_core',"
    " 'langgraph', 'mcp', 'rich'))\n"
    "print('HEAVY', len(heavy), heavy[:5], file=sys.stderr)\n"
    "raise SystemExit(code)\n"
)


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["run", "--help"], ["bogus"]])
def test_help_version_and_usage_errors_load_no_langchain(args: list[str], tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _IMPORTED_HEAVY, *args],
        capture_output=True, text=True, timeout=60, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert done.returncode == (2 if args == ["bogus"] else 0), done.stderr
    assert "HEAVY 0 []" in done.stderr


def test_ctrl_c_while_the_cli_loads_is_one_line(tmp_path: Path) -> None:
    """SIGINT while the run's imports load: one line, exit 130, no traceback."""
    environment = {k: v for k, v in os.environ.items() if k not in NOT_INHERITED}
    # the SIGINT comes the moment the run starts importing LangGraph, which the CLI
    # itself does not import (whatever the time that takes on this machine)
    loading = subprocess.Popen(
        [sys.executable, "-c", "import os, signal, sys\n"
         "import agentloop.cli as cli\n"
         "sent = []\n"
         "def interrupt(event, args):\n"
         "    if event == 'import' and args[0] == 'langgraph' and not sent:\n"
         "        sent.append(True)\n"
         "        os.kill(os.getpid(), signal.SIGINT)\n"
         "sys.addaudithook(interrupt)\n"
         "raise SystemExit(cli.main(['demo', '--quiet']))"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        env=environment,
    )  # fmt: skip
    _, err = loading.communicate(timeout=60)
    assert loading.returncode == 130, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == "agentloop: error: interrupted"


# The console script's own code (`[project.scripts]`), with a SIGINT sent to itself the
# moment `agentloop.cli` starts importing its parser: Ctrl-C before the CLI has loaded.
_SIGINT_WHILE_IMPORTING = (
    "import os, signal, sys\n"
    "def interrupt(event, args):\n"
    "    if event == 'import' and args[0] == {module!r}:\n"
    "        os.kill(os.getpid(), signal.SIGINT)\n"
    "sys.addaudithook(interrupt)\n"
    "sys.argv = ['agentloop', 'demo', '--quiet']\n"
    "from {entry_module} import {entry_function}\n"
    "sys.exit({entry_function}())\n"
)


@pytest.mark.parametrize("module", ["agentloop.cli", "agentloop.cli.parser"])
def test_ctrl_c_before_the_cli_module_is_imported_is_one_line(module: str, tmp_path: Path) -> None:
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    entry = pyproject.split("[project.scripts]", 1)[1].split('agentloop = "', 1)[1]
    entry_module, entry_function = entry.split('"', 1)[0].split(":")
    code = _SIGINT_WHILE_IMPORTING.format(
        module=module, entry_module=entry_module, entry_function=entry_function
    )
    environment = {k: v for k, v in os.environ.items() if k not in NOT_INHERITED}
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True, text=True, timeout=60, cwd=tmp_path, env=environment, check=False,
    )  # fmt: skip
    assert done.returncode == 130, done.stderr
    assert done.stderr == f"{ERROR_PREFIX}interrupted\n"
    assert done.stdout == ""


# CPython 3.11 marks the process as killed by SIGINT when a KeyboardInterrupt passes
# through code run from text (a dataclass being defined while a module loads), even when
# the command catches it. This sets that mark as the command says it was interrupted,
# as such an interrupt would have.
_MARKED_AS_INTERRUPTED = """
import contextlib, ctypes, sys

class _Marking:
    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        if "interrupted" in text:
            with contextlib.suppress(Exception):
                name = "_Py_UnhandledKeyboardInterrupt"
                ctypes.c_int.in_dll(ctypes.pythonapi, name).value = 1
        return self._stream.write(text)

    def __getattr__(self, name):
        return getattr(self._stream, name)

sys.stderr = _Marking(sys.stderr)
"""


def _with_sitecustomize(tmp_path: Path, code: str) -> dict[str, str]:
    """The environment of a child whose interpreter first runs `code` (as `sitecustomize`)."""
    (tmp_path / "sitecustomize.py").write_text(code, encoding="utf-8")
    environment = {k: v for k, v in os.environ.items() if k not in NOT_INHERITED}
    environment["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(tmp_path), environment.get("PYTHONPATH", "")])
    )
    return environment


def test_ctrl_c_during_a_run_exits_130_under_python_m(tmp_path: Path) -> None:
    environment = _with_sitecustomize(tmp_path, _MARKED_AS_INTERRUPTED)
    running = subprocess.Popen(
        [sys.executable, "-m", "agentloop", "demo"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        env=environment,
    )  # fmt: skip
    assert running.stderr is not None
    first = running.stderr.readline()  # the run has started: its imports are done
    running.send_signal(signal.SIGINT)
    _, err = running.communicate(timeout=60)
    assert running.returncode in (0, 130), (running.returncode, first + err)
    assert "Traceback" not in err


# Loaded by every Python process whose path holds the test's folder: the demo, and its
# bundled MCP servers (their config passes PYTHONPATH on). A server notes its pid, then
# never answers `initialize`, so the demo is held in its MCP start-up until interrupted.
_SERVERS_HANG_AT_START = """
import os, sys, time

if any(arg.startswith("agentloop.cli.servers.") for arg in sys.orig_argv):
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, f"{os.getpid()}.server"), "w") as note:
        note.write(" ".join(sys.orig_argv))
    time.sleep(600)
"""


def _alive(pid: int) -> bool:
    """Whether a process runs (a zombie has ended: only its exit status is left)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    try:
        state = stat.read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_ctrl_c_while_the_mcp_servers_start_is_one_line_and_leaves_no_server(
    tmp_path: Path,
) -> None:
    """SIGINT to the demo's process group while its three servers start: one line, 130."""
    environment = _with_sitecustomize(tmp_path, _SERVERS_HANG_AT_START)
    demo = subprocess.Popen(
        [*agentloop_command(), "demo", "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        env=environment, start_new_session=True,  # its own group, as a terminal's job is
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while len(servers := sorted(tmp_path.glob("*.server"))) < 3:
            assert demo.poll() is None, demo.communicate()
            assert time.monotonic() < deadline, "the servers did not start"
            time.sleep(0.05)
        pids = [int(note.stem) for note in servers]
        assert all(_alive(pid) for pid in pids)
        os.killpg(demo.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the job's group
        out, err = demo.communicate(timeout=60)
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
    assert demo.returncode == 130, err
    assert err == f"{ERROR_PREFIX}interrupted\n"
    assert out == ""
    deadline = time.monotonic() + 10  # an orphan is reaped by whoever adopts it
    while (left := [pid for pid in pids if _alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert left == [], "an MCP server outlived the demo"


def test_json_prints_its_document_on_ctrl_c(tmp_path: Path) -> None:
    """SIGINT while the servers start, with `--json`: the document (error set), exit 130."""
    environment = _with_sitecustomize(tmp_path, _SERVERS_HANG_AT_START)
    demo = subprocess.Popen(
        [*agentloop_command(), "demo", "--json", "--quiet", "How long is the tram network?"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        env=environment, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while len(sorted(tmp_path.glob("*.server"))) < 3:
            assert demo.poll() is None, demo.communicate()
            assert time.monotonic() < deadline, "the servers did not start"
            time.sleep(0.05)
        os.killpg(demo.pid, signal.SIGINT)
        out, err = demo.communicate(timeout=60)
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
    assert demo.returncode == 130, err
    assert err == f"{ERROR_PREFIX}interrupted\n"
    assert json_failure(out, "How long is the tram network?") == "interrupted"


@pytest.mark.parametrize("plan_mode", ["json", "tool", "native"])
def test_the_demo_runs_in_each_plan_mode(plan_mode: str, tmp_path: Path) -> None:
    done = cli("demo", "--json", "--plan-mode", plan_mode, tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["status"] == "ok", document
    assert [r["tool_name"] for r in document["records"]] == ["search_documents", "calculate"]
    assert "10.5" in document["answer"]
