"""The answer on stdout: streamed token by token as Markdown on a terminal, else plain text."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.messages import AIMessageChunk
from rich.console import Console
from rich.live import Live
from rich.markdown import Markdown

from agentloop.messages import message_text
from agentloop.nodes.answer import ANSWER_TAGS

__all__ = ["AnswerView", "is_answer_token"]


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
