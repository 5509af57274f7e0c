"""`python -m agentloop` and the `agentloop` console script: the `agentloop` command.

This module is imported only to run the command, so it may own the process's Ctrl-C:
from its first line until `main` runs, a SIGINT prints the CLI's one error line and
exits 130 at once (nothing has started yet that would need cleaning up), instead of a
`KeyboardInterrupt` traceback from the middle of an import. `main` then hands Ctrl-C back
to Python's default handler, which the command turns into the same line and exit code.
"""

from __future__ import annotations

import os
import signal
from types import FrameType

__all__ = ["main"]

_INTERRUPTED = b"agentloop: error: interrupted\n"
_EXIT_INTERRUPTED = 130  # agentloop.cli.EXIT_INTERRUPTED, not imported yet


def _interrupted_while_loading(signum: int, frame: FrameType | None) -> None:
    os.write(2, _INTERRUPTED)
    os._exit(_EXIT_INTERRUPTED)


signal.signal(signal.SIGINT, _interrupted_while_loading)

from agentloop.cli import main as _cli_main  # noqa: E402  (after the handler, on purpose)


def main() -> int:
    """Run the `agentloop` command on `sys.argv[1:]`.

    Returns:
        The exit code (see `agentloop.cli`).
    """
    signal.signal(signal.SIGINT, signal.default_int_handler)
    return _cli_main()


if __name__ == "__main__":
    raise SystemExit(main())
