"""The state's `messages` is the agent transcript `create_agent` keeps."""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    ToolCall,
    ToolMessage,
)
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.message import add_messages

from agentloop import GovernanceOptions, ModelOptions, ToolPolicy, create_tool_loop
from agentloop.cli.screen import is_answer_token
from agentloop.state import reduce_messages
from agentloop.testing import ScriptedChatModel, plan_reply, tool_call_turns


@tool
def weather(city: str) -> str:
    """Today's weather in a city."""
    return f"sunny in {city}"


@tool(response_format="content_and_artifact")
def page(url: str) -> tuple[str, dict[str, Any]]:
    """Fetch a page: its text, and its size as the artifact."""
    return f"text of {url}", {"url": url, "bytes": 42}


@tool
def broken(code: int) -> str:
    """A tool that always fails."""
    msg = f"service down ({code})"
    raise RuntimeError(msg)


TOOLS = [weather, page, broken]

Round = list[tuple[str, dict[str, Any]]]
ROUNDS: list[Round] = [
    [("weather", {"city": "Paris"}), ("weather", {"city": "Rome"})],
    [("page", {"url": "https://example.test/a"})],
]
"""The tool calls both agents are scripted to make, round by round."""


def plans(rounds: list[Round]) -> list[str | AIMessage]:
    """The loop's planner script for `rounds` (native mode turns them into tool calls)."""
    script: list[str | AIMessage] = [
        plan_reply("execute", [{"tool_name": name, "tool_kwargs": args} for name, args in calls])
        for calls in rounds
    ]
    return [*script, plan_reply("response")]


def loop(rounds: list[Round], plan_mode: str, answers: list[str] | None = None) -> Any:
    planner = ScriptedChatModel(plans(rounds))
    answerer = ScriptedChatModel(answers or ["the answer"])
    return create_tool_loop(
        planner,
        TOOLS,
        plan_mode=plan_mode,  # type: ignore[arg-type]
        checkpointer=InMemorySaver(),
        models=ModelOptions(answer_model=answerer),
    )


def thread(name: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


def kinds(messages: list[BaseMessage]) -> list[str]:
    """`Human`, `AI(tool_calls)`, `Tool`, `AI`: the shape of a transcript."""
    names = []
    for message in messages:
        name = type(message).__name__.removesuffix("Message")
        if isinstance(message, AIMessage) and message.tool_calls:
            name += "(tool_calls)"
        names.append(name)
    return names


EXPECTED = ["Human", "AI(tool_calls)", "Tool", "Tool", "AI(tool_calls)", "Tool", "AI"]


async def test_a_two_round_run_is_a_create_agent_transcript(run_loop: Any, plan_mode: str) -> None:
    graph = loop(ROUNDS, plan_mode)
    out = await run_loop(graph, {"user_input": "Weather and page?"}, thread("two-rounds"))
    messages = out["messages"]
    assert kinds(messages) == EXPECTED
    assert messages[-1].content == out["answer"] == "the answer"
    first, second = messages[1], messages[4]
    assert [(c["name"], c["args"]) for c in first.tool_calls] == ROUNDS[0]
    assert [(c["name"], c["args"]) for c in second.tool_calls] == ROUNDS[1]
    # one id per call: on the ToolCall, on its ToolMessage, in its record
    call_ids = [c["id"] for c in [*first.tool_calls, *second.tool_calls]]
    outcomes = [m for m in messages if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in outcomes] == call_ids
    assert [r["tool_call_id"] for r in out["tool_logs"]] == call_ids
    assert len(set(call_ids)) == 3 and all(call_ids)
    assert [m.content for m in outcomes] == [
        "sunny in Paris",
        "sunny in Rome",
        "text of https://example.test/a",
    ]
    assert [m.name for m in outcomes] == ["weather", "weather", "page"]
    assert {m.status for m in outcomes} == {"success"}
    # round_state is built from the same records
    round_state = out["round_state"]
    assert round_state["round_index"] == 2
    assert [r["tool_call_id"] for r in round_state["done_plans"]] == call_ids
    assert [r["tool_call_id"] for r in round_state["last_round_records"]] == call_ids[2:]


async def test_native_calls_keep_the_planners_own_ids(run_loop: Any) -> None:
    planner = ScriptedChatModel(
        [
            AIMessage(
                "",
                tool_calls=[
                    ToolCall(name="weather", args={"city": "Oslo"}, id="toolu_oslo"),
                    ToolCall(name="weather", args={"city": "Bergen"}, id="toolu_bergen"),
                ],
            ),
            "All done.",
        ]
    )
    graph = create_tool_loop(
        planner,
        TOOLS,
        plan_mode="native",
        checkpointer=InMemorySaver(),
        models=ModelOptions(answer_model=ScriptedChatModel(["Oslo and Bergen: sunny."])),
    )
    out = await run_loop(graph, {"user_input": "Oslo and Bergen?"}, thread("native-ids"))
    plan = out["messages"][1]
    assert [c["id"] for c in plan.tool_calls] == ["toolu_oslo", "toolu_bergen"]
    outcomes = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in outcomes] == ["toolu_oslo", "toolu_bergen"]
    assert [r["tool_call_id"] for r in out["tool_logs"]] == ["toolu_oslo", "toolu_bergen"]


async def test_a_failed_call_is_an_error_tool_message(run_loop: Any, plan_mode: str) -> None:
    rounds: list[Round] = [[("broken", {"code": 503}), ("weather", {"city": "Oslo"})]]
    out = await run_loop(loop(rounds, plan_mode), {"user_input": "Try it"}, thread("failed"))
    failed, fine = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert (failed.status, fine.status) == ("error", "success")
    assert "service down (503)" in str(failed.content)
    assert failed.name == "broken" and failed.artifact is None
    [record] = [r for r in out["tool_logs"] if r["tool_name"] == "broken"]
    assert not record["success"] and record["tool_call_id"] == failed.tool_call_id


async def test_an_artifact_tool_keeps_its_artifact(run_loop: Any, plan_mode: str) -> None:
    rounds: list[Round] = [[("page", {"url": "u1"}), ("weather", {"city": "Oslo"})]]
    out = await run_loop(loop(rounds, plan_mode), {"user_input": "Read u1"}, thread("artifact"))
    with_artifact, plain = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert with_artifact.content == "text of u1"
    assert with_artifact.artifact == {"url": "u1", "bytes": 42}
    assert plain.artifact is None
    [record] = [r for r in out["tool_logs"] if r["tool_name"] == "page"]
    assert record["artifact"] == {"url": "u1", "bytes": 42}


def _prompt_text(request: list[BaseMessage]) -> str:
    return "\n".join(message.text for message in request)


async def test_a_second_turn_sees_each_result_once(run_loop: Any, plan_mode: str) -> None:
    first_round: Round = [("weather", {"city": "Paris"})]
    second_round: Round = [("weather", {"city": "Rome"})]
    planner = ScriptedChatModel([*plans([first_round]), *plans([second_round])])
    answerer = ScriptedChatModel(["Paris: sunny in Paris.", "Rome: sunny in Rome."])
    graph = create_tool_loop(
        planner,
        TOOLS,
        plan_mode=plan_mode,  # type: ignore[arg-type]
        checkpointer=InMemorySaver(),
        models=ModelOptions(answer_model=answerer),
    )
    config = thread("second-turn")
    await run_loop(graph, {"messages": [HumanMessage("Paris?")]}, config)
    out = await run_loop(graph, {"messages": [HumanMessage("And Rome?")]}, config)
    assert out["answer"] == "Rome: sunny in Rome."
    turn = ["Human", "AI(tool_calls)", "Tool", "AI"]
    assert kinds(out["messages"]) == [*turn, *turn]
    # the second turn: planned before its round, then once more after it
    before, after = (_prompt_text(request) for request in planner.requests[2:4])
    assert "And Rome?" in before and "And Rome?" in after
    for prompt in (before, after):  # the earlier turn as the transcript holds it, once
        assert prompt.count("Paris?") == 1
        assert prompt.count("sunny in Paris") == 2  # its result, its answer
    assert "sunny in Rome" not in before
    assert after.count("sunny in Rome") == 1  # its result, once
    answer_prompt = _prompt_text(answerer.requests[1])
    assert answer_prompt.count("sunny in Paris") == 1  # the earlier answer only
    assert answer_prompt.count("sunny in Rome") == 1  # this turn's result, injected


def _agent_script(rounds: list[Round]) -> list[AIMessage | str]:
    return [*tool_call_turns(rounds), "the answer"]


async def test_the_shape_matches_create_agent_on_the_same_calls(
    run_loop: Any, plan_mode: str
) -> None:
    agent = create_agent(
        ScriptedChatModel(_agent_script(ROUNDS)), TOOLS, checkpointer=InMemorySaver()
    )
    theirs = await run_loop(agent, {"messages": [HumanMessage("Weather and page?")]}, thread("a"))
    graph = loop(ROUNDS, plan_mode)
    ours = await run_loop(graph, {"messages": [HumanMessage("Weather and page?")]}, thread("b"))
    assert kinds(ours["messages"]) == kinds(theirs["messages"]) == EXPECTED

    def calls(messages: list[BaseMessage]) -> list[tuple[str, dict[str, Any]]]:
        return [
            (c["name"], c["args"])
            for m in messages
            if isinstance(m, AIMessage)
            for c in m.tool_calls
        ]

    def outcomes(messages: list[BaseMessage]) -> list[tuple[Any, ...]]:
        return [
            (m.name, m.content, m.status, m.artifact)
            for m in messages
            if isinstance(m, ToolMessage)
        ]

    assert calls(ours["messages"]) == calls(theirs["messages"])
    assert outcomes(ours["messages"]) == outcomes(theirs["messages"])


async def test_a_parent_sharing_messages_reads_the_answer_last(
    run_loop: Any, plan_mode: str
) -> None:
    parent = StateGraph(MessagesState)
    parent.add_node("agent", loop(ROUNDS, plan_mode))
    parent.add_edge(START, "agent")
    app = parent.compile(checkpointer=InMemorySaver())
    out = await run_loop(app, {"messages": [HumanMessage("Weather and page?")]}, thread("parent"))
    assert kinds(out["messages"]) == EXPECTED
    assert out["messages"][-1].content == "the answer"


async def test_only_the_answer_streams_as_answer_tokens(run_loop: Any, plan_mode: str) -> None:
    entry: str = run_loop.entry
    graph = loop(ROUNDS, plan_mode, answers=["The weather is sunny."])
    payload = {"user_input": "Weather and page?"}
    items = await run_loop.stream(graph, payload, thread(f"stream-{entry}"), stream_mode="messages")
    answer = "".join(m.text for m, meta in items if is_answer_token(m, meta))
    assert answer == "The weather is sunny."
    # the outcomes and the plan's tool calls reach the stream too, never as answer tokens
    outcomes = [(m, meta) for m, meta in items if isinstance(m, ToolMessage)]
    assert {meta["langgraph_node"] for _, meta in outcomes} == {"call_tool"}
    assert len(outcomes) == 3
    planned = [(m, meta) for m, meta in items if isinstance(m, AIMessage) and m.tool_calls]
    assert planned
    assert not any(is_answer_token(m, meta) for m, meta in [*outcomes, *planned])


async def test_a_replayed_call_is_named_by_the_run_that_replays_it(
    run_loop: Any, plan_mode: str
) -> None:
    sent: list[str] = []

    @tool
    def send_payment(to: str, amount: int) -> str:
        """Send a payment (a side effect)."""
        sent.append(f"{to}:{amount}")
        return f"paid {amount} to {to}"

    rounds: list[Round] = [[("send_payment", {"to": "bob", "amount": 10})]]
    graph = create_tool_loop(
        ScriptedChatModel([*plans(rounds), *plans(rounds)]),
        [send_payment],
        plan_mode=plan_mode,  # type: ignore[arg-type]
        checkpointer=InMemorySaver(),
        governance=GovernanceOptions(policies={"send_payment": ToolPolicy(idempotent=False)}),
        models=ModelOptions(answer_model=ScriptedChatModel(["paid", "paid"])),
    )
    request = {"user_input": "pay bob 10", "idempotency_key": "order-17"}
    first = await run_loop(graph, request, thread("client"))
    second = await run_loop(graph, request, thread("client-retry"))
    assert sent == ["bob:10"]
    [record] = second["tool_logs"]
    assert record["replayed"] is True
    [planned] = second["messages"][1].tool_calls
    [outcome] = [m for m in second["messages"] if isinstance(m, ToolMessage)]
    assert outcome.tool_call_id == planned["id"] == record["tool_call_id"]
    assert outcome.content == "paid 10 to bob" and outcome.status == "success"
    assert first["messages"][1].tool_calls[0]["id"] != planned["id"]


async def test_the_checkpoint_rebuilds_the_same_transcript(run_loop: Any, plan_mode: str) -> None:
    graph = loop(ROUNDS, plan_mode)
    config = thread("rebuilt")
    out = await run_loop(graph, {"messages": [HumanMessage("Weather and page?")]}, config)
    ids = [m.id for m in out["messages"]]
    assert all(ids) and len(set(ids)) == len(ids)
    # the channel keeps only writes: each read replays them to the same messages and ids
    for _ in range(2):
        stored = (await graph.aget_state(config)).values["messages"]
        assert [m.id for m in stored] == ids
        assert kinds(stored) == EXPECTED


def test_message_writes_fold_the_same_in_any_batches() -> None:
    writes: list[Any] = [
        [HumanMessage("one")],
        [AIMessage("", tool_calls=[ToolCall(name="weather", args={}, id="c1")], id="p1")],
        [ToolMessage("sunny", tool_call_id="c1", id="o1")],
        [AIMessage("answer one")],
        [HumanMessage("one")],  # the same text again is a new message
    ]
    whole = reduce_messages([], writes)
    assert reduce_messages(reduce_messages([], writes[:2]), writes[2:]) == whole
    assert [type(m).__name__ for m in whole] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
        "HumanMessage",
    ]
    assert len({m.id for m in whole}) == 5
    assert reduce_messages([], writes) == whole  # no random ids


def test_message_writes_merge_by_id_as_add_messages_does() -> None:
    """Appends, a replacement by id, a chunk, a dict and a removal fold as LangGraph's own."""
    writes: list[Any] = [
        [HumanMessage("one", id="h1"), AIMessage("draft", id="a1")],
        [AIMessage("final", id="a1")],  # replaces the draft in place
        [AIMessageChunk("streamed", id="c1")],  # becomes an AIMessage
        {"role": "user", "content": "two", "id": "h2"},
        [
            ToolMessage("sunny", tool_call_id="t1", id="o1"),
            ToolMessage("rain", tool_call_id="t2", id="o1"),
        ],
        [RemoveMessage(id="h1")],
    ]
    folded: list[Any] = []
    merged: Any = []
    for write in writes:  # every message has an id: no id of the loop's is made
        folded = reduce_messages(folded, [write])
        merged = add_messages(merged, write)
        assert [(type(m), m.id, m.content) for m in folded] == [
            (type(m), m.id, m.content) for m in merged
        ]
    assert [(type(m).__name__, m.id, m.content) for m in folded] == [
        ("AIMessage", "a1", "final"),
        ("AIMessage", "c1", "streamed"),
        ("HumanMessage", "h2", "two"),
        ("ToolMessage", "o1", "rain"),
    ]
    assert reduce_messages([], writes) == folded


def test_serialized_messages_fold_as_the_messages_they_were() -> None:
    """The LangGraph server reads a thread's transcript back as dicts (`model_dump`).

    Both the stored snapshot (the current value) and the writes after it arrive in that
    form; each becomes the message it was, every field in place, and a message stored
    without an id gets the same id as when it was folded the first time.
    """
    usage = {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}
    plan = ToolCall(name="weather", args={"city": "Paris"}, id="c1")
    transcript: list[Any] = [
        HumanMessage("Weather?", id="h1"),
        AIMessage("", tool_calls=[plan], id="p1", usage_metadata=usage, name="planner"),
    ]
    writes: list[Any] = [
        [ToolMessage("sunny", tool_call_id="c1", id="o1", status="success", artifact={"n": 1})],
        [AIMessage("It is sunny.", usage_metadata=usage)],  # no id: the loop names it
    ]
    folded = reduce_messages(transcript, writes)
    dumped = reduce_messages(
        [message.model_dump() for message in transcript],
        [[message.model_dump() for message in write] for write in writes],
    )
    assert dumped == folded
    assert [type(m).__name__ for m in dumped] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
    ]
    assert dumped[1].usage_metadata == usage and dumped[1].tool_calls[0]["id"] == "c1"
    assert dumped[2].artifact == {"n": 1} and dumped[3].id == folded[3].id
