"""Tool arguments the loop supplies, never the planner, exactly as LangGraph's `ToolNode` does.

A tool may declare `runtime: ToolRuntime` (context, store, state, config, stream writer,
tool call id), `Annotated[str, InjectedToolCallId]`, `Annotated[..., InjectedState]` (the
loop's state) or `InjectedState("key")` (one key of it), `Annotated[..., InjectedStore()]`
and any other `InjectedToolArg`. Such arguments are found once per tool
(`InjectedArguments.of`, LangGraph's own analysis), left out of what the planner sees
(LangChain's `tool_call_schema` drops them), dropped from what it sends (`strip`), so they
never reach validation, the cache key or the call's ledger identity, and filled in right
before the tool is invoked (`fill`), as a full `ToolCall` like `ToolNode` invokes it.
The state a tool sees holds the conversation's `messages` (the user's, each round's
`AIMessage` with its tool calls, the `ToolMessage`s so far), as under `create_agent`.

A tool may return a `Command(update=...)`, as under `ToolNode`: `command_outcome` keeps
its update for the state (written by the call's task, so the next round sees it) and
its `ToolMessage` as the call's outcome. Which keys a `Command` writes is only known once
the tool returned, so what cannot apply (a key the state lacks, `goto`, `resume`) is
left out and named in the record's notes, never refused after the tool ran.

LangGraph offers no public way to reach the running task's `Runtime` and state from the
config a tool is invoked with; `_runtime_of` and `_state_of` read the two private config
keys `ToolNode` itself uses, here and nowhere else (a contract test guards them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.prebuilt.tool_node import ToolRuntime, _get_all_injected_args
from langgraph.runtime import Runtime
from langgraph.types import Command

from agentloop.governance.call_config import call_info
from agentloop.governance.layers import ToolInvocation
from agentloop.governance.outcome import ToolOutcome

__all__ = [
    "COMMAND_NOT_APPLIED",
    "COMMAND_UPDATED",
    "InjectedArguments",
    "command_outcome",
    "run_context",
    "tool_runtime",
]

_CONFIG_KEY_RUNTIME = "__pregel_runtime"
_CONFIG_KEY_READ = "__pregel_read"

COMMAND_NOT_APPLIED = "Command {part} not applied: {reason}"
"""A note on the record of a call whose `Command` could not be applied whole."""

COMMAND_UPDATED = "{tool} updated {keys}"
"""The content of a call whose `Command` carried no `ToolMessage` for it."""


@dataclass(frozen=True)
class InjectedArguments:
    """The injected arguments of one tool, found once when the loop is built."""

    state: Mapping[str, str | None] = field(default_factory=dict)
    """Arguments that receive the loop's state (None) or one key of it."""
    store: str | None = None
    """The argument that receives the graph's store."""
    runtime: str | None = None
    """The argument that receives a `ToolRuntime`."""
    names: frozenset[str] = frozenset()
    """Every injected argument: never the planner's to send."""
    optional_state: frozenset[str] = frozenset()
    """State arguments with a default, left out when their key is missing."""

    @classmethod
    def of(cls, tool: BaseTool) -> InjectedArguments:
        """Find a tool's injected arguments the way `ToolNode` does."""
        try:
            found = _get_all_injected_args(tool)
        except Exception:  # a signature LangGraph cannot read has nothing to inject
            return cls()
        names = set(found.all_injected_keys) | set(found.state)
        names |= {name for name in (found.store, found.runtime) if name}
        return cls(
            state=dict(found.state),
            store=found.store,
            runtime=found.runtime,
            names=frozenset(names),
            optional_state=frozenset(found._optional_state_args),
        )

    def __bool__(self) -> bool:
        """Whether the tool has any injected argument."""
        return bool(self.names)

    def strip(self, kwargs: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """Drop what the planner sent for injected arguments (as `ToolNode` does).

        Returns:
            The remaining arguments, and one note per argument dropped.
        """
        dropped = sorted(name for name in kwargs if name in self.names)
        notes = [
            f"{name}: supplied by the loop, the planner's value was ignored" for name in dropped
        ]
        return {key: value for key, value in kwargs.items() if key not in self.names}, notes

    def into(
        self, call: ToolInvocation, config: RunnableConfig | None, tools: list[BaseTool]
    ) -> ToolInvocation:
        """The call with its injected arguments filled in, invoked as a `ToolCall`.

        Raises:
            ValueError: The tool needs a store and the graph has none.
            KeyError: The tool needs a state key the loop's state does not have.
        """
        arguments = self.fill(call.arguments, config, tool_call_id=call.transcript_id, tools=tools)
        return call.override(arguments=arguments, as_tool_call=True)

    def fill(
        self,
        arguments: Mapping[str, Any],
        config: RunnableConfig | None,
        *,
        tool_call_id: str,
        tools: list[BaseTool],
    ) -> dict[str, Any]:
        """Return the arguments with the injected ones filled in from the running task.

        Raises:
            ValueError: The tool needs a store and the graph has none.
            KeyError: The tool needs a state key the loop's state does not have.
        """
        runtime = _runtime_of(config)
        state = _state_of(config) if self.state else {}
        values: dict[str, Any] = {}
        for name, key in self.state.items():
            if key is None:
                values[name] = state
            elif key in state:
                values[name] = state[key]
            elif name not in self.optional_state:
                raise KeyError(key)
        store = runtime.store if runtime is not None else None
        if self.store:
            if store is None:
                msg = "the tool reads InjectedStore: pass store= to create_tool_loop"
                raise ValueError(msg)
            values[self.store] = store
        if self.runtime:
            values[self.runtime] = tool_runtime(
                config, tool_call_id=tool_call_id, tools=tools, state=state or None
            )
        return {**arguments, **values}


def tool_runtime(
    config: RunnableConfig | None,
    *,
    tool_call_id: str,
    tools: list[BaseTool],
    state: dict[str, Any] | None = None,
) -> ToolRuntime[Any, Any]:
    """The `ToolRuntime` of a call, from the config of the task that makes it."""
    runtime = _runtime_of(config)
    return ToolRuntime(
        state=_state_of(config) if state is None else state,
        context=runtime.context if runtime is not None else None,
        config=config or {},
        stream_writer=runtime.stream_writer if runtime is not None else _no_writer,
        tool_call_id=tool_call_id,
        store=runtime.store if runtime is not None else None,
        tools=tools,
        execution_info=runtime.execution_info if runtime is not None else None,
        server_info=runtime.server_info if runtime is not None else None,
    )


def run_context(config: RunnableConfig | None) -> Any:
    """The run's context (`invoke(..., context=...)`), from the config of a task."""
    runtime = _runtime_of(config)
    return runtime.context if runtime is not None else None


def command_outcome(
    outcome: ToolOutcome, tool_name: str, tool_call_id: str, state_keys: frozenset[str]
) -> ToolOutcome:
    """The outcome of a tool that returned a `Command`, its update kept for the state.

    As `ToolNode` applies a tool's `Command`: its `update` is the call's `state_update`,
    written to the state by the call's task (so the next round sees it), and the
    `ToolMessage` it carries for this call is the call's content (status and artifact
    too); without one the content says which keys it updated. Whatever cannot apply is
    left out and named in the record's notes, never refused after the tool ran (its
    effect happened): a key the loop's state does not have (not in `state_schema` or a
    middleware's), a `goto` (the loop routes itself), a `resume`, an update for a
    parent graph. Any other outcome is returned as it is.

    Args:
        outcome: The tool's outcome.
        tool_name: The tool.
        tool_call_id: The id of the call's `ToolCall` (its `ToolMessage` answers it).
        state_keys: The state keys a tool's `Command` may update.
    """
    value = outcome.value
    commands = value if isinstance(value, list | tuple) else [value]
    if not commands or not all(isinstance(c, Command) for c in commands):
        return outcome
    update: dict[str, Any] = {}
    messages: list[Any] = []
    notes: list[str] = []
    for command in commands:
        if command.graph is not None:
            notes.append(COMMAND_NOT_APPLIED.format(part="for a parent graph", reason="no parent"))
            continue
        if command.goto:
            reason = "the loop plans its next step itself"
            notes.append(COMMAND_NOT_APPLIED.format(part=f"goto {command.goto!r}", reason=reason))
        if command.resume is not None:
            notes.append(COMMAND_NOT_APPLIED.format(part="resume", reason="no interrupt waits"))
        for key, written in command._update_as_tuples():
            if key == "messages":
                messages.extend(written if isinstance(written, list | tuple) else [written])
            elif key in state_keys:
                update[key] = written
            else:
                reason = "the state has no such key (declare it in state_schema)"
                notes.append(COMMAND_NOT_APPLIED.format(part=f"update of {key!r}", reason=reason))
    own = [m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == tool_call_id]
    others = [m for m in messages if not any(m is message for message in own)]
    if others:  # as dicts: a record holds only what a checkpoint keeps as it is
        update["messages"] = [_message_dict(m) for m in others]
    changed = outcome.with_changes(notes=(*outcome.notes, *notes), state_update=update or None)
    if not own:
        keys = ", ".join(sorted(update)) or "nothing"
        return changed.with_changes(value=COMMAND_UPDATED.format(tool=tool_name, keys=keys))
    message = own[-1]
    if message.status == "error":
        return changed.with_changes(
            value=message.content, success=False, error=message.text, error_type="internal_error"
        )
    return changed.with_changes(value=message.content, artifact=message.artifact)


def _message_dict(message: Any) -> Any:
    """A message as the dict `add_messages` reads back as the same message."""
    if not isinstance(message, BaseMessage):
        return message  # a dict or a text: `add_messages` reads it
    found: dict[str, Any] = {"type": message.type, "content": message.content}
    for key in ("id", "name", "tool_call_id", "status"):
        if getattr(message, key, None) is not None:
            found[key] = getattr(message, key)
    if isinstance(message, AIMessage) and message.tool_calls:
        found["tool_calls"] = [dict(call) for call in message.tool_calls]
    return found


def _no_writer(chunk: Any) -> None:
    """The stream writer outside a graph: drops what it is given."""


def _runtime_of(config: RunnableConfig | None) -> Runtime[Any] | None:
    """LangGraph's `Runtime` of the task whose config this is (what `get_runtime` reads)."""
    runtime = ((config or {}).get("configurable") or {}).get(_CONFIG_KEY_RUNTIME)
    return runtime if isinstance(runtime, Runtime) else None


def _state_of(config: RunnableConfig | None) -> dict[str, Any]:
    """The graph's state as the task sees it, read from its channels as `ToolNode` does.

    Its `messages` are the conversation as of the call's round's plan: the outcomes of
    the round's calls that ran before it (a call with side effects runs alone, after the
    calls before it) are left out, as `create_agent`'s tools, which all run in one step,
    see none of their siblings'.
    """
    read = ((config or {}).get("configurable") or {}).get(_CONFIG_KEY_READ)
    arguments: tuple[Any, ...] = getattr(read, "args", ())
    if read is None or len(arguments) < 2:
        return {}
    state = read(list(arguments[1]), True)
    if not isinstance(state, Mapping):
        return {}
    state = dict(state)
    info = call_info(config)
    if info is not None and state.get("messages"):
        state["messages"] = _as_planned(state["messages"], info["call_id"])
    return state


def _as_planned(messages: list[Any], call_id: str) -> list[Any]:
    """The transcript without the `ToolMessage`s of the round of `call_id` (`<run>:<round>:<n>`)."""
    round_prefix = call_id.rpartition(":")[0] + ":"

    def of_round(message: Any) -> bool:
        return isinstance(message, ToolMessage) and (message.id or "").startswith(round_prefix)

    kept = [message for message in messages if not of_round(message)]
    return messages if len(kept) == len(messages) else kept
