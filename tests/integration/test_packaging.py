"""The wheel carries the prompts and runs a loop in a fresh virtualenv; the demo runs."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

SMOKE = """
import asyncio, agentloop.prompts as p
from agentloop import create_tool_loop
from agentloop.demo import demo_tools
from agentloop.testing import ScriptedChatModel, plan_reply
assert "site-packages" in str(p.prompts_dir()), p.prompts_dir()
model = ScriptedChatModel([plan_reply("execute", [{"tool_name": "calculate",
    "tool_kwargs": {"expression": "2*21"}}]), plan_reply("response"), "42"])
out = asyncio.run(create_tool_loop(model, demo_tools()).ainvoke({"user_input": "2*21?"}))
print("RESULT", out["round_state"]["done_plans"][0]["result"], out["answer"])
"""


def test_wheel_installs_and_runs_a_loop(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    [wheel] = dist.glob("agentloop-*.whl")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)  # this pip installs into it (`--python`)
    python = env_dir / "bin" / "python"
    # the fresh virtualenv sees only the wheel, even when the checkout is on PYTHONPATH
    fresh = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    # the wheel and every dependency it declares, resolved and installed by pip; without
    # byte-compiling them all (most are never imported here), which was most of the time
    pip = [sys.executable, "-m", "pip", "--python", str(python)]
    subprocess.run(
        [*pip, "install", "--quiet", "--no-compile", str(wheel)],
        check=True,
        capture_output=True,
        timeout=900,
        env=fresh,
    )
    done = subprocess.run(
        [str(python), "-c", SMOKE],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=fresh,
    )
    assert done.returncode == 0, done.stderr
    assert "RESULT 42.0 42" in done.stdout


def test_demo_command_runs_without_a_key(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agentloop.demo"],
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
