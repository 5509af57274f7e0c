"""The `agentloop` command: run a tool loop from a shell and watch it work.

Usage:
    agentloop run "question" [--model provider:name] [--mcp-config FILE]
                             [--max-rounds N] [--concurrency N]
                             [--plan-mode json|tool|native]
                             [--json] [--quiet] [--verbose]
    agentloop demo ["question"] [--plan-mode json|tool|native]
                               [--json] [--quiet] [--verbose]
    agentloop --version

`run` plans with the model given by `--model` (default: the `AGENTLOOP_MODEL`
environment variable), with the tools of the bundled MCP servers (documents,
calculator, notes); `--mcp-config` replaces them with the servers of an `mcpServers`
JSON / YAML file. `demo` runs the demo loop on the question (rule-based local planner,
bundled servers): no API key, no network.

While the loop runs, its progress goes to stderr (with `rich`): on a terminal, a live view
of the round and the calls in flight above coloured event lines, the answer streamed as
Markdown and the run report as a table; piped or redirected, one plain line per event
and the plain answer. `NO_COLOR` turns colour off. The answer goes to stdout; with
`--json`, stdout holds one JSON document instead: `{"question", "answer", "rounds",
"records", "action_results", "rollbacks", "status", "status_reason", "error"}`.

An error is one `agentloop: error: ...` line on stderr (with its traceback under
`--verbose`), and stdout stays empty (or holds the `--json` document, with `error` set).
A model failure that no retry can fix (rejected credentials or permissions, an unknown
model, a request the model rejects) stops the run at once.

Exit codes:
    0: success.
    1: the run finished, but every tool call failed or no plan was usable (`status`); or
       an unexpected error.
    2: usage or configuration error (no model or an unknown one, a model that rejects
       the credentials, permissions or request, a bad MCP config file).
    3: an MCP server could not be started or reached.
    4: the model stayed unavailable through every retry (rate limited, unreachable).
    130: interrupted (Ctrl-C).

The demo (`demo/`) and the bundled MCP servers (`servers/`) live here too. May import
every part of the library; no part of the library imports the CLI.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import FrameType
from typing import Any

from agentloop.cli.parser import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_MODEL_UNAVAILABLE,
    EXIT_OK,
    EXIT_SERVER,
    EXIT_USAGE,
    MODEL_ENV,
    CliError,
    build_parser,
    json_document,
)

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_MODEL_UNAVAILABLE",
    "EXIT_OK",
    "EXIT_SERVER",
    "EXIT_USAGE",
    "MODEL_ENV",
    "Progress",
    "build_parser",
    "cli_logging",
    "main",
    "run_exit_code",
]

_ERROR_PREFIX = "agentloop: error: "
_LATER = {"Progress", "cli_logging", "run_exit_code"}
"""What `agentloop.cli.app` holds: imported on first use, with LangChain."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `agentloop` command.

    `--help`, `--version` and a usage error import neither LangChain nor LangGraph; a
    command imports them once its arguments are read. Ctrl-C at any moment ends it with
    one line and exit code 130.

    Args:
        argv: The arguments (default: `sys.argv[1:]`).

    Returns:
        The exit code (see the module docstring).
    """
    try:
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as exit_:  # --help, --version
            return exit_.code if isinstance(exit_.code, int) else EXIT_OK
    except CliError as error:  # a usage error
        return _say(error.message, error.code)
    except KeyboardInterrupt:
        return _say("interrupted", EXIT_INTERRUPTED)
    interrupted = ""
    if args.json:  # the document a Ctrl-C leaves on stdout before the run's own handling
        interrupted = json_document({"user_input": " ".join(args.question)}, "interrupted")
    try:
        with _ctrl_c_leaves_at_once(interrupted):
            from agentloop.cli.app import run

        return run(args)
    except KeyboardInterrupt:  # before the run's own handling: while the imports load
        sys.stdout.write(interrupted)
        return _say("interrupted", EXIT_INTERRUPTED)


@contextmanager
def _ctrl_c_leaves_at_once(document: str) -> Iterator[None]:
    """While the command's modules load, Ctrl-C prints the line and exits 130 at once.

    `document` (the `--json` document, or "") goes to stdout first.

    Nothing has started yet that needs cleaning up; and a `KeyboardInterrupt` raised
    inside a module's initialization (one that runs code through `PyRun_String`) marks
    the interpreter as killed by SIGINT, so the process would end with -SIGINT after the
    line, whatever the command returned. Only in the main thread (where signals are).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def leave(signum: int, frame: FrameType | None) -> None:
        if document:
            os.write(1, document.encode())
        os.write(2, f"{_ERROR_PREFIX}interrupted\n".encode())
        os._exit(EXIT_INTERRUPTED)

    previous = signal.signal(signal.SIGINT, leave)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _say(message: str, code: int) -> int:
    sys.stderr.write(f"{_ERROR_PREFIX}{message}\n")
    sys.stderr.flush()
    return code


def __getattr__(name: str) -> Any:
    if name not in _LATER:
        msg = f"module 'agentloop.cli' has no attribute {name!r}"
        raise AttributeError(msg)
    from agentloop.cli import app

    return getattr(app, name)
