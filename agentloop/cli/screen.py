"""What the command shows while a run streams: progress on stderr, the answer on stdout.

Progress: on a terminal, a live display (`rich.progress`) shows the round and its phase
and each call in flight with its elapsed time, above which the events scroll as coloured
lines; it disappears when the run ends. Anywhere else (a pipe, a file, CI) each event is
one plain line, with no colour and no control characters. `rich` honours `NO_COLOR`.

The answer: streamed token by token as Markdown on a terminal, else plain text.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessageChunk
from rich.console import Console
from rich.live import Live
from rich.markdown import Markdown
from rich.progress import Progress as LiveProgress
from rich.progress import ProgressColumn, SpinnerColumn, Task, TaskID, TextColumn
from rich.text import Text

from agentloop.base.messages import message_text
from agentloop.nodes.answer_call import ANSWER_TAGS
from agentloop.observability.display import RunReport, compact_json, shorten

__all__ = ["AnswerView", "Progress", "Screen", "is_answer_token"]


class _Seconds(ProgressColumn):
    """How long a task has run, in tenths of a second ("1.4s")."""

    def render(self, task: Task) -> Text:
        return Text(f"{task.elapsed or 0.0:.1f}s", style="dim")


class Progress:
    """Shows a run's events on a console (stderr).

    Args:
        console: Where to write; live only when it is a terminal.
        enabled: Write nothing when False.
    """

    def __init__(self, console: Console, *, enabled: bool = True) -> None:
        self.console = console
        self.enabled = enabled
        self.live = enabled and console.is_terminal
        self.commands: list[Mapping[str, Any]] = []
        self.round = 0
        self.phase = "starting the MCP servers"
        self.started = time.monotonic()
        self._display: LiveProgress | None = None
        self._status: TaskID | None = None
        self._calls: dict[str, TaskID] = {}

    # -- output --------------------------------------------------------------------------

    def start(self) -> None:
        """Start the live display (terminal only)."""
        if not self.live or self._display is not None:
            return
        self._display = LiveProgress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            _Seconds(),
            console=self.console,
            transient=True,
        )
        self._display.start()
        self._status = self._display.add_task(self.status_text(), total=None)

    def line(self, text: str, style: str = "") -> None:
        """Write one event line (above the live display on a terminal)."""
        if self.enabled:
            self._update_status()
            if self._display is not None:
                self._display.refresh()  # the live view shows the state the line reports
            self.console.print(Text(text, style=style), soft_wrap=True)

    def status_text(self) -> str:
        """Return the status: round and phase."""
        return f"round {self.round}: {self.phase}" if self.round else self.phase

    def _update_status(self) -> None:
        if self._display is not None and self._status is not None:
            self._display.update(self._status, description=self.status_text())

    def close(self) -> None:
        """Remove the live display."""
        if self._display is not None:
            self._display.stop()
            self._display = None
            self._calls.clear()

    # -- stream chunks -------------------------------------------------------------------

    def values(self, state: Mapping[str, Any]) -> None:
        """Take a `values` chunk: remember the planned commands (for their arguments)."""
        decision: Mapping[str, Any] = state.get("decision") or {}
        self.commands = list(decision.get("execution_commands") or [])

    def _arguments(self, event: Mapping[str, Any], tool_name: str) -> str:
        written = event.get("kwargs")
        if isinstance(written, dict):
            return shorten(compact_json(written), 80)
        index = int(event.get("index", -1))
        if 0 <= index < len(self.commands):
            command = self.commands[index]
            if command.get("tool_name") == tool_name:
                return shorten(compact_json(command.get("tool_kwargs") or {}), 80)
        return ""

    def _call_started(self, call_id: str, label: str) -> None:
        if self._display is not None:
            self._calls[call_id] = self._display.add_task(f"  {label}", total=None)

    def _call_ended(self, call_id: str) -> None:
        task = self._calls.pop(call_id, None)
        if self._display is not None and task is not None:
            self._display.remove_task(task)

    def event(self, event: Mapping[str, Any]) -> None:
        """Take a `custom` chunk: one event of the loop."""
        kind = event.get("type")
        tool = str(event.get("tool_name", ""))
        call_id = str(event.get("call_id", ""))
        if kind == "round_started":
            self.round = int(event.get("round_index", 0)) + 1
            self.phase = "planning"
            again = " again" if event.get("replan") else ""
            self.line(f"round {self.round}: planning{again}...", "bold")
        elif kind == "plan_decided":
            self.phase = "executing" if event.get("command_count") else "planned"
            if event.get("parse_error") and event.get("chunks"):  # a reply, but unusable
                self.line(f"  planner: {shorten(str(event['parse_error']), 200)}", "yellow")
            self._update_status()
        elif kind == "tool_started":
            label = f"{tool}({self._arguments(event, tool)})"
            self._call_started(call_id, label)
            self.line(f"  -> {label} ...", "cyan")
        elif kind == "tool_retry":
            error = shorten(str(event.get("error", "")), 120)
            self.line(
                f"  retry {tool}: attempt {event.get('attempt')} failed ({error}), "
                f"waiting {float(event.get('wait_s', 0.0)):.1f}s",
                "yellow",
            )
        elif kind == "tool_error":
            self._call_ended(call_id)
            self.line(f"  ERR {tool}: {shorten(str(event.get('error', '')), 200)}", "red")
        elif kind == "tool_completed":
            self._call_ended(call_id)
            if event.get("success"):
                duration = float(event.get("duration_ms", 0.0))
                self.line(f"  ok {tool} {duration:.0f} ms{_how(event)}", "green")
        elif kind == "tool_rolled_back":
            self.line(f"  round {self.round} rolled back: every call was flagged", "yellow")
        elif kind == "answer_started":
            self.phase = "answering"
            self.line("answering...", "bold")
        elif kind == "answer_completed":
            self.phase = "done"  # a failed answer is the command's error line
            self._update_status()


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


def is_answer_token(message: Any, metadata: Mapping[str, Any]) -> bool:
    """Whether a `messages` stream chunk is a token of this loop's own answer.

    Tokens of the planner, of sub-agents (their calls run in a nested namespace) and the
    messages nodes return whole are not.
    """
    return (
        isinstance(message, AIMessageChunk)
        and ANSWER_TAGS[0] in (metadata.get("tags") or ())
        and "|" not in str(metadata.get("langgraph_checkpoint_ns", ""))
    )


class AnswerView:
    """Shows the answer on a console (stdout).

    On a terminal the tokens are drawn as Markdown while they arrive, in a live view that
    is cleared at the end, when `show` draws the whole answer once (so a run that fails
    leaves nothing on stdout). Elsewhere only `show` writes, the answer as plain text.

    Args:
        console: Where to write.
        stream: Draw the tokens as they arrive (terminal only).
    """

    def __init__(self, console: Console, *, stream: bool = True) -> None:
        self.console = console
        self.streaming = stream and console.is_terminal
        self.text = ""
        self._live: Live | None = None

    def token(self, message: Any) -> None:
        """Take one token of the answer."""
        if not self.streaming:
            return
        self.text += message_text(message)
        if self._live is None:
            self._live = Live(
                Markdown(self.text),
                console=self.console,
                transient=True,
                refresh_per_second=12,
                vertical_overflow="visible",
            )
            self._live.start()
        else:
            self._live.update(Markdown(self.text), refresh=True)  # token by token

    @property
    def started(self) -> bool:
        """Whether tokens are being drawn."""
        return self._live is not None

    def close(self) -> None:
        """Clear the tokens drawn so far."""
        if self._live is not None:
            self._live.stop()
            self._live = None

    def show(self, answer: str) -> None:
        """Write the whole answer: as Markdown on a terminal, else as it is."""
        self.close()
        if self.console.is_terminal:
            self.console.print(Markdown(answer))
        else:
            self.console.file.write(answer + "\n")
            self.console.file.flush()


@dataclass
class Screen:
    """The command's two consoles and what each shows.

    Colour and live views only on a terminal (`rich` also honours `NO_COLOR`); piped or
    redirected, stderr gets one plain line per event and stdout the plain answer.
    """

    progress: Progress
    """The run's events, on stderr."""
    answer: AnswerView
    """The answer, on stdout."""

    @classmethod
    def open(cls, *, quiet: bool, stream_answer: bool) -> Screen:
        """Make the consoles of one command: `quiet` silences stderr's progress."""
        errors = Console(stderr=True, highlight=False)
        output = Console(highlight=False)
        return cls(Progress(errors, enabled=not quiet), AnswerView(output, stream=stream_answer))

    def close(self) -> None:
        """Remove the live views (before an error line, or when the run ends)."""
        self.progress.close()
        self.answer.close()

    @contextlib.contextmanager
    def live(self) -> Iterator[None]:
        """Show the live views while the block runs."""
        self.progress.start()
        try:
            yield
        finally:
            self.progress.close()

    async def stream(
        self, graph: Any, question: str, callbacks: list[BaseCallbackHandler]
    ) -> dict[str, Any]:
        """Run the graph on a question, showing its progress; return its final state."""
        final: dict[str, Any] = {}
        modes = ["custom", "values"] + (["messages"] if self.answer.streaming else [])
        with self.live():
            async for mode, chunk in graph.astream(
                {"user_input": question}, {"callbacks": callbacks}, stream_mode=modes
            ):
                if mode == "values":
                    final = chunk
                    self.progress.values(chunk)
                elif mode == "messages":
                    message, metadata = chunk
                    if is_answer_token(message, metadata):
                        if not self.answer.started:
                            self.progress.close()  # one live view at a time
                        self.answer.token(message)
                elif isinstance(chunk, Mapping):
                    self.progress.event(chunk)
        return final

    def report(self, out: Mapping[str, Any]) -> None:
        """Show the run report on stderr: a coloured table on a terminal, else plain text."""
        if not self.progress.enabled:
            return
        console = self.progress.console
        view = RunReport(out)
        console.print()
        if console.is_terminal:
            console.print(view.rich_view(include_answer=False, width=console.width))
        else:
            console.print(view.to_text(include_answer=False), soft_wrap=True, markup=False)
        console.print()
