"""The notebooks are committed without outputs, and each runs top to bottom in a kernel."""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest
from ipykernel.kernelspec import install as install_kernelspec
from jupyter_client.kernelspec import KernelSpecManager
from nbclient import NotebookClient

pytestmark = pytest.mark.integration

NOTEBOOKS_DIR = Path(__file__).resolve().parents[2] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
KERNEL_NAME = "python3"


@pytest.fixture
def this_interpreter_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Make the "python3" kernel run this interpreter, whatever kernels are installed.

    The kernel spec is written under a temporary prefix, whose `share/jupyter` goes first
    in `JUPYTER_PATH`, so a user-wide or system-wide "python3" spec pointing at another
    interpreter (one without agentloop) cannot be picked instead.
    """
    prefix = tmp_path / "kernel-prefix"
    install_kernelspec(kernel_name=KERNEL_NAME, prefix=str(prefix))
    monkeypatch.setenv("JUPYTER_PATH", str(prefix / "share" / "jupyter"))
    spec = KernelSpecManager().get_kernel_spec(KERNEL_NAME)
    assert spec.argv[0] == sys.executable
    return KERNEL_NAME


def test_there_are_notebooks() -> None:
    assert len(NOTEBOOKS) >= 5


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[path.name for path in NOTEBOOKS])
def test_notebook_is_committed_without_outputs(path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code_cells
    for cell in code_cells:
        assert cell.get("outputs") == [], f"{path.name}: cell {cell.get('id')} has outputs"
        assert cell.get("execution_count") is None, f"{path.name}: cell {cell.get('id')} ran"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[path.name for path in NOTEBOOKS])
def test_notebook_runs_top_to_bottom(
    path: Path, tmp_path: Path, this_interpreter_kernel: str
) -> None:
    notebook = nbformat.read(path, as_version=4)
    workdir = tmp_path / "run"
    workdir.mkdir()
    client = NotebookClient(
        notebook,
        timeout=600,
        kernel_name=this_interpreter_kernel,
        resources={"metadata": {"path": str(workdir)}},
    )
    # The kernel inherits PYTEST_CURRENT_TEST, so ipykernel gives it a sys.stderr without
    # a file descriptor, as Jupyter does on some platforms: MCP servers must cope.
    client.execute()  # raises CellExecutionError, with the failing cell
    errors = [
        output
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
        if output.get("output_type") == "error"
    ]
    assert errors == []
