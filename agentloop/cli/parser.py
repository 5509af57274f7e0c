"""The `agentloop` command's arguments: `run` and `demo`, errors as one line."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import Any, NoReturn

from agentloop import __version__

__all__ = ["EXIT_CODES_HELP", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_MODEL_UNAVAILABLE",
           "EXIT_OK", "EXIT_SERVER", "EXIT_USAGE", "MODEL_ENV", "PLAN_MODES", "CliError",
           "build_parser", "json_document"]  # fmt: skip

EXIT_OK = 0
"""The run succeeded."""
EXIT_FAILED = 1
"""The run finished, but every tool call failed or no plan was usable (see `status`); or an
unexpected error."""
EXIT_USAGE = 2
"""Usage or configuration error: a missing, unknown or misconfigured model (rejected
credentials or permissions, no such model, a request it rejects), a bad MCP config file."""
EXIT_SERVER = 3
"""An MCP server could not be started or reached."""
EXIT_MODEL_UNAVAILABLE = 4
"""The model stayed unavailable through every retry (rate limited, unreachable, too slow)."""
EXIT_INTERRUPTED = 130
"""Interrupted by Ctrl-C."""

PLAN_MODES = ("json", "tool", "native")
"""`agentloop.settings.PlanMode`'s values, spelled out so that `--help` loads no LangGraph
(a test holds the two together)."""
MODEL_ENV = "AGENTLOOP_MODEL"
"""The environment variable `run` reads its model from when `--model` is not given."""

EXIT_CODES_HELP = """\
exit codes:
  0    success
  1    the run finished, but every tool call failed or no plan was usable
  2    usage or configuration error (no model, an unknown model or one that rejects
       the credentials, permissions or request; a bad MCP config file)
  3    an MCP server could not be started or reached
  4    the model stayed unavailable through every retry (rate limit, unreachable)
  130  interrupted (Ctrl-C)
"""


class CliError(Exception):
    """An error reported as one line on stderr, with the exit code it maps to."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, like every other error of the CLI."""

    def error(self, message: str) -> NoReturn:
        raise CliError(EXIT_USAGE, f"{message} (see `{self.prog} --help`)")


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
        epilog=EXIT_CODES_HELP,
        formatter_class=formatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="{run,demo}", parser_class=_Parser)
    commands.required = True

    output = _Parser(add_help=False)  # what both commands take
    output.add_argument(
        "--json",
        action="store_true",
        help="print one JSON document (answer, rounds, records, action_results) on stdout",
    )
    output.add_argument(
        "-q", "--quiet", action="store_true", help="no progress or summary on stderr"
    )
    output.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="show the traceback of an error, and what the MCP servers write to stderr "
        "(and their log messages) as they run",
    )
    output.add_argument(
        "--plan-mode",
        choices=PLAN_MODES,
        default="json",
        help="json: the plan as message text (any model); tool: one plan tool call; "
        "native: the planner calls the tools themselves (models with tool calling)",
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
        epilog=EXIT_CODES_HELP,
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
        help="a JSON / YAML file of mcpServers (replaces the bundled servers); a server's "
        'default "scope": "toolset" shares its session and state between runs, '
        '"thread" or "run" keeps them apart',
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

    demo = commands.add_parser(
        "demo",
        parents=[output],
        help="run the demo loop (no API key, no network)",
        description=(
            "Run the demo loop on a question: a rule-based local planner and the bundled\n"
            "MCP servers as subprocesses. Needs no API key and no network."
        ),
        epilog=EXIT_CODES_HELP,
        formatter_class=formatter,
    )
    demo.add_argument("question", nargs="*", help="the question (default: the demo question)")
    return parser


def json_document(out: Mapping[str, Any], error: str | None) -> str:
    """The `--json` document of a run: its final state, or the question and the error.

    Args:
        out: The run's final state (on a failure before any state: the question alone,
            as `{"user_input": ...}`).
        error: What went wrong (None when the run succeeded).
    """
    document = {
        "question": out.get("user_input", ""),
        "answer": out.get("answer", ""),
        "rounds": (out.get("round_state") or {}).get("round_index", 0),
        "records": out.get("tool_logs") or [],
        "action_results": out.get("action_results") or {},
        "rollbacks": out.get("rollbacks") or [],
        "status": out.get("status", ""),
        "status_reason": out.get("status_reason", ""),
        "error": error,
    }
    return json.dumps(document, ensure_ascii=False, indent=2, default=str) + "\n"
