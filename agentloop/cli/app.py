"""The `agentloop` command's runs: the loop, its MCP servers, progress and the exit code.

Imported by `agentloop.cli.main` once the arguments parsed: `--help` and `--version`
never load LangChain or LangGraph.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
import tempfile
import traceback
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentloop.cli.failures import ModelFailure, ModelFailures
from agentloop.cli.parser import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_SERVER,
    EXIT_USAGE,
    MODEL_ENV,
    CliError,
    json_document,
)
from agentloop.cli.screen import Progress, Screen
from agentloop.errors import ConfigurationError
from agentloop.observability.redaction import install_log_redaction, installed_log_redaction

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from agentloop.mcp import MCPToolset

__all__ = ["Progress", "cli_logging", "run", "run_exit_code"]

_NO_MODEL = (
    f"no model: pass --model provider:name or set {MODEL_ENV}; `agentloop demo` runs without one"
)

_ERROR_PREFIX = "agentloop: error: "


def run_exit_code(state: Mapping[str, Any]) -> int:
    """Return the exit code of a run that finished without a model failure.

    1 if every tool call failed (or the planner's plans could not be used), else 0.
    """
    if state.get("status") in ("planner_failed", "answer_failed"):
        return EXIT_FAILED
    records = state.get("tool_logs") or []
    if records and not any(record.get("success") for record in records):
        return EXIT_FAILED
    return EXIT_OK


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def _startup_error(error: BaseException) -> CliError | None:
    """Map an error raised while the MCP servers start to its exit code."""
    leaves = _leaves(error)
    for leaf in leaves:
        if isinstance(leaf, ConfigurationError):
            return CliError(EXIT_USAGE, _one_line(leaf))
    for leaf in leaves:
        if isinstance(leaf, TimeoutError):
            return CliError(EXIT_SERVER, f"MCP servers did not start in time: {_one_line(leaf)}")
        if isinstance(leaf, OSError):  # MCPTransportError is a ConnectionError
            return CliError(EXIT_SERVER, _one_line(leaf))
    return None


@contextlib.contextmanager
def _starting_servers(toolset: MCPToolset, *, require_one: bool = False) -> Iterator[None]:
    """Report a server that cannot be started (or a bad allow list) as a `CliError`.

    The library's warnings about servers left out are held meanwhile: when the start
    fails (`require_one`: no server started), the error line says the causes, once;
    otherwise they are shown.
    """
    held: list[logging.LogRecord] = []

    def hold(record: logging.LogRecord) -> bool:
        if record.name.startswith("agentloop.mcp") and record.levelno == logging.WARNING:
            held.append(record)
            return False
        return True

    handlers = list(logging.getLogger("agentloop").handlers)  # the command's own
    for handler in handlers:
        handler.addFilter(hold)
    try:
        try:
            yield
        finally:
            for handler in handlers:
                handler.removeFilter(hold)
        if require_one:
            _require_some_server(toolset)
    except Exception as error:
        mapped = error if isinstance(error, CliError) else _startup_error(error)
        if mapped is None:
            raise
        raise mapped from error
    for record in held:
        logging.getLogger(record.name).handle(record)


def resolve_model(name: str) -> BaseChatModel:
    """Create the chat model `--model` names (the model machinery is imported here).

    Raises:
        ConfigurationError: No known provider or model, or the provider's package is missing.
    """
    from agentloop.models.resolve import resolve_model as resolve

    return resolve(name)


def _notes_file() -> Path:
    return Path(tempfile.gettempdir()) / "agentloop-notes.jsonl"


def _run_command(
    args: argparse.Namespace, screen: Screen, failures: ModelFailures
) -> dict[str, Any]:
    from agentloop.cli.servers import bundled_servers_config
    from agentloop.graph import create_tool_loop
    from agentloop.mcp import MCPToolset, load_mcp_config

    name = args.model or os.environ.get(MODEL_ENV, "").strip()
    if not name:
        raise CliError(EXIT_USAGE, _NO_MODEL)
    specs = load_mcp_config(args.mcp_config or bundled_servers_config(_notes_file()))
    model = resolve_model(name)
    toolset = MCPToolset(specs)
    redaction = install_log_redaction(toolset.redact)  # before any server starts and logs
    try:
        names = ", ".join(spec.name for spec in specs) or "none"
        screen.progress.line(f"starting MCP servers: {names}")
        with _starting_servers(toolset, require_one=True):
            graph = create_tool_loop(
                model,
                [toolset],
                max_rounds=args.max_rounds,
                concurrency=args.concurrency,
                plan_mode=args.plan_mode,
            )
        return asyncio.run(screen.stream(graph, " ".join(args.question), [failures]))
    finally:
        toolset.close()
        redaction.remove(toolset.redact)


def _require_some_server(toolset: MCPToolset) -> None:
    """Stop when no configured server started: the run would have no tools at all."""
    unavailable = toolset.unavailable
    if toolset.specs and len(unavailable) == len(toolset.specs):
        reasons = "; ".join(" ".join(reason.split()) for reason in unavailable.values())
        raise CliError(EXIT_SERVER, reasons)


class _ServerLineFormatter(logging.Formatter):
    """A server's line as `[name] line` (the server's name ends its logger's name)."""

    def format(self, record: logging.LogRecord) -> str:
        return f"[{record.name.rsplit('.', 1)[-1]}] {record.getMessage()}"


@contextlib.contextmanager
def cli_logging(*, quiet: bool, verbose: bool = False) -> Iterator[None]:
    """Show the library's warnings as `agentloop: WARNING: ...` lines (only errors if quiet).

    Log records are redacted (`install_log_redaction`) while the command runs.

    Servers' stderr and log messages are logged at INFO under `agentloop.mcp.server`, so
    they stay out of the terminal unless `verbose` (then as `[server] line`); the MCP
    SDK's and asyncio's own messages are held to the same level. `verbose` also shows
    which tools were classified as writes by default. The previous logging setup is
    restored on exit.
    """
    installed_before = installed_log_redaction()
    redaction = install_log_redaction()
    level = logging.ERROR if quiet else logging.WARNING
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("agentloop: %(levelname)s: %(message)s"))
    library = logging.getLogger("agentloop")
    sdk = ("mcp", "client", "httpx", "httpx2")  # the MCP SDK's (mcp 2.x: its session's, httpx2)
    loggers = [logging.getLogger(name) for name in ("agentloop", "asyncio", *sdk)]
    saved = [(logger, logger.level) for logger in loggers]
    propagate = library.propagate
    library.addHandler(handler)
    library.propagate = False
    for logger in loggers:
        logger.setLevel(level)
    servers = logging.getLogger("agentloop.mcp.server")
    server_handler = logging.StreamHandler(sys.stderr)
    server_handler.setFormatter(_ServerLineFormatter())
    saved.append((servers, servers.level))
    servers_propagate = servers.propagate
    policy = logging.getLogger("agentloop.policy")
    saved.append((policy, policy.level))
    if verbose:
        policy.setLevel(logging.INFO)  # which tools were classified as writes by default
        servers.setLevel(logging.INFO)
        servers.addHandler(server_handler)
        servers.propagate = False
    try:
        yield
    finally:
        servers.removeHandler(server_handler)
        servers.propagate = servers_propagate
        library.removeHandler(handler)
        library.propagate = propagate
        for logger, saved_level in saved:
            logger.setLevel(saved_level)
        if installed_before is None:
            redaction.uninstall()


def _demo_command(
    args: argparse.Namespace, screen: Screen, failures: ModelFailures
) -> dict[str, Any]:
    from agentloop.cli.demo import DEMO_QUESTION, build_demo_loop, demo_notes_file
    from agentloop.cli.servers import bundled_servers_config
    from agentloop.mcp import MCPToolset

    toolset = MCPToolset(bundled_servers_config(demo_notes_file()))
    redaction = install_log_redaction(toolset.redact)  # before any server starts and logs
    try:
        screen.progress.line("starting the bundled MCP servers: docs, calculator, notes")
        with _starting_servers(toolset):
            graph = build_demo_loop(toolset=toolset, plan_mode=args.plan_mode)
        question = " ".join(args.question) or DEMO_QUESTION
        return asyncio.run(screen.stream(graph, question, [failures]))
    finally:
        toolset.close()
        redaction.remove(toolset.redact)


def _print_result(
    out: Mapping[str, Any], args: argparse.Namespace, failure: ModelFailure | None, screen: Screen
) -> None:
    """Write the answer (or the JSON document) on stdout; nothing but JSON on failure."""
    screen.close()
    if args.json:
        sys.stdout.write(json_document(out, failure.message if failure else None))
        sys.stdout.flush()
    elif failure is None:
        screen.report(out)
        screen.answer.show(str(out.get("answer", "")))


def _error(
    code: int,
    message: str,
    screen: Screen | None,
    error: BaseException | None = None,
    *,
    verbose: bool = False,
) -> int:
    if screen is not None:
        screen.close()  # the live views, if any, make way for the error
    if verbose and error is not None:
        sys.stderr.write("".join(traceback.format_exception(error)))
    sys.stderr.write(f"{_ERROR_PREFIX}{message}\n")
    sys.stderr.flush()
    return code


def run(args: argparse.Namespace) -> int:
    """Run the parsed command.

    Returns:
        The exit code (see `agentloop.cli`).
    """
    screen: Screen | None = None
    verbose = args.verbose
    try:
        screen = Screen.open(quiet=args.quiet, stream_answer=not args.json)
        command = _run_command if args.command == "run" else _demo_command
        failures = ModelFailures()
        with cli_logging(quiet=args.quiet, verbose=verbose):
            out = command(args, screen, failures)
        failure = failures.failure(out)
        _print_result(out, args, failure, screen)
        if failure is not None:
            return _error(failure.code, failure.message, screen, failure.error, verbose=verbose)
        return run_exit_code(out)
    except KeyboardInterrupt:
        return _failed(args, EXIT_INTERRUPTED, "interrupted", screen)
    except BaseExceptionGroup as group:
        if not any(isinstance(leaf, KeyboardInterrupt) for leaf in _leaves(group)):
            return _unexpected(args, group, screen)
        return _failed(args, EXIT_INTERRUPTED, "interrupted", screen)
    except CliError as error:
        return _failed(args, error.code, error.message, screen, error)
    except ConfigurationError as error:
        return _failed(args, EXIT_USAGE, _one_line(error), screen, error)
    except Exception as error:
        return _unexpected(args, error, screen)


def _failed(
    args: argparse.Namespace,
    code: int,
    message: str,
    screen: Screen | None,
    error: BaseException | None = None,
) -> int:
    """Report a run that ended before its state: the error line (and the `--json` document)."""
    if args.json:
        sys.stdout.write(json_document({"user_input": " ".join(args.question)}, message))
        sys.stdout.flush()
    return _error(code, message, screen, error, verbose=args.verbose)


def _unexpected(args: argparse.Namespace, error: BaseException, screen: Screen | None) -> int:
    """Report an error the command has no words for: one line, the traceback with -v."""
    hint = "" if args.verbose else " (run with --verbose for the traceback)"
    message = f"{type(error).__name__}: {_one_line(error)}{hint}"
    return _failed(args, EXIT_FAILED, message, screen, error)
