"""The typed identity of a call: its run, its round and its position in the plan.

A call id is built from its parts, never parsed back out of its string form: the string
(`<run>:<round>:<position>`) is what records and events show as `call_id`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CallId", "round_label"]


def round_label(round_index: int, rollbacks: int) -> str:
    """Label a round: its index, with the number of rollbacks that re-planned it (`"2.1"`)."""
    return f"{round_index}.{rollbacks}" if rollbacks else str(round_index)


@dataclass(frozen=True)
class CallId:
    """Where a call sits in its run.

    Attributes:
        run_id: The loop run (stable across resume, replay and fork).
        round_label: The round (`round_label`).
        position: The command's position (0-based) in its plan.
    """

    run_id: str
    round_label: str
    position: int

    @property
    def in_run(self) -> str:
        """The call's place within its run: `<round>:<position>`."""
        return f"{self.round_label}:{self.position}"

    def __str__(self) -> str:
        """The form records and events show as `call_id`: `<run>:<round>:<position>`."""
        return f"{self.run_id}:{self.in_run}"
