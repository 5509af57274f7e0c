"""LangChain's node hooks in a tool loop: `before_agent` / `_model`, `after_model` / `_agent`.

`create_agent` runs each hook as a graph node of its own. A tool loop does the same for
`before_agent` and `after_agent` (nodes `"<name>.before_agent"` / `"<name>.after_agent"`),
and runs `before_model` / `after_model` inside the `plan` and `answer` nodes, around each
of their model calls (`HookRun`), because a plan node's call is one step of a longer node
(re-asks, streaming dispatch). What each hook returns is a state update, applied as a
node's update is (`messages` through `add_messages`, every channel through its reducer);
a hook sees the state as the hooks before it in the same node left it. See
`agentloop.middleware.stack` for the order of the hooks and what each `jump_to` does.

After a planner call, `after_model` hooks see the round in `messages` as its `AIMessage`
with `tool_calls` (or, when the reply plans no round, an `AIMessage` without any), and
`execute` runs the round as they left that message (`agentloop.middleware.transcript.read_back`):
this is how `HumanInTheLoopMiddleware` and `ToolCallLimitMiddleware` act on a round.
For the planner's last reply they run in a node of their own, `plan.after_model`
(`agentloop.nodes.plan.make_plan_after_model`), once `plan` has checkpointed the reply,
and for the answer in `answer.after_model`, as `create_agent` runs them in nodes after its
model node: a hook that interrupts resumes there, without another model call
(`AFTER_MODEL_KEY` says whose reply waits). After a planner reply that is asked again
they run inside `plan`: that reply plans no round, and an interrupt there has `plan`
run again on resume.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from typing import (
    Annotated,
    Any,
    Literal,
    NotRequired,
    Required,
    TypeVar,
    cast,
    get_args,
    get_origin,
    get_type_hints,
)

from langchain.agents.middleware import AgentMiddleware
from langchain.agents.middleware.types import AgentState, OmitFromSchema, PrivateStateAttr
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.channels.base import BaseChannel
from langgraph.channels.binop import BinaryOperatorAggregate
from langgraph.channels.delta import DeltaChannel
from langgraph.channels.topic import Topic
from langgraph.runtime import Runtime
from langgraph.types import Command, Overwrite
from typing_extensions import TypedDict

from agentloop.base.messages import message_text, resolve_request, with_request
from agentloop.base.sync import LoopRunner, has_running_loop
from agentloop.errors import ConfigurationError
from agentloop.observability.events import Emit, HeldEvents, null_emit

__all__ = [
    "AFTER_MODEL_KEY",
    "AGENT_HOOKS",
    "JUMP_KEY",
    "MODEL_HOOKS",
    "HookRun",
    "LoopHooks",
    "agent_hook_node",
    "can_jump_to",
    "defines",
    "held_events",
    "resolve_schemas",
    "waiting_reply",
]

U = TypeVar("U", bound=Mapping[str, Any])
Hook = Literal["before_agent", "before_model", "after_model", "after_agent"]
Jump = Literal["end", "model", "tools"]
AGENT_HOOKS: tuple[Hook, ...] = ("before_agent", "after_agent")
"""The hooks that run once per invocation, as graph nodes."""
MODEL_HOOKS: tuple[Hook, ...] = ("before_model", "after_model")
"""The hooks that run around every planner and answer model call."""
JUMP_KEY = "jump_to"
"""The state key a hook sets to leave the normal route (`create_agent`'s name)."""
AFTER_MODEL_KEY = "agentloop_after_model"
"""The state key that says whose model reply waits for its `after_model` hooks' node.

`"plan"` or `"answer"` when the node that just ran left its reply to
`plan.after_model` / `answer.after_model`, None when it did not (the hooks ran, or no
model was asked). The `plan` and `answer` nodes always write it, so the router after
them reads their own value.
"""
_AGENT_STATE_KEYS = frozenset(get_type_hints(AgentState, include_extras=True))


class _AfterModelState(TypedDict, total=False):
    """The key of a loop whose middleware has `after_model` hooks (private to the loop)."""

    agentloop_after_model: Annotated[Literal["plan", "answer"] | None, PrivateStateAttr]


def defines(middleware: AgentMiddleware[Any, Any, Any], hook: str) -> bool:
    """Whether a middleware has its own `hook` (or its async twin `a<hook>`)."""
    return _overrides(middleware, hook) or _overrides(middleware, f"a{hook}")


def _overrides(middleware: AgentMiddleware[Any, Any, Any], name: str) -> bool:
    return getattr(type(middleware), name, None) is not getattr(AgentMiddleware, name, None)


def can_jump_to(middleware: AgentMiddleware[Any, Any, Any], hook: str) -> list[Jump]:
    """The jumps a hook declares (`@hook_config(can_jump_to=[...])`), as create_agent reads them."""
    for name in (hook, f"a{hook}"):
        declared = getattr(getattr(type(middleware), name, None), "__can_jump_to__", None)
        if _overrides(middleware, name) and declared is not None:
            return list(declared)
    return []


async def _call_hook(
    middleware: AgentMiddleware[Any, Any, Any],
    hook: Hook,
    state: Mapping[str, Any],
    runtime: Runtime[Any],
    runner: LoopRunner,
) -> Any:
    """Call a hook: its sync form under `invoke`, its async form under `ainvoke`.

    A hook with only the sync form runs in a worker thread under `ainvoke` (as
    `create_agent` runs it); one with only the async form is run to its end under
    `invoke`, on the loop's own event loop (`runner`).
    """
    if has_running_loop():
        if _overrides(middleware, f"a{hook}"):
            return await getattr(middleware, f"a{hook}")(state, runtime)
        return await asyncio.to_thread(getattr(middleware, hook), state, runtime)
    if _overrides(middleware, hook):
        return getattr(middleware, hook)(state, runtime)
    return runner.run(getattr(middleware, f"a{hook}")(state, runtime))


def _update_of(
    result: Any, middleware: AgentMiddleware[Any, Any, Any], hook: Hook
) -> tuple[dict[str, Any], Jump | None]:
    """A hook's state update, and the jump it asks for when the hook declares that jump.

    As in `create_agent`, a `jump_to` the hook does not declare in `can_jump_to` is
    ignored.

    Raises:
        TypeError: The hook returned something that is not a state update (or a
            `Command` that routes: the loop's routes are its own, `jump_to` leaves them).
    """
    if result is None:
        return {}, None
    if isinstance(result, Command):
        if result.goto or result.resume is not None or result.graph is not None:
            msg = (
                f"{middleware.name}.{hook} returned a Command that routes; in a tool loop a "
                "hook leaves the normal route with a `jump_to` update "
                "(see agentloop.middleware.stack)"
            )
            raise TypeError(msg)
        update = result.update
        result = dict(update) if isinstance(update, Mapping | list | tuple) else update or {}
    if not isinstance(result, Mapping):
        msg = f"{middleware.name}.{hook} returned {type(result).__name__}, not a state update"
        raise TypeError(msg)
    update = dict(result)
    jump = update.pop(JUMP_KEY, None)
    if jump is not None and jump in can_jump_to(middleware, hook):
        return update, cast(Jump, jump)
    return update, None


def _omitted(hint: Any, flag: str) -> bool:
    """Whether a field's annotation omits it from the input or output schema."""
    if get_origin(hint) in (Required, NotRequired):
        hint = get_args(hint)[0]
    metadata = getattr(hint, "__metadata__", ())
    return any(isinstance(item, OmitFromSchema) and getattr(item, flag) for item in metadata)


def _merged(name: str, schemas: Sequence[type], base: type, omit: str | None) -> type:
    """One TypedDict of the middleware schemas' fields, then the loop's own (which win)."""
    fields: dict[str, Any] = {}
    for schema in schemas:
        for key, hint in get_type_hints(schema, include_extras=True).items():
            if omit is None or not _omitted(hint, omit):
                fields[key] = hint
    fields.update(get_type_hints(base, include_extras=True))
    merged: type = TypedDict(name, fields, total=False)  # type: ignore[misc]
    merged.__doc__ = base.__doc__
    return merged


def resolve_schemas(
    middleware: Sequence[AgentMiddleware[Any, Any, Any]],
    state: type,
    input: type,
    output: type,
    *,
    app_schema: type | None = None,
) -> tuple[type, type, type]:
    """The loop's state, input and output schemas, with the middleware's and app's keys.

    As `create_agent`'s `_resolve_schema`: each middleware's `state_schema` fields join the
    state, then the app's `state_schema` fields (which win over the middleware's), then
    the loop's own (which win over both); the input leaves out fields marked
    `OmitFromInput` / `PrivateStateAttr`, the output those marked `OmitFromOutput` /
    `PrivateStateAttr`. A middleware with a hook brings `AgentState`'s `jump_to`. Without
    hooks or state keys of their own, the loop's schemas are returned as they are.

    Raises:
        ConfigurationError: `app_schema` is not a class with annotations, or gives a key
            of the loop's own (other than `AgentState`'s) another type.
    """
    schemas = [
        item.state_schema
        for item in middleware
        if any(defines(item, hook) for hook in (*AGENT_HOOKS, *MODEL_HOOKS))
        or set(get_type_hints(item.state_schema, include_extras=True)) - _AGENT_STATE_KEYS
    ]
    if any(defines(item, "after_model") for item in middleware):
        schemas.append(_AfterModelState)
    if app_schema is not None:
        _check_app_schema(app_schema, state)
        schemas.append(app_schema)
    if not schemas:
        return state, input, output
    return (
        _merged(state.__name__, schemas, state, None),
        _merged(input.__name__, schemas, input, "input"),
        _merged(output.__name__, schemas, output, "output"),
    )


def _check_app_schema(schema: Any, state: type) -> None:
    """Fail unless `schema` is a class whose keys agree with the loop's own.

    Raises:
        ConfigurationError: It is not a class with annotations, or it gives a key of the
            loop's own (other than `AgentState`'s, which are the loop's) another type.
    """
    try:
        hints = get_type_hints(schema, include_extras=True) if isinstance(schema, type) else None
    except Exception as error:  # an annotation that does not resolve
        msg = f"state_schema {schema!r} has annotations that do not resolve: {error}"
        raise ConfigurationError(msg) from error
    if hints is None:
        msg = (
            "state_schema must be a TypedDict (or a class with annotated fields), as in "
            f"create_agent, got {type(schema).__name__}"
        )
        raise ConfigurationError(msg)
    own = get_type_hints(state, include_extras=True)
    clashes = sorted(
        key
        for key, hint in hints.items()
        if key in own and key not in _AGENT_STATE_KEYS and hint != own[key]
    )
    if clashes:
        msg = (
            f"state_schema gives keys of the loop's own state another type: {clashes}; "
            "name the app's keys differently"
        )
        raise ConfigurationError(msg)


def waiting_reply(state: Mapping[str, Any]) -> Literal["plan", "answer"] | None:
    """Whose model reply waits for its `after_model` hooks' node (`AFTER_MODEL_KEY`)."""
    value = state.get(AFTER_MODEL_KEY)
    return value if value in ("plan", "answer") else None


def _folder(channel: BaseChannel[Any, Any, Any]) -> Callable[[Any, Any], Any] | None:
    """How one more write changes a channel's value (None: it replaces the value)."""
    if isinstance(channel, BinaryOperatorAggregate):
        return channel.operator
    if isinstance(channel, DeltaChannel):
        reducer = channel.reducer
        return lambda current, value: reducer(current, [value])
    if isinstance(channel, Topic):
        return lambda current, value: [
            *(current or []),
            *(value if isinstance(value, list) else [value]),
        ]
    return None


class LoopHooks:
    """The app's node hooks, found once when the loop is built.

    Args:
        middleware: The app's middleware, in list order.
        channels: The compiled state's channels (how an update is applied).
        runner: The loop's event loop for async-only hooks under `invoke`.
    """

    def __init__(
        self,
        middleware: Sequence[AgentMiddleware[Any, Any, Any]],
        channels: Mapping[str, Any],
        runner: LoopRunner,
    ) -> None:
        self.runner = runner
        self.before_agent = [m for m in middleware if defines(m, "before_agent")]
        self.before_model = [m for m in middleware if defines(m, "before_model")]
        self.after_model = [m for m in middleware if defines(m, "after_model")]
        self.after_agent = [m for m in middleware if defines(m, "after_agent")]
        around = (("before_model", self.before_model), ("after_model", self.after_model))
        self.model_jumps = frozenset(
            jump for hook, items in around for m in items for jump in can_jump_to(m, hook)
        )
        """The jumps some `before_model` / `after_model` hook declares."""
        self.before_model_jumps = frozenset(
            jump for m in self.before_model for jump in can_jump_to(m, "before_model")
        )
        """The jumps some `before_model` hook declares."""
        self.after_model_jumps = frozenset(
            jump for m in self.after_model for jump in can_jump_to(m, "after_model")
        )
        """The jumps some `after_model` hook declares."""
        self.folders = {
            key: folder
            for key, channel in channels.items()
            if isinstance(channel, BaseChannel) and (folder := _folder(channel)) is not None
        }
        """How a write changes each channel that accumulates (the others: last write wins)."""
        self.has_jump_key = JUMP_KEY in channels

    @classmethod
    def of(
        cls,
        middleware: Sequence[AgentMiddleware[Any, Any, Any]],
        channels: Mapping[str, Any],
        runner: LoopRunner,
    ) -> LoopHooks | None:
        """The hooks, or None when no middleware has one."""
        hooks = cls(middleware, channels, runner)
        return hooks if hooks.any else None

    @property
    def any(self) -> bool:
        """Whether some middleware has a node hook."""
        return bool(self.before_agent or self.before_model or self.after_model or self.after_agent)

    @property
    def after_any_model(self) -> bool:
        """Whether some middleware has an `after_model` hook (the plan is shown to it)."""
        return bool(self.after_model)

    @property
    def around_model(self) -> bool:
        """Whether some middleware has a `before_model` or `after_model` hook."""
        return bool(self.before_model or self.after_model)

    def apply(self, state: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
        """The state once an update is applied (a new dict; reducers as the graph's)."""
        applied = dict(state)
        for key, value in update.items():
            folder = self.folders.get(key)
            if isinstance(value, Overwrite):
                applied[key] = value.value
            elif folder is not None and key in applied:
                applied[key] = folder(applied[key], value)
            elif folder is not None and key == "messages":
                applied[key] = folder([], value)
            else:
                applied[key] = value
        return applied

    def combined(self, writes: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
        """One node's writes as one update.

        A key that does not accumulate takes the last write; one that accumulates
        (`messages`, a key with a reducer) takes the writes joined: lists end to end
        (as `add_messages` and `operator.add` would take them one after the other), other
        values folded with the key's reducer.
        """
        update: dict[str, Any] = {}
        for write in writes:
            for key, value in write.items():
                folder = self.folders.get(key)
                if key not in update or folder is None:
                    update[key] = value
                elif isinstance(update[key], list) and isinstance(value, list):
                    update[key] = [*update[key], *value]
                else:
                    update[key] = folder(update[key], value)
        return update


def _ended(writes: Sequence[Mapping[str, Any]], by: str) -> dict[str, Any]:
    """What a run ended by a hook's `jump_to="end"` records: the status, the answer."""
    answer = ""
    for write in writes:
        for message in write.get("messages") or ():
            if isinstance(message, AIMessage):
                answer = message_text(message)
    return {
        "answer": answer,
        "status": "ended",
        "status_reason": f"{by} ended the run (jump_to='end')",
    }


def held_events(hooks: LoopHooks | None, emit: Emit) -> HeldEvents | None:
    """A holder for what a model-calling node says before its `before_model` hooks.

    A hook may `interrupt()`, and the node then runs again from its start on resume:
    what it said before the hooks would be said twice. `HookRun.before` sends the held
    events once the hooks ran. None (say them at once) when no such hook runs or
    nothing streams `custom`.
    """
    if hooks is None or not hooks.before_model or emit is null_emit:
        return None
    return HeldEvents(emit)


class HookRun:
    """The `before_model` / `after_model` hooks of one `plan` or `answer` node run.

    Args:
        hooks: The loop's hooks (None: there are none, and this run does nothing).
        node: The node: a jump to `"end"` after the answer is the normal end.
        state: The node's state.
        runtime: The node's runtime.
        held: What the node said before its hooks (`held_events`): sent once the
            `before_model` hooks ran without an interrupt.
    """

    def __init__(
        self,
        hooks: LoopHooks | None,
        node: Literal["plan", "answer"],
        state: Mapping[str, Any],
        runtime: Runtime[Any],
        held: HeldEvents | None = None,
    ) -> None:
        self.hooks = hooks
        self.held = held
        self.node = node
        self.input = state
        """The node's state, before any hook."""
        self.state: Any = state
        """The state as the hooks left it (the node's input when no hook wrote)."""
        self.runtime = runtime
        self.jump: Jump | None = None
        """Where a hook jumped (None: the normal route)."""
        self._before: list[dict[str, Any]] = []
        self._after: list[dict[str, Any]] = []
        self._ended_by = ""

    async def before(self) -> Jump | None:
        """Run every `before_model` hook, in list order, before a model call.

        Returns:
            The jump a hook asked for (the call is then not made), or None.
        """
        if self.hooks is None or not self.hooks.before_model:
            return None
        jump = await self._run("before_model", self.hooks.before_model, self._before)
        if self.held:
            self.held.release()  # no hook interrupted: the node goes on, said once
        self._follow_request()
        return jump

    def changed(self, keys: Iterable[str]) -> bool:
        """Whether the hooks wrote any of these keys (a prompt built from them is stale)."""
        before, after = self.input, self.state
        return after is not before and any(after.get(key) is not before.get(key) for key in keys)

    def _follow_request(self) -> None:
        """When a hook rewrote the request's message, the request is its new text.

        `PIIMiddleware` redacts the last `HumanMessage` in `before_model`; the prompts
        quote `user_input`, so it follows (written with the hook's update, as the
        message is), and every later prompt quotes what `create_agent`'s model sees.
        """
        before, after = self.input, self.state
        old, new = before.get("messages") or [], after.get("messages") or []
        if new is old:
            return
        asked_old, asked_new = _last_human(old), _last_human(new)
        if asked_old is None or asked_new is None or asked_old.id != asked_new.id:
            return
        text, request = message_text(asked_new), after.get("user_input")
        if message_text(asked_old) == request and text != request:
            self._write({"user_input": text}, self._before)

    def _write(self, update: dict[str, Any], writes: list[dict[str, Any]]) -> None:
        assert self.hooks is not None
        writes.append(update)
        self.state = self.hooks.apply(self.state, update)

    async def after(self, update: Mapping[str, Any] | None = None) -> Jump | None:
        """Run every `after_model` hook, in reverse list order, after a model call.

        Args:
            update: The node's own update so far, which the hooks see applied (the answer).

        Returns:
            The jump a hook asked for, or None.
        """
        if self.hooks is None or not self.hooks.after_model:
            return None
        if update:
            self.state = self.hooks.apply(self.state, update)
        middleware = list(reversed(self.hooks.after_model))
        return await self._run("after_model", middleware, self._after)

    async def _run(
        self,
        hook: Hook,
        middleware: Sequence[AgentMiddleware[Any, Any, Any]],
        writes: list[dict[str, Any]],
    ) -> Jump | None:
        assert self.hooks is not None
        for item in middleware:
            result = await _call_hook(item, hook, self.state, self.runtime, self.hooks.runner)
            update, jump = _update_of(result, item, hook)
            if update:
                self._write(update, writes)
            if jump is not None:
                self.jump = jump
                ends_run = jump == "end" and (self.node == "plan" or hook == "before_model")
                self._ended_by = f"{item.name}.{hook}" if ends_run else ""
                return jump
        return None

    def merged(self, update: U, *, deferred: bool = False) -> U:
        """The node's update with the hooks' updates around it (`LoopHooks.combined`).

        `before_model` updates come first, then the node's, then `after_model` updates;
        then `jump_to` (when the state has it) and, when a jump ends the run, what
        `_ended` records. With `after_model` hooks, `AFTER_MODEL_KEY` says whether the
        node's reply waits for them in the next node. The result has the node's keys
        and the hooks' own.

        Args:
            update: The node's own update.
            deferred: The node's model reply is checkpointed for its `after_model`
                hooks' node (`plan.after_model` / `answer.after_model`), which runs next.
        """
        hooks = self.hooks
        if hooks is None:
            return update
        writes: list[Mapping[str, Any]] = [*self._before, update, *self._after]
        if self._ended_by:
            writes.append(_ended([*self._before, *self._after], self._ended_by))
        if hooks.has_jump_key:
            writes.append({JUMP_KEY: self.jump})
        if hooks.after_model:
            writes.append({AFTER_MODEL_KEY: self.node if deferred else None})
        if len(writes) == 1:
            return update
        return cast(U, hooks.combined(writes))


def _last_human(messages: Sequence[Any]) -> HumanMessage | None:
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            return message
    return None


def agent_hook_node(
    middleware: AgentMiddleware[Any, Any, Any], hook: Hook, hooks: LoopHooks, *, first: bool
) -> Callable[[Mapping[str, Any], Runtime[Any]], Coroutine[Any, Any, Mapping[str, Any]]]:
    """The coroutine of a `before_agent` / `after_agent` node (`LoopNode(coroutine=...)`).

    Args:
        middleware: The middleware whose hook the node runs.
        hook: `"before_agent"` or `"after_agent"`.
        hooks: The loop's hooks: whether the state has `jump_to` (then the node always
            writes it, so the router after it reads this node's jump, or none), and the
            event loop for an async-only hook under `invoke`.
        first: The run's first node: a request given as `user_input` becomes the run's
            `HumanMessage` before the hook reads the state, as under `create_agent`,
            where the request is one (`ModelRouterMiddleware` routes on it).
    """

    async def run(state: Mapping[str, Any], runtime: Runtime[Any]) -> Mapping[str, Any]:
        added: list[Any] = []
        if first:
            _, added = with_request(state, *resolve_request(state))
            if added:
                state = hooks.apply(state, {"messages": added})
        result = await _call_hook(middleware, hook, state, runtime, hooks.runner)
        update, jump = _update_of(result, middleware, hook)
        if added:
            update = hooks.combined([{"messages": added}, update])
        if jump == "end" and hook == "before_agent":
            update.update(_ended([update], f"{middleware.name}.{hook}"))
        if hooks.has_jump_key:
            update[JUMP_KEY] = jump
        return update

    return run
