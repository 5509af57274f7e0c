"""Tools written for `create_agent` / `ToolNode`: injected arguments, the app's context, a store."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from langchain.agents.middleware import wrap_tool_call
from langchain.tools import (
    InjectedState,
    InjectedStore,
    InjectedToolArg,
    InjectedToolCallId,
    ToolRuntime,
)
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command

from agentloop import GovernanceOptions, LoopContext, ModelOptions, ToolPolicy, create_tool_loop
from agentloop.durability import call_key
from agentloop.testing import ScriptedChatModel, plan_reply


@dataclass
class UserContext:
    """The app's run context."""

    user_id: str
    locale: str = "en"


@tool
def favourite(topic: str, runtime: ToolRuntime[UserContext]) -> str:
    """Look up the user's favourite thing about a topic."""
    assert runtime.store is not None
    item = runtime.store.get(("favourites", runtime.context.user_id), topic)
    runtime.stream_writer({"type": "favourite_read", "topic": topic})
    found = item.value["name"] if item else "nothing"
    return f"{runtime.context.user_id} ({runtime.context.locale}) likes {found}"


@tool
def remember(topic: str, name: str, store: Annotated[BaseStore, InjectedStore()]) -> str:
    """Remember the user's favourite thing about a topic."""
    store.put(("favourites", "shared"), topic, {"name": name})
    return "saved"


@tool
def whereabouts(
    label: str,
    call_ref: Annotated[str, InjectedToolCallId],
    request: Annotated[str, InjectedState("user_input")],
    whole_state: Annotated[dict[str, Any], InjectedState()],
    secret_hint: Annotated[str, InjectedToolArg] = "none",
) -> str:
    """Report where a call comes from."""
    keys = ",".join(key for key in ("user_input", "round_state") if key in whole_state)
    return f"{label}|{call_ref}|{request}|{keys}|{secret_hint}"


@tool
def commanding(value: int) -> Command[Any]:
    """A ToolNode-style tool that updates the graph's state itself."""
    return Command(update={"answer": str(value)})


def _loop(commands: list[dict[str, Any]], tools: list[Any], **options: Any) -> tuple[Any, Any]:
    planner = ScriptedChatModel([plan_reply("execute", commands), plan_reply("response")])
    answerer = ScriptedChatModel(["done"], repeat_last=True)
    return create_tool_loop(
        planner, tools, models=ModelOptions(answer_model=answerer), **options
    ), planner


def _records(out: dict[str, Any]) -> list[dict[str, Any]]:
    return list(out["round_state"]["done_plans"])


async def test_tool_runtime_reads_the_apps_context_and_store(run_loop: Any) -> None:
    store = InMemoryStore()
    store.put(("favourites", "u7"), "tea", {"name": "sencha"})
    graph, _ = _loop(
        [{"tool_name": "favourite", "tool_kwargs": {"topic": "tea"}}],
        [favourite],
        context_schema=UserContext,
        store=store,
    )
    out = await run_loop(graph, {"user_input": "what tea?"}, context=UserContext("u7", "fr"))
    [record] = _records(out)
    assert record["success"], record["error"]
    assert record["result"] == "u7 (fr) likes sencha"
    assert record["kwargs"] == {"topic": "tea"}
    assert graph.get_context_jsonschema()["title"] == "UserContext"
    assert set(graph.get_context_jsonschema()["properties"]) == {"user_id", "locale"}


async def test_injected_store_argument_writes_to_the_graphs_store(run_loop: Any) -> None:
    store = InMemoryStore()
    graph, _ = _loop(
        [{"tool_name": "remember", "tool_kwargs": {"topic": "tea", "name": "genmaicha"}}],
        [remember],
        store=store,
    )
    out = await run_loop(graph, {"user_input": "remember genmaicha"})
    assert _records(out)[0]["result"] == "saved"
    item = store.get(("favourites", "shared"), "tea")
    assert item is not None and item.value == {"name": "genmaicha"}


async def test_injected_store_without_a_store_is_a_clear_failed_record(run_loop: Any) -> None:
    graph, _ = _loop(
        [{"tool_name": "remember", "tool_kwargs": {"topic": "tea", "name": "x"}}], [remember]
    )
    out = await run_loop(graph, {"user_input": "remember"})
    [record] = _records(out)
    assert not record["success"]
    assert "pass store= to create_tool_loop" in record["error"]
    assert out["status"] == "ok"


async def test_call_id_and_state_are_injected_and_hidden_from_the_planner(run_loop: Any) -> None:
    graph, planner = _loop(
        [{"tool_name": "whereabouts", "tool_kwargs": {"label": "a"}}], [whereabouts]
    )
    out = await run_loop(graph, {"user_input": "where from?"})
    [record] = _records(out)
    label, call_ref, request, keys, hint = record["result"].split("|")
    assert (label, request, keys, hint) == ("a", "where from?", "user_input,round_state", "none")
    assert call_ref == record["tool_call_id"]  # the id its ToolMessage carries
    prompt = "\n".join(str(message.content) for message in planner.requests[0])
    assert "whereabouts" in prompt and '"label"' in prompt
    for hidden in ("call_ref", "whole_state", "secret_hint", '"request"'):
        assert hidden not in prompt


async def test_values_the_planner_sends_for_injected_arguments_are_dropped(
    run_loop: Any,
) -> None:
    forged = {"label": "a", "call_ref": "forged", "request": "forged", "secret_hint": "forged"}
    graph, _ = _loop(
        [
            {"tool_name": "whereabouts", "tool_kwargs": forged},
            {"tool_name": "whereabouts", "tool_kwargs": {"label": "a"}},
        ],
        [whereabouts],
        checkpointer=InMemorySaver(),
        # it only reads, so a repeat of the same query is a duplicate
        governance=GovernanceOptions(policies={"whereabouts": ToolPolicy(read_only=True)}),
    )
    config = {"configurable": {"thread_id": f"forged-{run_loop.entry}"}}
    out = await run_loop(graph, {"user_input": "where from?"}, config)
    forging, honest = _records(out)
    assert forging["success"] and "forged" not in forging["result"]
    assert forging["kwargs"] == {"label": "a"}
    assert any("call_ref: supplied by the loop" in note for note in forging["notes"])
    # the same call as far as validation, the cache and the ledger are concerned
    assert honest["query_key"] == forging["query_key"]
    run_id = forging["call_id"].split(":", 1)[0]
    assert forging["call_key"] == call_key(run_id, "0", "whereabouts", {"label": "a"}, 0)
    assert honest["duplicate"] is True


async def test_tool_runtime_stream_writer_reaches_the_custom_stream() -> None:
    store = InMemoryStore()
    graph, _ = _loop(
        [{"tool_name": "favourite", "tool_kwargs": {"topic": "tea"}}],
        [favourite],
        context_schema=UserContext,
        store=store,
    )
    events = [
        event
        async for event in graph.astream(
            {"user_input": "tea?"}, stream_mode="custom", context=UserContext("u1")
        )
    ]
    assert {"type": "favourite_read", "topic": "tea"} in events


async def test_a_command_update_of_a_loop_key_is_left_out_and_noted(run_loop: Any) -> None:
    graph, _ = _loop([{"tool_name": "commanding", "tool_kwargs": {"value": 3}}], [commanding])
    out = await run_loop(graph, {"user_input": "go"})
    [record] = _records(out)
    assert record["success"]  # the tool ran: its outcome is kept, not refused after the fact
    assert record["result"] == "commanding updated nothing"
    assert any("'answer'" in note for note in record.get("notes") or [])
    assert "state_update" not in record
    assert out["answer"] == "done"  # the loop's own key is the loop's to write


async def test_middleware_reads_the_apps_context(run_loop: Any) -> None:
    seen: list[Any] = []

    @wrap_tool_call
    async def per_user(request: Any, handler: Any) -> Any:
        seen.append(request.runtime.context)
        return await handler(request)

    graph, _ = _loop(
        [{"tool_name": "favourite", "tool_kwargs": {"topic": "tea"}}],
        [favourite],
        context_schema=UserContext,
        store=InMemoryStore(),
        middleware=[per_user],
    )
    await run_loop(graph, {"user_input": "tea?"}, context=UserContext("u9"))
    assert seen == [UserContext("u9")]


async def test_loop_settings_ride_in_the_config_beside_the_apps_context(run_loop: Any) -> None:
    store = InMemoryStore()
    graph, planner = _loop(
        [{"tool_name": "favourite", "tool_kwargs": {"topic": "tea"}}],
        [favourite],
        context_schema=UserContext,
        store=store,
    )
    config = {"configurable": {"agentloop": LoopContext(max_rounds=0)}}
    out = await run_loop(graph, {"user_input": "tea?"}, config, context=UserContext("u1"))
    assert planner.request_count == 0
    assert out["answer"] == "done"
    graph, planner = _loop([], [favourite], context_schema=UserContext, store=store)
    await run_loop(
        graph, {"user_input": "tea?"}, {"configurable": {"agentloop": {"max_rounds": 0}}},
        context=UserContext("u1"),
    )  # fmt: skip
    assert planner.request_count == 0


def test_tool_message_results_are_their_content() -> None:
    @tool
    def replying(x: int, call_ref: Annotated[str, InjectedToolCallId]) -> ToolMessage:
        """Reply with a tool message of its own."""
        return ToolMessage(content=f"got {x}", tool_call_id=call_ref)

    graph, _ = _loop([{"tool_name": "replying", "tool_kwargs": {"x": 2}}], [replying])
    out = graph.invoke({"user_input": "go"})
    assert _records(out)[0]["result"] == "got 2"


def test_contract_the_private_config_keys_still_hold_the_runtime_and_state() -> None:
    """`governance.injected` reads two private LangGraph config keys, as `ToolNode` does."""
    from langgraph.config import get_config
    from langgraph.graph import START, StateGraph
    from langgraph.runtime import Runtime
    from typing_extensions import TypedDict

    from agentloop.governance.injected import _runtime_of, _state_of

    class State(TypedDict, total=False):
        question: str
        seen: str

    def node(state: State, runtime: Runtime[UserContext]) -> State:
        config = get_config()
        found = _runtime_of(config)
        assert found is not None and found.context == runtime.context
        assert found.store is runtime.store
        return {"seen": f"{_state_of(config)['question']}:{found.context.user_id}"}

    builder = StateGraph(State, context_schema=UserContext)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    graph = builder.compile(store=InMemoryStore())
    assert graph.invoke({"question": "q"}, context=UserContext("u2"))["seen"] == "q:u2"


@tool
def get_profile(
    field: str,
    runtime: ToolRuntime[UserContext],
    call_ref: Annotated[str, InjectedToolCallId],
    request: Annotated[str, InjectedState("user_input")],
) -> str:
    """Read a field of the user's profile."""
    return f"{runtime.context.user_id}:{field}:{call_ref}:{request}"


async def test_calls_started_while_the_plan_streams_get_their_injected_arguments() -> None:
    planner = ScriptedChatModel(
        [
            plan_reply("execute", [{"tool_name": "get_profile", "tool_kwargs": {"field": "name"}}]),
            plan_reply("response"),
        ],
        chunk_size=5,
    )
    graph = create_tool_loop(
        planner,
        [get_profile],
        models=ModelOptions(answer_model=ScriptedChatModel(["ok"])),
        context_schema=UserContext,
    )
    events: list[dict[str, Any]] = []
    final: dict[str, Any] = {}
    async for mode, item in graph.astream(
        {"user_input": "who am I?"}, stream_mode=["custom", "values"], context=UserContext("u5")
    ):
        if mode == "custom":
            events.append(item)
        else:
            final = item
    assert "tool_dispatched" in [event["type"] for event in events]
    [record] = final["tool_logs"]
    assert record["result"] == f"u5:name:{record['tool_call_id']}:who am I?"


@tool
def call_details(runtime: ToolRuntime) -> str:
    """Report the call this runtime describes."""
    info = runtime.config["configurable"]["agentloop_call"]
    names = ",".join(sorted(tool.name for tool in runtime.tools))
    return f"{runtime.tool_call_id}|{info['call_id']}|{names}|{runtime.state['user_input']}"


async def test_tool_runtime_carries_the_calls_config_tools_and_state(run_loop: Any) -> None:
    graph, _ = _loop([{"tool_name": "call_details"}], [call_details, favourite])
    out = await run_loop(graph, {"user_input": "details"})
    [record] = _records(out)
    call_id = record["call_id"]
    expected = f"{record['tool_call_id']}|{call_id}|call_details,favourite|details"
    assert record["result"] == expected
