"""The run's transcript in `messages`, as `create_agent` keeps it.

Each executed plan is an `AIMessage` whose `tool_calls` are the round's commands (in
every plan mode: a JSON plan is translated), each call's outcome a `ToolMessage` (in
command order, `status` "success" or "error", the result as the model would read it,
the tool's `artifact`), and the answer the final `AIMessage`. Both are built from the
prepared calls and the records the loop keeps anyway: a call's `tool_call_id` is the id
on its `ToolCall`, on its `ToolMessage`, in its record and the one its tool sees.

The plan node writes a round's `AIMessage` (`planned_message`) before its `after_model`
hooks run, as `create_agent`'s model node writes the model's reply before its
`after_model` nodes: a hook reads the round's calls there and may rewrite them (the
message keeps its id) or answer some with a `ToolMessage` of its own
(`HumanInTheLoopMiddleware`'s reject, `ToolCallLimitMiddleware`'s blocked calls).
`execute` reads the round back from that message (`read_back`): a call the hook dropped
or answered does not run, an edited one runs with the message's name and arguments, and
the end of the round adds no second `ToolMessage` for a call that has one (`round_outcomes`).

This transcript is what every model request carries (`agentloop.planning.prompt`): a
`before_model` hook or a `wrap_model_call` middleware that changes it (`PIIMiddleware`
redacting a result, `SummarizationMiddleware` replacing old turns,
`ContextEditingMiddleware` clearing old results) changes what the model reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolCall, ToolMessage

from agentloop.base.messages import NOT_HUMAN_TYPES
from agentloop.governance.call_id import CallId, tool_call_id
from agentloop.planning.templates import to_prompt_json
from agentloop.state import (
    PreparedCall,
    ToolCommand,
    ToolExecutionRecord,
)

__all__ = [
    "RoundReadBack",
    "outcome_content",
    "plan_message",
    "plan_message_id",
    "planned_call_ids",
    "planned_message",
    "read_back",
    "round_outcomes",
    "tool_message",
    "tool_messages",
]


def plan_message_id(run_id: str, round_label: str) -> str:
    """The id of a round's `AIMessage`: the same whenever the round is planned again."""
    return f"{run_id}:{round_label}:plan"


def planned_call_ids(commands: Sequence[ToolCommand], run_id: str, round_label: str) -> list[str]:
    """The `tool_call_id` of each command of a plan, as `execute` names its calls.

    The planner's own id, the first time it appears in the plan; otherwise the one the
    call's `CallId` gives.
    """
    ids: list[str] = []
    taken: set[str] = set()
    for position, command in enumerate(commands):
        given = command.get("tool_call_id") or ""
        if not given or given in taken:
            given = CallId(run_id, round_label, position).tool_call_id
        taken.add(given)
        ids.append(given)
    return ids


def planned_message(commands: Sequence[ToolCommand], run_id: str, round_label: str) -> AIMessage:
    """The `AIMessage` of a plan's commands, before they are prepared (the plan node's).

    The same message `plan_message` makes of the prepared calls: one `ToolCall` per
    command, in order, with the arguments as planned.
    """
    ids = planned_call_ids(commands, run_id, round_label)
    tool_calls = [
        ToolCall(
            name=command["tool_name"],
            args=dict(command["tool_kwargs"]) if isinstance(command["tool_kwargs"], dict) else {},
            id=call_id,
            type="tool_call",
        )
        for command, call_id in zip(commands, ids, strict=True)
    ]
    return AIMessage("", tool_calls=tool_calls, id=plan_message_id(run_id, round_label))


def _find_plan(messages: Sequence[BaseMessage], message_id: str) -> int | None:
    """The position of the round's `AIMessage` in `messages`, searched from the end.

    The search stops at the turn's `HumanMessage`: a round's message comes after it.
    """
    for position in range(len(messages) - 1, -1, -1):
        message = messages[position]
        if message.id == message_id and isinstance(message, AIMessage):
            return position
        if message.type not in NOT_HUMAN_TYPES and isinstance(message, HumanMessage):
            return None
    return None


def round_outcomes(
    records: Sequence[ToolExecutionRecord], messages: Sequence[BaseMessage], message_id: str
) -> list[ToolMessage]:
    """The `ToolMessage`s a round's records add to the transcript (at the end of the round).

    One per call of the round's `AIMessage` that no `ToolMessage` answers yet: a call a
    hook answered keeps the hook's message, one it removed from the plan gets none.
    """
    start = _find_plan(messages, message_id)
    if start is None:
        return tool_messages(records)
    plan = messages[start]
    assert isinstance(plan, AIMessage)
    planned = {call["id"] for call in plan.tool_calls}
    later = messages[start + 1 :]
    answered = {message.tool_call_id for message in later if isinstance(message, ToolMessage)}
    return [
        message
        for message in tool_messages(records)
        if message.tool_call_id in planned and message.tool_call_id not in answered
    ]


@dataclass
class RoundReadBack:
    """A round's commands as the transcript's `AIMessage` holds them after the hooks.

    Attributes:
        found: Whether the transcript has the round's `AIMessage` (else the plan runs as
            decided, and `execute` writes the message).
        commands: Each command, by position, with the message's name and arguments
            (a hook's edit), for the calls that are to run.
        answered: The `ToolMessage` a hook gave in place of a call, by position (the
            call does not run).
        dropped: The positions of calls a hook removed from the message (not run).
    """

    found: bool
    commands: dict[int, ToolCommand] = field(default_factory=dict)
    answered: dict[int, ToolMessage] = field(default_factory=dict)
    dropped: list[int] = field(default_factory=list)


def read_back(
    commands: Sequence[ToolCommand],
    messages: Sequence[BaseMessage],
    run_id: str,
    round_label: str,
) -> RoundReadBack:
    """Read a round's commands back from its `AIMessage`, as the hooks left it."""
    start = _find_plan(messages, plan_message_id(run_id, round_label))
    if start is None:
        return RoundReadBack(found=False, commands=dict(enumerate(commands)))
    message = messages[start]
    assert isinstance(message, AIMessage)
    by_id = {call["id"]: call for call in message.tool_calls if call.get("id")}
    answers = {
        item.tool_call_id: item for item in messages[start + 1 :] if isinstance(item, ToolMessage)
    }
    read = RoundReadBack(found=True)
    ids = planned_call_ids(commands, run_id, round_label)
    for position, (command, call_id) in enumerate(zip(commands, ids, strict=True)):
        if call_id in answers:
            read.answered[position] = answers[call_id]
        elif call_id not in by_id:
            read.dropped.append(position)
        else:
            call = by_id[call_id]
            args = call["args"] if isinstance(call["args"], dict) else {}
            if call["name"] == command["tool_name"] and args == command["tool_kwargs"]:
                read.commands[position] = command
            else:
                read.commands[position] = {
                    **command,
                    "tool_name": call["name"],
                    "tool_kwargs": dict(args),
                }
    return read


def plan_message(calls: Sequence[PreparedCall], message_id: str) -> AIMessage:
    """The `AIMessage` that asks for a round's calls, one `ToolCall` per command, in order.

    Args:
        calls: The round's prepared calls (those settled without running included).
        message_id: The message's id, the same whenever the round is prepared again
            (a resumed or replayed run replaces it instead of adding a copy).
    """
    tool_calls = [
        ToolCall(
            name=call["tool_name"],
            args=dict(call["kwargs"]) if isinstance(call["kwargs"], dict) else {},
            id=tool_call_id(call),
            type="tool_call",
        )
        for call in calls
    ]
    return AIMessage("", tool_calls=tool_calls, id=message_id)


def outcome_content(record: ToolExecutionRecord) -> str:
    """A call's outcome as the model reads it: the result, or what went wrong.

    A flagged call gives its error; a stale fallback the error beside the stale result;
    another failure the error result the loop hands the model (with a suggestion), or
    its error.
    """
    value: Any
    if record.get("flagged"):
        value = record["error"]
    elif record.get("stale"):
        value = {
            "error": record["error"],
            "stale_result": record["result"],
            "stale_age_s": record.get("stale_age_s", 0.0),
        }
    elif record["success"] or record["result"] is not None:
        value = record["result"]
    else:
        value = record["error"]
    return value if isinstance(value, str) else to_prompt_json(value)


def tool_messages(records: Sequence[ToolExecutionRecord]) -> list[ToolMessage]:
    """One `ToolMessage` per record, in the order given (command order).

    Records that share their result object (the refusals of a plan's commands over the
    round's cap) have it rendered once.
    """
    rendered: dict[int, str] = {}
    return [tool_message(record, rendered) for record in records]


_MESSAGE_FIELDS: dict[str, Any] = {
    "call_id": "",
    "tool_call_id": "",
    "flagged": False,
    "stale": False,
    "artifact": None,
}
"""The optional record fields a `ToolMessage` reads, with their defaults: the record is
merged over them once, so one message per call reads its fields without `get` calls."""


def tool_message(
    record: ToolExecutionRecord, rendered: dict[int, str] | None = None
) -> ToolMessage:
    """The `ToolMessage` of one call's record (its id: the call id, `:outcome`).

    Args:
        record: The call's record.
        rendered: Contents already rendered, by the id of the result object they render
            (filled here): a result several records share is rendered once.
    """
    fields: dict[str, Any] = {**_MESSAGE_FIELDS, **record}
    call_id = fields["call_id"] or ""
    success = fields["success"]
    result = fields["result"]
    plain = not (fields["flagged"] or fields["stale"])
    # the usual outcome, a text result, inline; any other through `outcome_content`
    if plain and type(result) is str and success:
        content = result
    elif plain and rendered is not None and isinstance(result, dict | list):
        content = rendered.get(id(result)) or rendered.setdefault(
            id(result), outcome_content(record)
        )
    else:
        content = outcome_content(record)
    return ToolMessage(
        content,
        tool_call_id=fields["tool_call_id"] or call_id,
        name=fields["tool_name"],
        status="success" if success else "error",
        artifact=fields["artifact"],
        id=f"{call_id}:outcome" if call_id else None,
    )
