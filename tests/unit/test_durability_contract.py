"""Contract: the LangGraph internals `agentloop.durability._langgraph` reads still exist.

LangGraph offers no public accessor for the checkpointer serving a run or for its
durability mode; if an upgrade moves them, this fails before any exactly-once test does.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph

from agentloop.durability import current_checkpointer, current_durability


class State(TypedDict, total=False):
    seen: Annotated[list[Any], operator.add]


def observe(state: State) -> dict[str, Any]:
    return {"seen": [(id(current_checkpointer()), current_durability())]}


def graph(checkpointer: Any = None) -> Any:
    builder = StateGraph(State)
    builder.add_node("observe", observe)
    builder.add_edge(START, "observe")
    return builder.compile(checkpointer=checkpointer)


@pytest.mark.parametrize("durability", [None, "sync", "async", "exit"])
def test_a_node_sees_the_checkpointer_and_durability(durability: str | None) -> None:
    saver = InMemorySaver()
    options = {"durability": durability} if durability else {}
    out = graph(saver).invoke({"seen": []}, {"configurable": {"thread_id": "t"}}, **options)
    assert out["seen"] == [(id(saver), durability or "async")]


def test_a_subgraph_sees_its_parents_checkpointer() -> None:
    saver = InMemorySaver()
    parent = StateGraph(State)
    parent.add_node("child", graph())
    parent.add_edge(START, "child")
    out = parent.compile(checkpointer=saver).invoke(
        {"seen": []}, {"configurable": {"thread_id": "t"}}, durability="sync"
    )  # not the default ("async"), so the child shows it got the parent's durability
    assert out["seen"] == [(id(saver), "sync")]


def test_without_a_checkpointer() -> None:
    assert graph().invoke({"seen": []})["seen"] == [(id(None), "async")]
    assert current_checkpointer() is None and current_durability() == "async"


def test_a_task_knows_when_it_is_resumed_with_an_answer() -> None:
    from langgraph.types import Command, interrupt

    from agentloop.durability import resuming

    observed: list[bool] = []

    def ask(state: State) -> dict[str, Any]:
        observed.append(resuming())
        return {"seen": [interrupt("question?")]}

    builder = StateGraph(State)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    app = builder.compile(checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "t"}}
    app.invoke({"seen": []}, thread)  # the first run is not a resume: it pauses
    assert app.invoke(Command(resume="yes"), thread)["seen"] == ["yes"]
    assert observed == [False, True]
    assert resuming() is False  # outside a graph run


def test_the_null_task_id_is_langgraphs() -> None:
    from langgraph._internal._constants import NULL_TASK_ID as LANGGRAPHS

    from agentloop.durability._langgraph import NULL_TASK_ID

    assert NULL_TASK_ID == LANGGRAPHS


async def test_input_saved_for_a_step_is_read_and_resumed_from() -> None:
    """As LangGraph keeps a `Command(update=...)`: at the step's checkpoint, as its input."""
    from langgraph.runtime import ExecutionInfo

    from agentloop.durability import save_step_input

    saver = InMemorySaver()
    app = graph(saver)
    thread = {"configurable": {"thread_id": "t"}}
    await app.ainvoke({"seen": ["start"]}, thread, interrupt_before=["observe"])
    paused = await app.aget_state(thread)
    step = ExecutionInfo(
        checkpoint_id=paused.config["configurable"]["checkpoint_id"],
        checkpoint_ns="observe:task",
        task_id="task",
        thread_id="t",
    )
    for value in ("first", "second"):  # a step's input accumulates
        assert await save_step_input(saver, step, [("seen", [value])])
    assert (await app.aget_state(thread)).values["seen"] == ["start", "first", "second"]
    resumed = await app.ainvoke(None, thread)
    assert resumed["seen"][:3] == ["start", "first", "second"] and len(resumed["seen"]) == 4
