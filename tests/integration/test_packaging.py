"""The wheel carries the prompts and runs a loop in a fresh virtualenv; the demo runs.

`pip install agentloop` resolves beside langchain-mcp-adapters (mcp 1.x) and beside the
current SDK (mcp 2.x), and its MCP servers' tools work on either.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

MCP_SMOKE = """
import asyncio, importlib.metadata, importlib.util, tempfile
from pathlib import Path
from agentloop import MCPToolset, create_tool_loop
from agentloop.cli.servers import bundled_servers_config
from agentloop.testing import ScriptedChatModel, plan_reply
config = bundled_servers_config(Path(tempfile.mkdtemp()) / "notes.jsonl")
model = ScriptedChatModel([plan_reply("execute", [{"tool_name": "calculate",
    "tool_kwargs": {"expression": "2**10"}}]), plan_reply("response"), "1024"])
with MCPToolset(config) as toolset:
    out = asyncio.run(create_tool_loop(model, [toolset]).ainvoke({"user_input": "2**10?"}))
installed = {name: importlib.metadata.version(name) for name in ("mcp", "langchain-mcp-adapters")
             if importlib.util.find_spec(name.replace("-", "_"))}
print("INSTALLED", installed, "RESULT", out["tool_logs"][0]["result"])
"""

SMOKE = """
import asyncio, agentloop.planning.templates as p
from agentloop import create_tool_loop
from agentloop.cli.demo import demo_tools
from agentloop.testing import ScriptedChatModel, plan_reply
assert "site-packages" in str(p.prompts_dir()), p.prompts_dir()
model = ScriptedChatModel([plan_reply("execute", [{"tool_name": "calculate",
    "tool_kwargs": {"expression": "2*21"}}]), plan_reply("response"), "42"])
out = asyncio.run(create_tool_loop(model, demo_tools()).ainvoke({"user_input": "2*21?"}))
print("RESULT", out["round_state"]["done_plans"][0]["result"], out["answer"])
"""


FRESH = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
"""A fresh virtualenv sees only the wheel, even when the checkout is on PYTHONPATH."""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    [built] = dist.glob("agentloop-*.whl")
    return built


def install(folder: Path, *requirements: str) -> Path:
    """A fresh virtualenv with `requirements` resolved and installed by pip; its Python."""
    venv.create(folder, with_pip=False)  # this pip installs into it (`--python`)
    python = folder / "bin" / "python"
    # every dependency declared, without byte-compiling them all (most are never
    # imported here), which was most of the time
    pip = [sys.executable, "-m", "pip", "--python", str(python)]
    done = subprocess.run(
        [*pip, "install", "--quiet", "--no-compile", *requirements],
        capture_output=True,
        text=True,
        timeout=900,
        env=FRESH,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return python


def test_wheel_installs_and_runs_a_loop(wheel: Path, tmp_path: Path) -> None:
    python = install(tmp_path / "venv", str(wheel))
    done = subprocess.run(
        [str(python), "-c", SMOKE],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=FRESH,
    )
    assert done.returncode == 0, done.stderr
    assert "RESULT 42.0 42" in done.stdout


@pytest.mark.parametrize(
    ("beside", "installed"),
    [
        ("langchain-mcp-adapters", "'mcp': '1."),
        ("mcp==2.3.0", "{'mcp': '2.3.0'}"),
    ],
    ids=["beside-the-adapters", "beside-mcp-2"],
)
def test_the_wheel_resolves_beside_either_mcp_major_and_runs_its_servers(
    wheel: Path, tmp_path: Path, beside: str, installed: str
) -> None:
    python = install(tmp_path / "venv", str(wheel), beside)
    done = subprocess.run(
        [str(python), "-c", MCP_SMOKE],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=FRESH,
    )
    assert done.returncode == 0, done.stderr
    assert installed in done.stdout, done.stdout
    assert "RESULT {'expression': '2**10', 'result': 1024}" in done.stdout


def test_demo_command_runs_without_a_key(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agentloop", "demo"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    assert "round 2: planning" in done.stderr
    assert "10.5" in done.stdout
    assert done.stdout.startswith("Here is what the tools found:")


def test_the_notebooks_extra_installs_jupyterlab_and_the_kernel() -> None:
    import tomllib

    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    extra = pyproject["project"]["optional-dependencies"]["notebooks"]
    names = {requirement.split(">")[0].split("=")[0].split("[")[0] for requirement in extra}
    assert {"jupyterlab", "ipykernel", "graphviz"} <= names
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert 'pip install -e ".[notebooks]" && jupyter lab notebooks/' in readme
