"""The `agentloop` command: run a tool loop from a shell and watch it work.

Usage:
    agentloop run "question" [--model provider:name] [--mcp-config FILE]
                             [--max-rounds N] [--concurrency N] [--plan-mode json|tool]
                             [--json] [--quiet]
    agentloop demo ["question"] [--json] [--quiet]

`run` plans with the model given by `--model` (default: the `AGENTLOOP_MODEL`
environment variable), with the tools of the bundled MCP servers (documents,
calculator, notes); `--mcp-config` replaces them with the servers of an `mcpServers`
JSON / YAML file. `demo` runs the demo loop (scripted planner, bundled servers): no API
key, no network.

While the loop runs, its progress goes to stderr: a live status line on a terminal, one
line per event otherwise. The answer goes to stdout; with `--json`, stdout holds one
JSON document instead: `{"question", "answer", "rounds", "records", "action_results",
"rollbacks"}`.

Exit codes:
    0: success.
    1: the run finished, but every tool call failed or the model failed.
    2: usage or configuration error (missing or unknown model, bad MCP config file).
    3: an MCP server could not be started or reached.
    130: interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from agentloop.display import RunReport, compact_json, shorten
from agentloop.errors import ConfigurationError

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_SERVER",
    "EXIT_USAGE",
    "FAILED_ANSWER_PREFIX",
    "MODEL_ENV",
    "Progress",
    "build_parser",
    "main",
    "run_exit_code",
]

EXIT_OK = 0
"""The run succeeded."""
EXIT_FAILED = 1
"""The run finished, but every tool call failed or the model failed."""
EXIT_USAGE = 2
"""Usage or configuration error: missing or unknown model, bad MCP config file."""
EXIT_SERVER = 3
"""An MCP server could not be started or reached."""
EXIT_INTERRUPTED = 130
"""Interrupted by Ctrl-C."""

MODEL_ENV = "AGENTLOOP_MODEL"
"""The environment variable `run` reads its model from when `--model` is not given."""

FAILED_ANSWER_PREFIX = "I could not produce an answer"
"""How the answer of a run whose answer model failed begins."""
_PLANNER_FAILED_PREFIX = "planner model failed"

_NO_MODEL = (
    f"no model: pass --model provider:name or set {MODEL_ENV}; `agentloop demo` runs without one"
)

_EPILOG = """\
exit codes:
  0    success
  1    the run finished, but every tool call failed or the model failed
  2    usage or configuration error (missing or unknown model, bad MCP config file)
  3    an MCP server could not be started or reached
  130  interrupted (Ctrl-C)
"""

_ERROR_PREFIX = "agentloop: error: "


class _CliError(Exception):
    """An error reported as one line on stderr, with the exit code it maps to."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, like every other error of the CLI."""

    def error(self, message: str) -> NoReturn:
        raise _CliError(EXIT_USAGE, f"{message} (see `{self.prog} --help`)")


def _count(minimum: int) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            msg = f"expected an integer, got {text!r}"
            raise argparse.ArgumentTypeError(msg) from None
        if value < minimum:
            msg = f"must be at least {minimum}, got {value}"
            raise argparse.ArgumentTypeError(msg)
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    """Build the `agentloop` argument parser (`run` and `demo` subcommands)."""
    formatter = argparse.RawDescriptionHelpFormatter
    parser = _Parser(
        prog="agentloop",
        description="Run a plan / execute tool loop from the command line.",
        epilog=_EPILOG,
        formatter_class=formatter,
    )
    commands = parser.add_subparsers(dest="command", metavar="{run,demo}", parser_class=_Parser)
    commands.required = True

    output = _Parser(add_help=False)
    output.add_argument(
        "--json",
        action="store_true",
        help="print one JSON document (answer, rounds, records, action_results) on stdout",
    )
    output.add_argument(
        "-q", "--quiet", action="store_true", help="no progress or summary on stderr"
    )

    run = commands.add_parser(
        "run",
        parents=[output],
        help="answer a question with a model and MCP tools",
        description=(
            "Answer a question with a chat model and the tools of MCP servers.\n"
            "Without --mcp-config, the bundled servers (documents, calculator, notes)\n"
            "provide the tools; --mcp-config replaces them."
        ),
        epilog=_EPILOG,
        formatter_class=formatter,
    )
    run.add_argument("question", nargs="+", help="the question (several words are joined)")
    run.add_argument(
        "--model",
        metavar="PROVIDER:NAME",
        help=f"an init_chat_model string, e.g. openai:gpt-4.1-mini (default: ${MODEL_ENV})",
    )
    run.add_argument(
        "--mcp-config",
        metavar="FILE",
        help="a JSON / YAML file of mcpServers (replaces the bundled servers)",
    )
    run.add_argument(
        "--max-rounds", type=_count(0), default=5, metavar="N", help="most rounds (default: 5)"
    )
    run.add_argument(
        "--concurrency",
        type=_count(1),
        default=None,
        metavar="N",
        help="most tool calls at once (default: no limit)",
    )
    run.add_argument(
        "--plan-mode",
        choices=("json", "tool"),
        default="json",
        help="json: the plan as message text (any model); tool: native tool calling",
    )

    demo = commands.add_parser(
        "demo",
        parents=[output],
        help="run the demo loop (no API key, no network)",
        description=(
            "Run the demo loop: a scripted planner and the bundled MCP servers as\n"
            "subprocesses. Needs no API key and no network."
        ),
        epilog=_EPILOG,
        formatter_class=formatter,
    )
    demo.add_argument("question", nargs="*", help="the question (default: the demo question)")
    return parser


# -- progress -----------------------------------------------------------------------------


class Progress:
    """Shows a run's events on a text stream (stderr).

    On a terminal (`live=True`), a status line (round, calls in flight and their elapsed
    time) stays under the event lines and is rewritten in place with a carriage return;
    otherwise each event is one plain line.

    Args:
        stream: Where to write.
        live: Keep a rewritten status line (only for a terminal).
        enabled: Write nothing when False.
    """

    def __init__(self, stream: TextIO, *, live: bool, enabled: bool = True) -> None:
        self.stream = stream
        self.live = live and enabled
        self.enabled = enabled
        self.commands: list[Mapping[str, Any]] = []
        self.in_flight: dict[str, tuple[str, float]] = {}
        self.round = 0
        self.phase = "starting the MCP servers"
        self.started = time.monotonic()
        self._status_shown = False

    # -- output --------------------------------------------------------------------------

    def line(self, text: str) -> None:
        """Write one event line (above the status line on a terminal)."""
        if not self.enabled:
            return
        self._clear_status()
        self.stream.write(text + "\n")
        self.draw()

    def _clear_status(self) -> None:
        if self._status_shown:
            self.stream.write("\r\x1b[K")
            self._status_shown = False

    def status_text(self) -> str:
        """Return the status line: elapsed time, round, phase and the calls in flight."""
        now = time.monotonic()
        where = f"round {self.round}: {self.phase}" if self.round else self.phase
        text = f"[{now - self.started:5.1f}s] {where}"
        if self.in_flight:
            calls = ", ".join(
                f"{name} {now - since:.1f}s" for name, since in self.in_flight.values()
            )
            text += f" | {len(self.in_flight)} in flight: {calls}"
        return text

    def draw(self) -> None:
        """Rewrite the status line (terminal only)."""
        if self.live:
            width = shutil.get_terminal_size((80, 24)).columns
            self.stream.write("\r\x1b[K" + shorten(self.status_text(), max(width - 1, 10)))
            self._status_shown = True
        self.stream.flush()

    def close(self) -> None:
        """Remove the status line."""
        if self.enabled:
            self._clear_status()
            self.stream.flush()

    async def tick(self, interval_s: float = 0.1) -> None:
        """Redraw the status line until cancelled, so elapsed times keep moving."""
        while True:
            await asyncio.sleep(interval_s)
            self.draw()

    # -- stream chunks -------------------------------------------------------------------

    def values(self, state: Mapping[str, Any]) -> None:
        """Take a `values` chunk: remember the planned commands (for their arguments)."""
        decision: Mapping[str, Any] = state.get("decision") or {}
        self.commands = list(decision.get("execution_commands") or [])

    def _arguments(self, index: int, tool_name: str) -> str:
        if 0 <= index < len(self.commands):
            command = self.commands[index]
            if command.get("tool_name") == tool_name:
                return shorten(compact_json(command.get("tool_kwargs") or {}), 80)
        return ""

    def event(self, event: Mapping[str, Any]) -> None:
        """Take a `custom` chunk: one event of the loop."""
        kind = event.get("type")
        tool = str(event.get("tool_name", ""))
        if kind == "round_started":
            self.round = int(event.get("round_index", 0)) + 1
            self.phase = "planning"
            again = " again" if event.get("replan") else ""
            self.line(f"round {self.round}: planning{again}...")
        elif kind == "plan_decided":
            self.phase = "executing" if event.get("command_count") else "planned"
            if event.get("parse_error"):
                self.line(f"  planner: {shorten(str(event['parse_error']), 200)}")
        elif kind == "tool_started":
            call_id = str(event.get("call_id", ""))
            self.in_flight[call_id] = (tool, time.monotonic())
            arguments = self._arguments(int(event.get("index", -1)), tool)
            self.line(f"  -> {tool}({arguments}) ...")
        elif kind == "tool_retry":
            error = shorten(str(event.get("error", "")), 120)
            self.line(
                f"  retry {tool}: attempt {event.get('attempt')} failed ({error}), "
                f"waiting {float(event.get('wait_s', 0.0)):.1f}s"
            )
        elif kind == "tool_error":
            self.in_flight.pop(str(event.get("call_id", "")), None)
            self.line(f"  ERR {tool}: {shorten(str(event.get('error', '')), 200)}")
        elif kind == "tool_completed":
            self.in_flight.pop(str(event.get("call_id", "")), None)
            if event.get("success"):
                self.line(f"  ok {tool} {float(event.get('duration_ms', 0.0)):.0f} ms{_how(event)}")
            else:
                self.draw()
        elif kind == "tool_rolled_back":
            self.line(f"  round {self.round} rolled back: every call was flagged")
        elif kind == "answer_started":
            self.phase = "answering"
            self.line("answering...")
        elif kind == "answer_completed":
            self.phase = "done"
            if event.get("error"):
                self.line(f"  answer failed: {shorten(str(event['error']), 200)}")


def _how(event: Mapping[str, Any]) -> str:
    notes = []
    if event.get("from_cache"):
        notes.append("from cache")
    if event.get("fallback"):
        notes.append(f"fallback: {event['fallback']}")
    attempts = int(event.get("attempts", 1) or 1)
    if attempts > 1:
        notes.append(f"{attempts} attempts")
    return f" ({', '.join(notes)})" if notes else ""


# -- running ------------------------------------------------------------------------------


def run_exit_code(state: Mapping[str, Any]) -> int:
    """Return the exit code of a finished run: 1 if the model or every tool call failed."""
    if str(state.get("answer") or "").startswith(FAILED_ANSWER_PREFIX):
        return EXIT_FAILED
    decision: Mapping[str, Any] = state.get("decision") or {}
    if str(decision.get("parse_error") or "").startswith(_PLANNER_FAILED_PREFIX):
        return EXIT_FAILED
    records = state.get("tool_logs") or []
    if records and not any(record.get("success") for record in records):
        return EXIT_FAILED
    return EXIT_OK


async def _stream(graph: Any, question: str, progress: Progress) -> dict[str, Any]:
    final: dict[str, Any] = {}
    ticker = asyncio.create_task(progress.tick()) if progress.live else None
    try:
        async for mode, chunk in graph.astream(
            {"user_input": question}, stream_mode=["custom", "values"]
        ):
            if mode == "values":
                final = chunk
                progress.values(chunk)
            elif isinstance(chunk, Mapping):
                progress.event(chunk)
    finally:
        if ticker is not None:
            ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ticker
        progress.close()
    return final


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def _startup_error(error: BaseException) -> _CliError | None:
    """Map an error raised while the MCP servers start to its exit code."""
    leaves = _leaves(error)
    for leaf in leaves:
        if isinstance(leaf, ConfigurationError):
            return _CliError(EXIT_USAGE, _one_line(leaf))
    for leaf in leaves:
        if isinstance(leaf, TimeoutError):
            return _CliError(EXIT_SERVER, f"MCP servers did not start in time: {_one_line(leaf)}")
        if isinstance(leaf, OSError):  # MCPTransportError is a ConnectionError
            return _CliError(EXIT_SERVER, _one_line(leaf))
    return None


@contextlib.contextmanager
def _starting_servers() -> Iterator[None]:
    """Report a server that cannot be started (or a bad allow list) as a `_CliError`."""
    try:
        yield
    except Exception as error:
        mapped = _startup_error(error)
        if mapped is None:
            raise
        raise mapped from error


def resolve_model(name: str) -> BaseChatModel:
    """Create the chat model `--model` names (the model machinery is imported here).

    Raises:
        ConfigurationError: No known provider or model, or the provider's package is missing.
    """
    from agentloop.models import resolve_model as resolve

    return resolve(name)


def _notes_file() -> Path:
    return Path(tempfile.gettempdir()) / "agentloop-notes.jsonl"


def _run_command(args: argparse.Namespace, progress: Progress) -> dict[str, Any]:
    from agentloop.graph import create_tool_loop
    from agentloop.mcp_config import load_mcp_config
    from agentloop.mcp_toolset import MCPToolset
    from agentloop.servers import bundled_servers_config

    name = args.model or os.environ.get(MODEL_ENV, "").strip()
    if not name:
        raise _CliError(EXIT_USAGE, _NO_MODEL)
    specs = load_mcp_config(args.mcp_config or bundled_servers_config(_notes_file()))
    model = resolve_model(name)
    toolset = MCPToolset(specs)
    try:
        progress.line(f"starting MCP servers: {', '.join(s.name for s in specs) or 'none'}")
        with _starting_servers():
            graph = create_tool_loop(
                model,
                [],
                mcp_servers=toolset,
                max_rounds=args.max_rounds,
                concurrency=args.concurrency,
                plan_mode=args.plan_mode,
            )
        return asyncio.run(_stream(graph, " ".join(args.question), progress))
    finally:
        toolset.close()


def _demo_command(args: argparse.Namespace, progress: Progress) -> dict[str, Any]:
    from agentloop.demo import DEMO_QUESTION, build_demo_loop, demo_notes_file
    from agentloop.mcp_toolset import MCPToolset
    from agentloop.servers import bundled_servers_config

    toolset = MCPToolset(bundled_servers_config(demo_notes_file()))
    try:
        progress.line("starting the bundled MCP servers: docs, calculator, notes")
        with _starting_servers():
            graph = build_demo_loop(mcp_servers=toolset)
        return asyncio.run(_stream(graph, " ".join(args.question) or DEMO_QUESTION, progress))
    finally:
        toolset.close()


def _print_result(out: Mapping[str, Any], args: argparse.Namespace) -> None:
    if args.json:
        document = {
            "question": out.get("user_input", ""),
            "answer": out.get("answer", ""),
            "rounds": (out.get("round_state") or {}).get("round_index", 0),
            "records": out.get("tool_logs") or [],
            "action_results": out.get("action_results") or {},
            "rollbacks": out.get("rollbacks") or [],
        }
        sys.stdout.write(json.dumps(document, ensure_ascii=False, indent=2, default=str) + "\n")
    else:
        if not args.quiet:
            sys.stderr.write("\n" + RunReport(out).to_text(include_answer=False) + "\n\n")
            sys.stderr.flush()
        sys.stdout.write(str(out.get("answer", "")) + "\n")
    sys.stdout.flush()


def _error(code: int, message: str, progress: Progress | None) -> int:
    if progress is not None:
        progress.close()  # the live status line, if any, makes way for the error
    sys.stderr.write(f"{_ERROR_PREFIX}{message}\n")
    sys.stderr.flush()
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `agentloop` command.

    Args:
        argv: The arguments (default: `sys.argv[1:]`).

    Returns:
        The exit code (see the module docstring).
    """
    progress: Progress | None = None
    try:
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as exit_:  # --help
            return exit_.code if isinstance(exit_.code, int) else EXIT_OK
        progress = Progress(sys.stderr, live=sys.stderr.isatty(), enabled=not args.quiet)
        command = _run_command if args.command == "run" else _demo_command
        out = command(args, progress)
        _print_result(out, args)
        return run_exit_code(out)
    except KeyboardInterrupt:
        return _error(EXIT_INTERRUPTED, "interrupted", progress)
    except BaseExceptionGroup as group:
        if not any(isinstance(leaf, KeyboardInterrupt) for leaf in _leaves(group)):
            raise
        return _error(EXIT_INTERRUPTED, "interrupted", progress)
    except _CliError as error:
        return _error(error.code, error.message, progress)
    except ConfigurationError as error:
        return _error(EXIT_USAGE, _one_line(error), progress)


if __name__ == "__main__":
    raise SystemExit(main())
