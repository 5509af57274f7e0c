"""`python -m agentloop` and the `agentloop` console script: the `agentloop` command.

This module is imported only to run the command, so it may own the process's Ctrl-C:
from its first line until `main` runs, a SIGINT prints the CLI's one error line and
exits 130 at once (nothing has started yet that would need cleaning up), instead of a
`KeyboardInterrupt` traceback from the middle of an import. `main` then hands Ctrl-C back
to Python's default handler, which the command turns into the same line and exit code.

CPython 3.11 marks the process as killed by SIGINT when a `KeyboardInterrupt` passes
through code run from a string (`exec` / `eval` of text: every dataclass and named tuple
defined while a module loads), even when the command catches it; under `python -m` the
process then dies of SIGINT after the command's line instead of exiting 130. A command
that handled the interrupt clears that mark.
"""

from __future__ import annotations

import contextlib
import ctypes
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
    code = _cli_main()
    if code == _EXIT_INTERRUPTED:
        _forget_handled_interrupt()
    return code


def _forget_handled_interrupt() -> None:
    """Clear CPython's mark of an unhandled Ctrl-C: the command handled it (exit 130)."""
    with contextlib.suppress(Exception):  # not CPython 3.11, or not exported: nothing to do
        ctypes.c_int.in_dll(ctypes.pythonapi, "_Py_UnhandledKeyboardInterrupt").value = 0


if __name__ == "__main__":
    raise SystemExit(main())
