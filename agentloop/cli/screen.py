"""What the command shows while a run streams: progress on stderr, the answer on stdout."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from rich.console import Console

from agentloop.cli.answer import AnswerView, is_answer_token
from agentloop.cli.progress import Progress
from agentloop.display import RunReport

__all__ = ["Screen"]


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
