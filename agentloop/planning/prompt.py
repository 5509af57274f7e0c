"""The planner's request, made from the run's transcript as the middleware left it.

Every model request of the loop carries the transcript (`messages`: the user's messages,
each round's `AIMessage` with its `tool_calls`, their `ToolMessage`s, the answers), as
`create_agent`'s does. Before a request is made the loop bounds it (`transcript_view`):
older long results are left out of planner requests (`keep_tool_results`), the earliest
turns trimmed (`history_turns`, `history_chars`); that view is what `wrap_model_call`
middleware sees in `ModelRequest.messages`. The model then gets, after the system
message (the app's instructions, then the loop's rules):

- `plan_mode="native"`: the messages as they are, as `create_agent`'s model gets them;
- `"json"` and `"tool"`: the same messages for a model that reads text
  (`as_text_transcript`: each plan as its JSON, each round's results in
  `<tool_results>`), then the round and its limit (`plan_user`), last, so a provider's
  prompt cache reuses all of the previous request but its end.
"""

from __future__ import annotations

import bisect
import json
import weakref
from collections.abc import Callable, Sequence
from functools import cache, partial
from typing import Any, TypeVar, cast

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from agentloop.base.messages import message_text
from agentloop.planning.templates import PromptSet, tagged_section, to_prompt_json

__all__ = [
    "OMITTED",
    "MessageViews",
    "PLAN_TOOL",
    "PLAN_TOOL_STRICT",
    "SHORT_RESULT_CHARS",
    "as_text_transcript",
    "default_prompts",
    "omits_results",
    "omitted_results",
    "plan_json",
    "round_message",
    "shown_result",
    "to_prompt_json",
    "transcript_view",
]

T = TypeVar("T")

OMITTED = "[omitted: seen in an earlier round]"
"""What a planner sees in place of an older result left out (`keep_tool_results`)."""

SHORT_RESULT_CHARS = 100
"""A result this short (an id, a name, a number) is never omitted: leaving it out would
save little and could cost the planner a value a later call needs."""


def _plan_tool(*, strict: bool) -> dict[str, Any]:
    """The plan's tool schema; `strict` closes every object and sends arguments as text."""
    closed: dict[str, Any] = {"additionalProperties": False} if strict else {}
    kwargs: dict[str, Any] = (
        {"type": "string", "description": "The tool's arguments as a JSON object text."}
        if strict
        else {"type": "object"}
    )
    command_fields = ["purpose", "tool_name", "tool_kwargs"]
    return {
        "type": "function",
        "function": {
            "name": "PlanDecision",
            "description": "Decide this round's action and the tool calls to execute.",
            **({"strict": True} if strict else {}),
            "parameters": {
                "type": "object",
                **closed,
                "properties": {
                    "next_action": {
                        "type": "string",
                        "enum": ["execute", "response"],
                        "description": "Decide first: 'execute' tools, or 'response' to answer.",
                    },
                    "execution_commands": {
                        "type": "array",
                        "description": "Calls to run in parallel this round (empty for response).",
                        "items": {
                            "type": "object",
                            **closed,
                            "properties": {
                                "purpose": {"type": "string"},
                                "tool_name": {"type": "string"},
                                "tool_kwargs": kwargs,
                                "todo_suggestion": {"type": "string"},
                            },
                            "required": [*command_fields, "todo_suggestion"]
                            if strict
                            else command_fields,
                        },
                    },
                },
                "required": ["next_action", "execution_commands"],
            },
        },
    }


PLAN_TOOL = _plan_tool(strict=False)
"""The structured-output schema of `plan_mode="tool"` (`next_action` first, so it streams first)."""
PLAN_TOOL_STRICT = _plan_tool(strict=True)
"""`PLAN_TOOL` for providers' strict structured output, where every object is closed: the
arguments travel as JSON text (decoded when the plan is normalized)."""


def omitted_results(seen: int, keep: int) -> int:
    """How many of the oldest results already shown to the planner are now omitted.

    They are omitted in blocks of `keep`, so the transcript only changes at its end
    between two blocks (a provider's prompt cache keeps reusing it): between `keep`
    and `2 * keep - 1` of the latest results already shown stay in full.

    Args:
        seen: Results shown in earlier requests (the last round's are not counted).
        keep: `keep_tool_results`; 0 omits every result already shown.
    """
    if keep <= 0:
        return seen
    return max(0, (seen // keep - 1) * keep)


class MessageViews:
    """What requests showed of each transcript message, made once while the message lives.

    A message of the transcript does not change (a middleware that edits one makes a new
    message): each view of it (an older result left out, a JSON plan as text, a result's
    line, what the answer reads of a result) is made for the first request that shows it
    and kept, by the message and the kind of view, until the message itself is gone. One
    per compiled loop (`LoopParts.views`): it holds no message, and no more views than
    the transcripts in memory hold messages.
    """

    def __init__(self) -> None:
        self._views: dict[tuple[str, int], tuple[weakref.ref[BaseMessage], Any]] = {}

    def __len__(self) -> int:
        """How many views are kept."""
        return len(self._views)

    def of(self, kind: str, message: BaseMessage, make: Callable[[Any], T]) -> T:
        """The view `kind` of a message, made by `make(message)` the first time."""
        key = (kind, id(message))
        kept = self._views.get(key)
        if kept is not None and kept[0]() is message:
            return cast(T, kept[1])
        view = make(message)
        views = self._views
        self._views[key] = (weakref.ref(message, lambda _: views.pop(key, None)), view)
        return view


def _omitted(message: BaseMessage) -> BaseMessage:
    return message.model_copy(update={"content": OMITTED})


def _older_results(messages: Sequence[BaseMessage], keep: int) -> list[int]:
    """The positions of the results a planner request leaves out (`keep_tool_results`).

    The last round's results (after the last `AIMessage` with tool calls) are always
    shown; of the earlier ones, the oldest `omitted_results` are left out when long (a
    result of a call that did not fail, of more than `SHORT_RESULT_CHARS`).
    """
    kinds = [message.type for message in messages]
    if "tool" not in kinds:
        return []
    results = [position for position, kind in enumerate(kinds) if kind == "tool"]
    last_plan = -1
    for position in range(len(kinds) - 1, -1, -1):
        if kinds[position] == "ai" and messages[position].tool_calls:  # type: ignore[attr-defined]
            last_plan = position
            break
    seen = bisect.bisect_left(results, last_plan)
    older = results[: omitted_results(seen, keep)]
    return [
        position
        for position in older
        if messages[position].status != "error"  # type: ignore[attr-defined]
        and not (
            type(content := messages[position].content) is str
            and len(content) <= SHORT_RESULT_CHARS
        )
    ]


def omits_results(messages: Sequence[BaseMessage], keep: int) -> bool:
    """Whether the planner's next request leaves out a result it was shown before.

    A planner that did not see every result in full cannot write the run's answer
    (`adopts_planner_reply`): the answer model, which sees them all, does.
    """
    return bool(_older_results(messages, keep))


def _turn_starts(messages: Sequence[BaseMessage]) -> list[int]:
    return [position for position, message in enumerate(messages) if message.type == "human"]


def _trimmed(
    messages: list[BaseMessage], max_turns: int | None, max_chars: int | None
) -> list[BaseMessage]:
    """The transcript without its earliest turns beyond `max_turns` / `max_chars`.

    A turn starts at a human message; the newest one (the request) is always kept.
    """
    starts = _turn_starts(messages)
    if len(starts) < 2:
        return messages
    first = starts[0]
    earlier = starts[:-1]
    if max_turns is not None:
        kept = earlier[len(earlier) - max_turns :] if max_turns else []
        first = kept[0] if kept else starts[-1]
    if max_chars is not None:
        room = max_chars
        for start, end in reversed(list(zip(earlier, starts[1:], strict=True))):
            if start < first:
                break
            room -= sum(len(message_text(message)) for message in messages[start:end])
            if room < 0:
                first = end
                break
    return messages if first == 0 else messages[first:]


def transcript_view(
    messages: Sequence[BaseMessage],
    *,
    keep_tool_results: int | None,
    history_turns: int | None = None,
    history_chars: int | None = None,
    views: MessageViews | None = None,
) -> list[BaseMessage]:
    """The transcript as a model request carries it: bounded by the loop's options.

    Args:
        messages: The run's transcript, as the hooks left it.
        keep_tool_results: For a planner request, `keep_tool_results`: older long
            results are replaced by `OMITTED` (the message keeps its id and status);
            None (the answer's request) keeps every result.
        history_turns: The most earlier turns kept (None: all).
        history_chars: The most characters of earlier turns kept (None: no limit).
        views: The loop's views of messages (each omitted copy made once).

    Returns:
        A new list of the messages, edited where a result is left out.
    """
    view = list(messages)
    if history_turns is not None or history_chars is not None:
        view = _trimmed(view, history_turns, history_chars)
    if keep_tool_results is None:
        return view
    for position in _older_results(view, keep_tool_results):
        older = view[position]
        view[position] = _omitted(older) if views is None else views.of("omitted", older, _omitted)
    return view


def plan_json(message: AIMessage) -> str:
    """A round's `AIMessage` as the JSON plan a text planner writes."""
    commands = [
        {"tool_name": call["name"], "tool_kwargs": call["args"]} for call in message.tool_calls
    ]
    decision = {"next_action": "execute", "execution_commands": commands}
    return json.dumps(decision, ensure_ascii=False, default=str)


_JSON_STARTS = frozenset('{["-0123456789tfn')
"""The first characters of a JSON text (an object, an array, a string, a number, a literal)."""


def shown_result(content: Any) -> Any:
    """A result as a `ToolMessage` shows it, for a prompt: JSON data where it holds JSON.

    The loop writes a result that is not text as its JSON; text that is JSON reads as
    its data too, text that is not stays text.
    """
    if not isinstance(content, str):
        return message_text(ToolMessage(content, tool_call_id=""))
    if content[:1] not in _JSON_STARTS:
        return content
    try:
        return json.loads(content)
    except ValueError:
        return content


def _result_line(message: ToolMessage, *, number: int) -> str:
    line: dict[str, Any] = {"call": number, "tool": message.name or ""}
    line["error" if message.status == "error" else "result"] = shown_result(message.content)
    return to_prompt_json(line)


def _plan_view(message: AIMessage) -> tuple[AIMessage, dict[str, int]]:
    """A round's message as the text planner reads it, and each call's number in it."""
    numbers = {call["id"] or "": n for n, call in enumerate(message.tool_calls, 1)}
    return AIMessage(plan_json(message)), numbers


def as_text_transcript(
    messages: Sequence[BaseMessage], views: MessageViews | None = None
) -> list[BaseMessage]:
    """The transcript for a planner that writes plans as text (`plan_mode` json or tool).

    The user's messages and the answers stay as they are; a round's `AIMessage` becomes
    the JSON plan it stands for, and the round's `ToolMessage`s one human message of
    `<tool_results>`, a line per call (its number in the plan, its tool, its result or
    error as prompt JSON: data, never instructions). Other messages (a system message a
    middleware added) become human messages of their text. With `views`, what each
    message becomes is made once.
    """
    view: list[BaseMessage] = []
    lines: list[str] = []
    numbers: dict[str, int] = {}
    for message in messages:
        kind = message.type
        if kind == "tool":
            number = numbers.get(message.tool_call_id, 0)  # type: ignore[attr-defined]
            line = (
                _result_line(message, number=number)  # type: ignore[arg-type]
                if views is None
                else views.of("line", message, partial(_result_line, number=number))
            )
            lines.append(line)
            continue
        if lines:
            view.append(HumanMessage(f"<tool_results>\n{chr(10).join(lines)}\n</tool_results>"))
            lines = []
        if kind == "human":
            view.append(message)
        elif kind == "ai":
            if message.tool_calls:  # type: ignore[attr-defined]
                plan, numbers = (
                    _plan_view(message)  # type: ignore[arg-type]
                    if views is None
                    else views.of("plan", message, _plan_view)
                )
                view.append(plan)
            elif text := message_text(message).strip():
                view.append(message if message.content == text else AIMessage(text))
        elif text := message_text(message).strip():
            view.append(HumanMessage(text))
    if lines:
        view.append(HumanMessage(f"<tool_results>\n{chr(10).join(lines)}\n</tool_results>"))
    return view


def round_message(
    prompts: PromptSet, round_index: int, max_rounds: int, rollback_note: str = ""
) -> HumanMessage:
    """What a text planner is told after the transcript: the round, the limit, a rollback."""
    last = " (the last round: call only what is essential)" if round_index + 1 >= max_rounds else ""
    section = tagged_section("round", f"round_index: {round_index}, max_rounds: {max_rounds}{last}")
    text = prompts.render(
        "plan_user",
        round_section=section,
        round_number=round_index + 1,
        round_index=round_index,
        max_rounds=max_rounds,
        rollback_note=rollback_note,
    )
    return HumanMessage(text)


@cache
def default_prompts() -> PromptSet:
    """The shipped templates."""
    return PromptSet()
