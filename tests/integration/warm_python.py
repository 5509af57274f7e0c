"""A Python script kept warm: its imports done once, a fresh process forked for each run.

    python warm_python.py SOCKET SCRIPT [MODULE[:NAME] ...]

runs SCRIPT's top level (its imports and definitions, with `__name__` set to
`"__warm__"`, so its `if __name__ == "__main__":` part does not run), imports each MODULE
(and NAME from it, for modules that import their names when first used), prints READY,
then serves `warm_launch.py` on the Unix socket SOCKET: for each launcher it forks a
process that takes the launcher's standard streams, arguments, environment and folder and
runs SCRIPT as `__main__`, exactly as `python SCRIPT ARGS...` would, from a process where
nothing has run yet but imports. The launcher exits as that process does (with its exit
code, or killed by the same signal); a launcher killed first (a timeout) takes its run
with it.

For scripts the tests start many times, each paying a few seconds of CPU for importing
LangGraph, LangChain and the MCP SDK: a forked run skips that. Nothing may start a thread
or an event loop while warming (forking it would copy half of it), and the server checks.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import runpy
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

LAUNCHER = Path(__file__).with_name("warm_launch.py")


@contextlib.contextmanager
def warm_process(
    script: Path, modules: tuple[str, ...] = (), env: dict[str, str] | None = None
) -> Iterator[list[str]]:
    """Keep `script` warm while the block runs; yield the command that stands for
    `[sys.executable, str(script)]` (append the script's arguments).

    `env` is the environment of the warm process (its imports depend on `PYTHONPATH`);
    each run takes its launcher's.
    """
    folder = tempfile.mkdtemp(prefix="warm-")  # a short path: AF_UNIX allows 107 bytes
    path = os.path.join(folder, "socket")
    errors = open(os.path.join(folder, "stderr.txt"), "w+")  # noqa: SIM115 (read on failure)
    process = subprocess.Popen(
        [sys.executable, __file__, path, str(script), *modules],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors, text=True, env=env,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        if process.stdout.readline().strip() != "READY":
            process.wait(timeout=60)
            errors.seek(0)
            msg = f"{script.name} could not be kept warm: {errors.read()[-3000:]}"
            raise RuntimeError(msg)
        yield [sys.executable, "-I", "-S", str(LAUNCHER), path, str(script)]
    finally:
        process.terminate()
        process.wait(timeout=60)
        errors.close()
        shutil.rmtree(folder, ignore_errors=True)


@dataclass(frozen=True)
class Run:
    """A run as `warm_launch.py` asked for it."""

    argv: list[str]
    env: dict[str, str]
    cwd: str
    streams: list[int]
    """The launcher's stdin, stdout and stderr, received over the socket."""


def warm(script: str, modules: list[str]) -> None:
    """Run `script`'s top level and import `modules` (`module` or `module:name`)."""
    runpy.run_path(script, run_name="__warm__")
    for entry in modules:
        module, _, name = entry.partition(":")
        imported = importlib.import_module(module)
        if name:
            getattr(imported, name)
    if threading.active_count() != 1:
        msg = "warming started a thread: forking would copy it half"
        raise SystemExit(msg)


def _receive(connection: socket.socket) -> Run:
    """Read a launcher's request: its three standard streams, then the rest as JSON."""
    header, streams, _flags, _address = socket.recv_fds(connection, 8, 3)
    size = int.from_bytes(header, "big")
    payload = b""
    while len(payload) < size:
        chunk = connection.recv(size - len(payload))
        if not chunk:
            msg = "the launcher left before its request was read"
            raise ConnectionError(msg)
        payload += chunk
    request = json.loads(payload)
    return Run(request["argv"], request["env"], request["cwd"], streams)


def serve(path: str) -> Run:
    """Fork a process per launcher's request; returns only in such a forked process.

    The server answers each launcher with its run's exit code (negative: the signal that
    ended it), and kills the run when the launcher goes away first.
    """
    selector = selectors.DefaultSelector()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    selector.register(listener, selectors.EVENT_READ, None)
    launchers: dict[int, socket.socket | None] = {}  # a run's pid -> its launcher, if there
    print("READY", flush=True)
    while True:
        for key, _events in selector.select():
            if key.data is None:  # a launcher connected
                connection, _address = listener.accept()
                try:
                    run = _receive(connection)
                except (OSError, ValueError):
                    connection.close()
                    continue
                pid = os.fork()
                if pid == 0:
                    selector.close()
                    listener.close()
                    for other in launchers.values():
                        if other is not None:
                            other.close()
                    connection.close()
                    return run
                for stream in run.streams:
                    os.close(stream)
                launchers[pid] = connection
                selector.register(connection, selectors.EVENT_READ, ("launcher", pid))
                selector.register(os.pidfd_open(pid), selectors.EVENT_READ, ("run", pid))
                continue
            kind, pid = key.data
            if kind == "launcher":  # it sends nothing more: readable means it is gone
                if launchers.get(pid) is not key.fileobj:  # its run ended in this select
                    continue
                selector.unregister(key.fileobj)
                connection = launchers[pid]
                assert connection is not None
                connection.close()
                launchers[pid] = None
                os.kill(pid, signal.SIGKILL)
                continue
            selector.unregister(key.fileobj)
            os.close(key.fd)
            _pid, wait_status = os.waitpid(pid, 0)
            launcher = launchers.pop(pid)
            if launcher is not None:
                selector.unregister(launcher)
                code = os.waitstatus_to_exitcode(wait_status)
                with contextlib.suppress(OSError):  # it may have just gone
                    launcher.sendall(code.to_bytes(4, "big", signed=True))
                launcher.close()


def become(run: Run) -> None:
    """Turn a forked process into the launcher's run: its streams, environment, folder."""
    for target, stream in enumerate(run.streams):
        os.dup2(stream, target)
        os.close(stream)
    os.environ.clear()
    os.environ.update(run.env)
    os.chdir(run.cwd)
    sys.argv = run.argv


def main() -> None:
    path, script, *modules = sys.argv[1:]
    warm(script, modules)
    run = serve(path)
    become(run)
    runpy.run_path(run.argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
