"""The notebooks: committed without outputs, free of checks, and run in a kernel.

Each notebook runs once, top to bottom; the tests then read what it showed (the text of
its cells, its diagrams, its reports), so what the notebooks teach is what is checked.
"""

from __future__ import annotations

import ast
import base64
import json
import os
import re
import shutil
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import pytest
from ipykernel.kernelspec import install as install_kernelspec
from jupyter_client.kernelspec import KernelSpecManager
from nbclient import NotebookClient

pytestmark = pytest.mark.integration

NOTEBOOKS_DIR = Path(__file__).resolve().parents[2] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
NOTEBOOK_IDS = [path.name for path in NOTEBOOKS]
KERNEL_NAME = "python3"
MERMAID = "text/vnd.mermaid"
LOOP_NODES = ("prepare", "plan", "execute", "call_tool", "answer")


@dataclass(frozen=True)
class Executed:
    """A notebook after its run: the outputs of each code cell, by cell id."""

    name: str
    outputs: dict[str, list[Any]]
    notebook: Any
    """The executed notebook (nbformat), outputs included."""

    def _outputs(self, cell_id: str) -> list[Any]:
        assert cell_id in self.outputs, f"{self.name} has no code cell {cell_id}"
        return self.outputs[cell_id]

    def stdout(self, cell_id: str) -> str:
        """Return what the cell printed."""
        return "".join(
            output["text"]
            for output in self._outputs(cell_id)
            if output["output_type"] == "stream" and output["name"] == "stdout"
        )

    def lines(self, cell_id: str) -> list[str]:
        """Return what the cell printed, line by line."""
        return self.stdout(cell_id).splitlines()

    def field(self, cell_id: str, label: str) -> str:
        """Return the rest of the one printed line that starts with `label: `."""
        found = [line for line in self.lines(cell_id) if line.startswith(f"{label}: ")]
        assert len(found) == 1, f"{self.name} {cell_id}: {label!r} in {self.lines(cell_id)}"
        return found[0][len(label) + 2 :]

    def shown(self, cell_id: str, mime_type: str) -> str:
        """Return the cell's displayed result in one MIME type."""
        data = [
            output["data"][mime_type]
            for output in self._outputs(cell_id)
            if output["output_type"] in ("execute_result", "display_data")
            and mime_type in output["data"]
        ]
        assert len(data) == 1, f"{self.name} {cell_id} shows {len(data)} {mime_type} outputs"
        return str(data[0])


def _parse(source: str, name: str) -> ast.Module:
    flags = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT  # cells may await
    tree = compile(source, name, "exec", flags=flags)
    assert isinstance(tree, ast.Module)
    return tree


def _code_cells(path: Path) -> list[Any]:
    notebook = nbformat.read(path, as_version=4)
    return [cell for cell in notebook.cells if cell.cell_type == "code"]


def _shows_a_graph(cell: Any) -> bool:
    """Whether the cell's last statement is a `show_graph(...)` expression."""
    body = _parse(cell.source, cell.id).body
    if not body or not isinstance(body[-1], ast.Expr):
        return False
    call = body[-1].value
    return (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Name)
        and call.func.id == "show_graph"
    )


def assert_draws_the_loop(mermaid: str) -> None:
    assert "graph TD;" in mermaid
    for node in LOOP_NODES:
        assert f"\t{node}({node}" in mermaid, node
    for edge in ("plan -.-> execute", "plan -.-> answer", "call_tool --> plan"):
        assert edge in mermaid, edge


# -- running the notebooks -----------------------------------------------------------


@pytest.fixture(scope="module")
def this_interpreter_kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Make the "python3" kernel run this interpreter, whatever kernels are installed.

    The kernel spec is written under a temporary prefix, whose `share/jupyter` goes first
    in `JUPYTER_PATH`, so a user-wide or system-wide "python3" spec pointing at another
    interpreter (one without agentloop) cannot be picked instead.
    """
    prefix = tmp_path_factory.mktemp("kernel-prefix")
    install_kernelspec(kernel_name=KERNEL_NAME, prefix=str(prefix))
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("JUPYTER_PATH", str(prefix / "share" / "jupyter"))
        spec = KernelSpecManager().get_kernel_spec(KERNEL_NAME)
        assert spec.argv[0] == sys.executable
        yield KERNEL_NAME


@pytest.fixture(scope="module")
def executed(
    this_interpreter_kernel: str, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], Executed]:
    """Run a notebook (once per module) and return what its cells showed."""
    runs: dict[str, Executed | Exception] = {}

    def run(name: str) -> Executed:
        if name not in runs:
            notebook = nbformat.read(NOTEBOOKS_DIR / name, as_version=4)
            client = NotebookClient(
                notebook,
                timeout=600,
                kernel_name=this_interpreter_kernel,
                resources={"metadata": {"path": str(tmp_path_factory.mktemp("run"))}},
            )
            # The kernel inherits PYTEST_CURRENT_TEST, so ipykernel gives it a sys.stderr
            # without a file descriptor, as Jupyter does on some platforms: MCP servers
            # must cope.
            try:
                client.execute()  # raises CellExecutionError, with the failing cell
            except Exception as error:
                runs[name] = error
            else:
                runs[name] = Executed(
                    name,
                    {
                        cell.id: list(cell.get("outputs", []))
                        for cell in notebook.cells
                        if cell.cell_type == "code"
                    },
                    notebook,
                )
        result = runs[name]
        if isinstance(result, Exception):
            raise result
        return result

    return run


# -- every notebook ------------------------------------------------------------------


def test_there_are_notebooks() -> None:
    assert len(NOTEBOOKS) >= 5


@pytest.mark.parametrize("path", NOTEBOOKS, ids=NOTEBOOK_IDS)
def test_notebook_is_committed_without_outputs(path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code_cells
    for cell in code_cells:
        assert cell.get("outputs") == [], f"{path.name}: cell {cell.get('id')} has outputs"
        assert cell.get("execution_count") is None, f"{path.name}: cell {cell.get('id')} ran"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=NOTEBOOK_IDS)
def test_notebook_cells_teach_rather_than_check(path: Path) -> None:
    # checks live in this file; graphs are shown as diagrams, not printed as Mermaid text
    for cell in _code_cells(path):
        for node in ast.walk(_parse(cell.source, cell.id)):
            assert not isinstance(node, ast.Assert), f"{path.name} {cell.id}: an assert"
            assert not (isinstance(node, ast.Attribute) and node.attr == "draw_mermaid"), (
                f"{path.name} {cell.id}: use show_graph(graph)"
            )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=NOTEBOOK_IDS)
def test_notebook_runs_top_to_bottom_quietly(
    path: Path, executed: Callable[[str], Executed]
) -> None:
    run = executed(path.name)
    for cell_id, outputs in run.outputs.items():
        kinds = [
            output.get("name", output["output_type"])
            for output in outputs
            if output["output_type"] == "error"
            or (output["output_type"] == "stream" and output["name"] == "stderr")
        ]
        assert kinds == [], f"{path.name} {cell_id}: {outputs}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=NOTEBOOK_IDS)
def test_notebook_shows_each_graph_as_a_diagram(
    path: Path, executed: Callable[[str], Executed]
) -> None:
    graph_cells = [cell.id for cell in _code_cells(path) if _shows_a_graph(cell)]
    assert graph_cells, f"{path.name} shows no graph"
    run = executed(path.name)
    for cell_id in graph_cells:
        mermaid = run.shown(cell_id, MERMAID)
        assert "graph TD;" in mermaid
        assert run.shown(cell_id, "text/plain") == mermaid  # the text fallback
        if has_graphviz():
            assert "<svg" in run.shown(cell_id, "image/svg+xml")  # a picture everywhere
            assert run.shown(cell_id, "image/png")


def has_graphviz() -> bool:
    """Whether `dot` is installed; CI installs it (`.ci/run`), so there it must be."""
    return shutil.which("dot") is not None or bool(os.environ.get("CI"))


def test_an_html_export_shows_the_graph_as_a_picture(
    executed: Callable[[str], Executed],
) -> None:
    if not has_graphviz():
        pytest.skip("Graphviz's `dot` is not installed (apt-get install graphviz)")
    from nbconvert import HTMLExporter

    run = executed("01_quickstart.ipynb")
    page, _ = HTMLExporter().from_notebook_node(run.notebook)
    # nbconvert shows no text/vnd.mermaid: the graph is there as the SVG picture, embedded
    pictures = [
        base64.b64decode(data).decode()
        for data in re.findall(r'src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)"', page)
    ]
    drawn = [svg for svg in pictures if all(f">{node}</text>" in svg for node in LOOP_NODES)]
    assert len(drawn) == 1, f"{len(pictures)} SVG pictures, none of the loop"


# -- what each notebook shows ----------------------------------------------------------

QUICKSTART_ANSWER = (
    "Lumen Bay (412,000 people) is larger than Port Aster (96,500); "
    "it has about 7,067 inhabitants per km² (412,000 / 58.3 km²)."
)


def test_quickstart(executed: Callable[[str], Executed]) -> None:
    run = executed("01_quickstart.ipynb")
    assert_draws_the_loop(run.shown("nb01-05", MERMAID))

    assert run.lines("nb01-07") == [QUICKSTART_ANSWER]

    # round_state: two rounds, three successful calls, in command order
    assert run.lines("nb01-09") == [
        "rounds executed: 2",
        "round 1, call 1: get_population({'city': 'Lumen Bay'}) -> 412000 "
        "[success=True, attempts=1]",
        "round 1, call 2: get_area({'city': 'Lumen Bay'}) -> 58.3 [success=True, attempts=1]",
        "round 2, call 1: get_population({'city': 'Port Aster'}) -> 96500 "
        "[success=True, attempts=1]",
        "last round: ['Port Aster population']",
    ]

    # action_results, keyed by purpose, and the answer as the last message
    action_results, last_message = run.lines("nb01-11")
    assert ast.literal_eval(action_results) == {
        "Lumen Bay population": 412_000,
        "Lumen Bay area": 58.3,
        "Port Aster population": 96_500,
    }
    assert last_message == f"AIMessage: {QUICKSTART_ANSWER}"

    report = run.shown("nb01-13", "text/plain")
    assert report.startswith("2 rounds, 3 calls, 0 failed")
    assert "get_area" in run.shown("nb01-13", "text/html")

    # progress events, then the answer's tokens
    *events, blank, streamed = run.lines("nb01-15")
    kinds = [event.split()[0] for event in events]
    assert kinds[0] == "round_started"
    assert kinds[-1] == "answer_completed"
    assert kinds.count("tool_completed") == 3
    assert blank == ""
    pieces = re.fullmatch(r"answer, streamed in (\d+) pieces: (.*)", streamed)
    assert pieces is not None, streamed
    assert int(pieces[1]) > 1
    assert pieces[2] == QUICKSTART_ANSWER


def test_step_through(executed: Callable[[str], Executed]) -> None:
    run = executed("02_step_through.ipynb")
    mermaid = run.shown("nb02-01", MERMAID)
    assert_draws_the_loop(mermaid)
    assert "execute(execute<hr/><small><em>__interrupt = before</em></small>)" in mermaid

    # stopped before round 1 runs, with round 1's plan
    assert run.field("nb02-03", "next") == "('execute',)"
    assert run.field("nb02-03", "rounds done") == "0"
    planned = [line for line in run.lines("nb02-03") if line.startswith("- ")]
    assert [line.split("(")[0] for line in planned] == ["- search_facts"]  # nothing unrelated

    # resumed: round 1 ran, and it stops before round 2
    assert run.field("nb02-05", "next") == "('execute',)"
    assert run.field("nb02-05", "rounds done") == "1"
    assert run.lines("nb02-05")[2].startswith("- calculate({'expression': '42 / 4'}): ")

    # the edited plan ran, and the run finished
    assert run.lines("nb02-07")[:2] == [
        "calculate({'expression': '42 * 1000 / 4'}) -> 10500.0",
        "next: ()",
    ]

    # every kind of writer appears in the history
    sources = {
        match[1]
        for line in run.lines("nb02-09")
        if (match := re.fullmatch(r"step +-?\d+ (\w+) +next=.*", line))
    }
    assert sources == {"input", "loop", "update"}

    # replay from the checkpoint before round 2: the original plan
    checkpoint = run.field("nb02-11", "checkpoint")
    assert run.field("nb02-11", "its plan") == "{'expression': '42 / 4'}"
    assert run.field("nb02-11", "replayed round 2") == "10.5"
    assert run.field("nb02-11", "rounds done") == "2"

    # fork from the same checkpoint, with another plan; the thread now ends there
    assert run.field("nb02-13", "the fork's parent") == checkpoint
    assert run.field("nb02-13", "forked round 2") == "8.4"
    assert run.field("nb02-13", "the thread's latest answer is the fork's") == "True"

    # round 1 ran once for all three branches
    branches = dict(line.split(" ", 1) for line in run.lines("nb02-15"))
    assert set(branches) == {"edited", "replayed", "forked"}
    call_ids = [ast.literal_eval(ids) for ids in branches.values()]
    assert len(call_ids[0]) == 1
    assert call_ids[0] == call_ids[1] == call_ids[2]


def test_compose(executed: Callable[[str], Executed]) -> None:
    run = executed("03_compose.ipynb")
    app = run.shown("nb03-03", MERMAID)
    for line in ("greet(greet)", "agent(agent)", "polish(polish)"):
        assert f"\t{line}\n" in app, line
    for edge in ("__start__ -.-> agent", "__start__ -.-> greet", "agent --> polish"):
        assert edge in app, edge

    # a greeting never reaches the loop; a question goes through it, then `polish`
    assert run.lines("nb03-05") == ["Hello! Ask me about Lumen Bay."]
    assert run.stdout("nb03-07") == (
        "human: How long is each tram line?\n"
        "ai: calls search_facts({'query': 'Lumen Bay tram network'})\n"
        "tool: Lumen Bay has a tram network of 4 lines and 61 stops, with 42 kilometers "
        "of track.\n"
        "ai: calls calculate({'expression': '42 / 4'})\n"
        "tool: 10.5\n"
        "ai: The 4 tram lines share 42 km of track: 10.5 km per line.\n"
        "\n"
        "— Lumen Bay city desk\n"
    )

    assert_draws_the_loop(run.shown("nb03-09", MERMAID))

    # the sub-agent's progress reaches the parent's stream
    agent_lines = [line for line in run.lines("nb03-11") if line.startswith("research_agent: ")]
    assert agent_lines[0] == "research_agent: agent_started"
    assert agent_lines[-1] == "research_agent: agent_completed"
    summary = ast.literal_eval(run.field("nb03-11", "sub-agent summary"))
    assert summary["success"] is True
    assert summary["rounds"] == 1
    assert summary["tool_calls"] == 2
    assert run.field("nb03-11", "sub-agent answer, the tool result") == (
        "4 lines, 42 km of track: 10.5 km per line."
    )

    # usage per agent, the sub-agent's rolled up into the parent's
    usage = {
        name: ast.literal_eval(value)
        for name, value in (line.split(" ", 1) for line in run.lines("nb03-13"))
    }
    assert set(usage) == {"coordinator", "researcher"}
    assert usage["researcher"]["model_calls"] == 3
    assert usage["researcher"]["input_tokens"] == summary["input_tokens"]

    assert run.shown("nb03-14", "text/plain").startswith("1 round, 2 calls, 0 failed")


_REPORT_ROW = re.compile(
    r" *(?P<round>\d+) +(?P<index>\d+) +(?P<tool>\S+) .* (?P<ok>ok|ERR) +\d+ +\d+ +(?P<rest>.*)"
)


def _report_rows(text: str) -> list[dict[str, str]]:
    """Return the rows of the calls table of `RunReport.to_text()`."""
    return [
        match.groupdict() for line in text.splitlines() if (match := _REPORT_ROW.fullmatch(line))
    ]


def test_mcp_tools(executed: Callable[[str], Executed]) -> None:
    run = executed("04_mcp_tools.ipynb")
    servers = [line.split()[0] for line in run.lines("nb04-01")]
    assert servers == ["docs", "calculator", "notes"]

    # the tools' annotations, and the policies derived from them
    tools = {}
    for line in run.lines("nb04-03"):
        server, name, *flags = line.replace("->", "").split()
        tools[name] = dict(flag.split("=") for flag in flags) | {"server": server}
    assert {"search_documents", "read_document", "calculate", "save_note", "list_notes"} <= set(
        tools
    )
    assert tools["search_documents"]["readOnly"] == "True"
    assert tools["save_note"]["destructive"] == "True"
    assert tools["save_note"]["idempotent"] == "False"

    assert_draws_the_loop(run.shown("nb04-05", MERMAID))

    # search and compute in round 1, save the note alone in round 2: all succeed
    report = run.stdout("nb04-06")
    assert report.startswith("2 rounds, 3 calls, 0 failed")
    rows = _report_rows(report)
    assert [(row["round"], row["tool"], row["ok"]) for row in rows] == [
        ("1", "search_documents", "ok"),
        ("1", "calculate", "ok"),
        ("2", "save_note", "ok"),
    ]
    assert rows[0]["rest"].strip() not in ("", "[]"), "the document search found something"
    assert report.rstrip().endswith(
        "The tram network has 42 km of track on 4 lines: 10.5 km per line (noted)."
    )

    assert run.shown("nb04-08", "text/plain").startswith("2 rounds, 3 calls, 0 failed")
    demo_calls = [line.split()[2:] for line in run.lines("nb04-09")]
    assert demo_calls == [  # what the question asks for, a note included, and nothing else
        ["search_documents", "success=True"],
        ["calculate", "success=True"],
        ["save_note", "success=True"],
    ]

    # both runs saved a note in the notes file
    notes = [json.loads(line) for line in run.lines("nb04-11")]
    assert [note["title"] for note in notes] == ["Trams", "Lumen Bay trams"]


def test_governance(executed: Callable[[str], Executed]) -> None:
    run = executed("05_governance.ipynb")

    # retries: a flaky idempotent tool succeeds on its third attempt
    events = ast.literal_eval(run.field("nb05-03", "tool events"))
    assert events.count("tool_retry") == 2
    assert events[-1] == "tool_completed"
    assert run.field("nb05-03", "retried after attempts") == "[1, 2]"
    assert run.lines("nb05-03")[2] == "success=True result=1.08 attempts=3"
    assert run.field("nb05-03", "calls of the tool") == "3"

    assert_draws_the_loop(run.shown("nb05-05", MERMAID))

    # timeouts: a tool with side effects runs exactly once
    assert "tool_retry" not in ast.literal_eval(run.field("nb05-07", "tool events"))
    assert "success=False attempts=1" in run.lines("nb05-07")
    assert run.field("nb05-07", "error_type") == "unknown_outcome"
    assert run.field("nb05-07", "calls of the tool") == "1"

    # a duplicate query is not run again, and its round is rolled back
    rolled_back = [line for line in run.lines("nb05-09") if line.startswith("rolled back: ")]
    assert len(rolled_back) == 1
    assert run.field("nb05-09", "rollbacks") == "1"
    assert run.field("nb05-09", "duplicate") == "[True]"
    assert run.field("nb05-09", "rounds counted") == "1"
    assert run.field("nb05-09", "calls of the tool") == "1"
    assert "1 rolled back" in run.shown("nb05-09", "text/plain").splitlines()[0]

    # arguments: one coerced, one refused before the tool
    coerced = run.field("nb05-11", "coerced")
    assert coerced.startswith("{'number': 3} ")
    assert coerced.endswith(" -> page 3: the harbor")
    assert run.field("nb05-11", "invalid").startswith("success=False invalid_arguments - ")
    assert run.field("nb05-11", "pages the tool read") == "[3]"

    # an audit log put first sees the call a later middleware refused, as refused
    audited = [line.split() for line in run.lines("nb05-13")[:2]]
    assert [line[0] for line in audited] == ["get_note", "delete_note"]
    assert audited[0][-1] == "success=True"
    assert audited[1][-2:] == ["success=False", "refused"]
    assert run.field("nb05-13", "delete_note record") == "False refused"
    assert run.field("nb05-13", "delete_note error") == "deleting is disabled in this app"
    assert run.field("nb05-13", "delete_note attempts") == "0"  # refused: never run

    # caching across runs of one compiled loop
    assert run.lines("nb05-15") == [
        "first: from_cache=False attempts=1 result='lantern: 3.20 EUR'",
        "second: from_cache=True attempts=0 result='lantern: 3.20 EUR'",
        "calls of the tool: 1",
    ]


def test_create_agent(executed: Callable[[str], Executed]) -> None:
    run = executed("06_create_agent.ipynb")
    assert_draws_the_loop(run.shown("nb06-03", MERMAID))

    # the tool read the app's context and the store; the call id was injected
    assert run.lines("nb06-05")[:2] == [
        "last_order({'shop': 'tea'}) -> 3 boxes of sencha",
        "receipt_number({'shop': 'tea'}) -> tea-1",
    ]
    assert run.field("nb06-05", "answer") == "Your last order was 3 boxes of sencha."
    assert run.field("nb06-05", "structured_response") == "Order(item='sencha', quantity=3)"
    assert run.field("nb06-05", "status") == "ok"

    # injected arguments are hidden from the planner; the app's prompt comes first
    assert run.field("nb06-07", "planner sees 'shop'") == "True"
    assert run.field("nb06-07", "planner sees 'runtime'") == "False"
    assert run.field("nb06-07", "planner sees 'call_id'") == "False"
    app_prompt = "You are the tea shop's order desk. Be brief."
    assert run.field("nb06-07", "planner's system message starts") == app_prompt
    assert run.field("nb06-07", "answer's system message starts") == app_prompt

    # the messages stream: the request and the round's tool calls (from `plan`, where a
    # run without a checkpointer starts), their results and the answer, no plan JSON
    assert run.field("nb06-09", "nodes on the messages stream") == (
        "['answer', 'call_tool', 'plan']"
    )
    assert run.field("nb06-09", "streamed answer") == "Your last order was 3 boxes of sencha."
