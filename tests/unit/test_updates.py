"""Node updates: each node writes only keys of the state, with values their channels take."""

from __future__ import annotations

import inspect
import types
from typing import Annotated, Any, Union, get_args, get_origin, get_type_hints

import pytest
from langchain_core.tools import tool
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Overwrite

from agentloop import ModelOptions, create_tool_loop
from agentloop.nodes.updates import (
    AnswerUpdate,
    CallToolUpdate,
    ExecuteUpdate,
    PlanUpdate,
    PrepareUpdate,
    ReleaseSessionsUpdate,
)
from agentloop.state import LoopState
from agentloop.testing import ScriptedChatModel, plan_reply

NODE_UPDATES: dict[str, Any] = {
    "prepare": PrepareUpdate,
    "plan": PlanUpdate,
    "execute": ExecuteUpdate,
    "call_tool": CallToolUpdate,
    "answer": AnswerUpdate,
    "release_sessions": ReleaseSessionsUpdate,
}
STATE = get_type_hints(LoopState, include_extras=True)


def _members(hint: Any) -> set[Any]:
    """The types of a union, or the type itself."""
    if get_origin(hint) in (Union, types.UnionType):
        return {member for arg in get_args(hint) for member in _members(arg)}
    return {hint}


def _accepted(key: str) -> set[Any] | None:
    """What a channel takes: its type, what its reducer accepts, `Overwrite` (None: anything)."""
    hint = STATE[key]
    if get_origin(hint) is not Annotated:
        return _members(hint)
    base, reducer = get_args(hint)[0], hint.__metadata__[0]
    function = reducer.reducer if isinstance(reducer, DeltaChannel) else reducer
    update = list(inspect.signature(function).parameters)[1]
    takes = get_type_hints(function).get(update, Any)
    if takes is Any:
        return None
    if isinstance(reducer, DeltaChannel):  # it folds a sequence of writes
        (takes,) = get_args(takes)
    return _members(base) | _members(takes) - {type(None)} | {Overwrite}


@pytest.mark.parametrize("node", sorted(NODE_UPDATES))
def test_an_update_holds_state_keys_with_the_types_their_channels_take(node: str) -> None:
    for key, hint in get_type_hints(NODE_UPDATES[node], include_extras=True).items():
        assert key in STATE, f"{node} writes {key!r}, which is not a state key"
        accepted = _accepted(key)
        if get_origin(STATE[key]) is not Annotated:  # no reducer: the state's own type
            assert hint == STATE[key], f"{node}.{key}: {hint} is not the state's {STATE[key]}"
        elif accepted is not None:
            assert _members(hint) <= accepted, f"{node}.{key}: {hint} is not one of {accepted}"


def test_every_state_key_is_written_by_some_node() -> None:
    assert all(not getattr(update, "__total__", True) for update in NODE_UPDATES.values())
    written = {key for update in NODE_UPDATES.values() for key in get_type_hints(update)}
    # every channel a node writes is described; the rest are the caller's only
    assert set(STATE) - written == set()


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@pytest.mark.parametrize("entry", ["stream", "astream"])
@pytest.mark.parametrize("reviewed", [False, True], ids=["plan-prepares", "execute-prepares"])
async def test_each_node_returns_only_the_keys_of_its_update(entry: str, reviewed: bool) -> None:
    planner = ScriptedChatModel(
        [
            plan_reply(
                "execute", [{"purpose": "p", "tool_name": "lookup", "tool_kwargs": {"key": "a"}}]
            ),
            plan_reply("response"),
        ]
    )
    # an interrupt before `execute` has the round prepared there, not in `plan`
    review: dict[str, Any] = (
        {"checkpointer": InMemorySaver(), "interrupt_before": ["execute"]} if reviewed else {}
    )
    loop = create_tool_loop(
        planner, [lookup], models=ModelOptions(answer_model=ScriptedChatModel(["done"])), **review
    )
    config = {"configurable": {"thread_id": entry}}
    chunks: list[Any] = []
    for payload in [{"user_input": "what is a?"}, None][: 1 + reviewed]:  # resumed once
        if entry == "stream":
            chunks += list(loop.stream(payload, config, stream_mode="updates"))
        else:
            streamed = loop.astream(payload, config, stream_mode="updates")
            chunks += [chunk async for chunk in streamed]
    nodes = [node for chunk in chunks for node in chunk]
    # without a checkpointer the run starts in `plan`; with one, in `prepare`
    expected = {"plan", "call_tool", "answer"} | ({"prepare", "execute"} if reviewed else set())
    assert expected <= set(nodes)
    for chunk in chunks:
        for node, update in chunk.items():
            if node != "__interrupt__":
                assert set(update or {}) <= set(get_type_hints(NODE_UPDATES[node])), node
