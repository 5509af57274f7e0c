"""The typed identity of a call: its run, its round and its position in the plan.

A call id is built from its parts, never parsed back out of its string form: the string
(`<run>:<round>:<position>`) is what records and events show as `call_id`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["CallId", "kept_under", "round_label", "tool_call_id"]


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

    @property
    def tool_call_id(self) -> str:
        """The call's id in the transcript when the planner gave none of its own.

        `call_<run>_<round>_<position>`: letters, digits and `_` only, as every
        provider accepts a tool call id, should the transcript reach a model.
        """
        return _transcript_id(self.run_id, self.round_label, self.position)

    def __str__(self) -> str:
        """The form records and events show as `call_id`: `<run>:<round>:<position>`."""
        return f"{self.run_id}:{self.round_label}:{self.position}"


def tool_call_id(call: Mapping[str, Any]) -> str:
    """The transcript id of a prepared call: its own, else the one its `CallId` gives."""
    given = call.get("tool_call_id")
    if given:
        return str(given)
    return _transcript_id(str(call["run_id"]), str(call["round_label"]), int(call["index"]))


def kept_under(call: Mapping[str, Any]) -> str:
    """The invocation under which the loop keeps a call's things in memory.

    The call's own (`PreparedCall.invocation`), else its run id (a call checkpointed by
    an earlier version).
    """
    return str(call.get("invocation") or call["run_id"])


def _transcript_id(run_id: str, label: str, position: int) -> str:
    """`CallId.tool_call_id` of a call's parts."""
    return f"call_{run_id}_{label.replace('.', '_')}_{position}"
