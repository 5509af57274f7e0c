"""The command the MCP conformance suite runs per scenario: hand the run to a warm client.

`python -I -S conformance_launch.py SOCKET CLIENT URL`: connects to the client process
`conformance_client.py serve CLIENT SOCKET` started (the libraries already imported),
passes it this process's standard streams, arguments, environment and folder, and exits
with the exit status of the scenario's run, which that process forks off. Killing this
process (the suite does when a scenario times out) kills the run.

Standard library only, and no `site` (`-S`): it starts in a few milliseconds, so each
scenario no longer pays for importing LangGraph and the MCP SDK in a new interpreter.
"""

from __future__ import annotations

import json
import os
import socket
import sys


def main() -> int:
    """Run one scenario in the warm client process; its exit status."""
    path, client, url = sys.argv[1], sys.argv[2], sys.argv[-1]
    request = {
        "argv": ["conformance_client.py", client, url],
        "env": dict(os.environ),
        "cwd": os.getcwd(),
    }
    payload = json.dumps(request).encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.connect(path)
        socket.send_fds(connection, [len(payload).to_bytes(8, "big")], [0, 1, 2])
        connection.sendall(payload)
        status = b""
        while len(status) < 4:
            chunk = connection.recv(4 - len(status))
            if not chunk:
                msg = "the warm conformance client closed the connection without a status"
                raise SystemExit(msg)
            status += chunk
    return int.from_bytes(status, "big", signed=True)


if __name__ == "__main__":
    sys.exit(main())
