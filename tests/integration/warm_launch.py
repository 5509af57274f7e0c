"""Run a script in its warm process (`warm_python.py`), as if run here: `python SCRIPT ARGS`.

    python -I -S warm_launch.py SOCKET SCRIPT [ARGS ...]

connects to the `warm_python.py` serving SOCKET, passes it this process's standard
streams, arguments, environment and folder, and ends as the run it forks off ends: with
its exit code, or killed by the same signal. Killing this process kills the run.

Standard library only, and no `site` (`-S`): it starts in a few milliseconds.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys


def main() -> int:
    """Run the script in the warm process; its exit code."""
    path, argv = sys.argv[1], sys.argv[2:]
    request = {"argv": argv, "env": dict(os.environ), "cwd": os.getcwd()}
    payload = json.dumps(request).encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.connect(path)
        socket.send_fds(connection, [len(payload).to_bytes(8, "big")], [0, 1, 2])
        connection.sendall(payload)
        answer = b""
        while len(answer) < 4:
            chunk = connection.recv(4 - len(answer))
            if not chunk:
                msg = "the warm process closed the connection without an exit code"
                raise SystemExit(msg)
            answer += chunk
    code = int.from_bytes(answer, "big", signed=True)
    if code < 0:  # killed by a signal: end the same way
        sys.stdout.flush()
        if -code not in (signal.SIGKILL, signal.SIGSTOP):  # the two no handler can catch
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


if __name__ == "__main__":
    sys.exit(main())
