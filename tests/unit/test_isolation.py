"""Isolation between users and threads: cached and last good results answer only their owner."""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from agentloop import GovernanceOptions, ModelOptions, ToolPolicy, ToolRetry, create_tool_loop
from agentloop.governance.cache_scope import run_identity
from agentloop.testing import ScriptedChatModel, plan_reply, planning_round

ORDERS = {"alice": "orders of alice: card **** 1111", "bob": "orders of bob: card **** 2222"}


def _planner() -> ScriptedChatModel:
    command = {"purpose": "", "tool_name": "get_my_orders", "tool_kwargs": {"status": "open"}}
    return ScriptedChatModel(
        responder=lambda messages: str(
            plan_reply("execute", [command])
            if planning_round(messages) == 0
            else plan_reply("response")
        )
    )


def _orders_loop(policy: ToolPolicy, **options: Any) -> tuple[Any, list[str]]:
    served: list[str] = []
    failing: set[str] = set()

    @tool
    def get_my_orders(status: str, config: RunnableConfig) -> str:
        """The current user's orders."""
        user = config["configurable"]["user_id"]
        if user in failing:
            raise ConnectionError("orders service unavailable")
        served.append(user)
        return ORDERS[user]

    graph = create_tool_loop(
        _planner(),
        [get_my_orders],
        models=ModelOptions(answer_model=ScriptedChatModel(["ok"], repeat_last=True)),
        governance=GovernanceOptions(policies={"get_my_orders": policy}),
        **options,
    )
    graph.failing = failing  # type: ignore[attr-defined]
    return graph, served


def _user(name: str, thread: str | None = None) -> RunnableConfig:
    configurable: dict[str, Any] = {"user_id": name}
    if thread is not None:
        configurable["thread_id"] = thread
    return {"configurable": configurable}


async def test_cached_results_never_answer_another_user(run_loop: Any) -> None:
    graph, served = _orders_loop(ToolPolicy(read_only=True, cache_ttl_s=60))
    alice = await run_loop(graph, {"user_input": "my orders"}, _user("alice"))
    bob = await run_loop(graph, {"user_input": "my orders"}, _user("bob"))
    alice_again = await run_loop(graph, {"user_input": "my orders"}, _user("alice"))
    assert served == ["alice", "bob"]
    assert bob["tool_logs"][0]["result"] == ORDERS["bob"]
    assert bob["tool_logs"][0]["from_cache"] is False
    assert "alice" not in str(bob)
    assert alice["tool_logs"][0]["from_cache"] is False
    assert alice_again["tool_logs"][0]["from_cache"] is True
    assert alice_again["tool_logs"][0]["result"] == ORDERS["alice"]


async def test_cached_results_stay_in_their_thread(run_loop: Any) -> None:
    graph, served = _orders_loop(
        ToolPolicy(read_only=True, cache_ttl_s=60), checkpointer=InMemorySaver()
    )
    await run_loop(graph, {"user_input": "my orders"}, _user("alice", "t-1"))
    other_thread = await run_loop(graph, {"user_input": "my orders"}, _user("alice", "t-2"))
    same_thread = await run_loop(graph, {"user_input": "again"}, _user("alice", "t-1"))
    assert served == ["alice", "alice"]
    assert other_thread["tool_logs"][0]["from_cache"] is False
    assert same_thread["tool_logs"][-1]["from_cache"] is True


async def test_stale_fallback_never_serves_another_users_result(run_loop: Any) -> None:
    policy = ToolPolicy(read_only=True, retry=ToolRetry(max_attempts=1), stale_fallback_s=3600)
    graph, served = _orders_loop(policy)
    await run_loop(graph, {"user_input": "my orders"}, _user("alice"))
    graph.failing.update({"alice", "bob"})
    bob = await run_loop(graph, {"user_input": "my orders"}, _user("bob"))
    alice = await run_loop(graph, {"user_input": "my orders"}, _user("alice"))
    record = bob["tool_logs"][0]
    assert record["success"] is False and record["fallback"] == ""
    assert "alice" not in str(bob)
    assert alice["tool_logs"][0]["fallback"] == "stale_cache"
    assert alice["tool_logs"][0]["result"] == ORDERS["alice"]
    assert served == ["alice"]


async def test_global_scope_shares_results_with_every_run(run_loop: Any) -> None:
    graph, served = _orders_loop(ToolPolicy(read_only=True, cache_ttl_s=60, cache_scope="global"))
    await run_loop(graph, {"user_input": "rates"}, _user("alice"))
    bob = await run_loop(graph, {"user_input": "rates"}, _user("bob"))
    assert served == ["alice"]
    assert bob["tool_logs"][0]["from_cache"] is True


def test_run_identity_counts_users_and_threads_not_per_run_keys() -> None:
    alice = {"configurable": {"user_id": "alice", "thread_id": "t-1", "checkpoint_ns": ""}}
    same_alice = {
        "configurable": {
            "user_id": "alice",
            "thread_id": "t-1",
            "run_id": "r-2",
            "langgraph_request_id": "q-2",
            "langsmith-trace": "trace-2",
            "__pregel_task_id": "x",
        }
    }
    other_thread = {"configurable": {"user_id": "alice", "thread_id": "t-2"}}
    bob = {"configurable": {"user_id": "bob", "thread_id": "t-1"}}
    assert run_identity(alice) == run_identity(same_alice)
    assert len({run_identity(alice), run_identity(other_thread), run_identity(bob)}) == 3
    assert run_identity(alice, thread=False) == run_identity(other_thread, thread=False)
    assert run_identity(alice, {"tenant": "a"}) != run_identity(alice, {"tenant": "b"})
    assert run_identity(alice, object()) != run_identity(alice, object())  # never shared


def test_run_identity_digests_plain_identities_once(monkeypatch: Any) -> None:
    import agentloop.governance.cache_scope as cache_scope

    digests: list[bytes] = []
    sha256 = cache_scope.hashlib.sha256

    def counting(data: bytes) -> Any:
        digests.append(data)
        return sha256(data)

    monkeypatch.setattr(cache_scope.hashlib, "sha256", counting)
    known = cache_scope.RunIdentities()  # a loop's own (`LoopParts.identities`)
    carol: RunnableConfig = {"configurable": {"thread_id": "t-carol", "user_id": "carol"}}
    first = run_identity(carol, known=known)
    owner = run_identity(carol, thread=False, known=known)
    once = len(digests)  # with and without the thread, each once
    assert once == 2 and owner != first
    for task in range(5):  # every call of a run: its own task id, the same identity
        config: RunnableConfig = {"configurable": {**carol["configurable"], "task_id": task}}
        assert run_identity(config, known=known) == first
        assert run_identity(config, thread=False, known=known) == owner
    assert len(digests) == once
    assert run_identity(carol) == first and run_identity(carol, thread=False) == owner
    assert len(digests) == once + 2  # no loop's: digested again
    # equal as Python keys, different as JSON: not one cached identity
    assert run_identity({"configurable": {"user_id": 1}}, known=known) != run_identity(
        {"configurable": {"user_id": True}}, known=known
    )
    # a context that can change in place is digested every time
    context = {"tenant": "a"}
    before = run_identity(carol, context, known=known)
    context["tenant"] = "b"
    assert run_identity(carol, context, known=known) != before


def test_the_server_user_counts_by_its_id_and_keeps_plain_identities_memoized() -> None:
    import agentloop.governance.cache_scope as cache_scope

    class User:  # the server's user object: a new one for every request
        def __init__(self, identity: str) -> None:
            self.identity = identity

    def served(user_id: str) -> RunnableConfig:
        return {
            "configurable": {
                "thread_id": "t-1",
                "langgraph_auth_user_id": user_id,
                "langgraph_auth_user": User(user_id),
            }
        }

    assert run_identity(served("alice")) == run_identity(served("alice"))
    assert run_identity(served("alice")) != run_identity(served("bob"))
    known = cache_scope.RunIdentities()
    first = run_identity(served("alice"), known=known)
    assert run_identity(served("alice"), known=known) == first
    assert run_identity(served("alice")) == first  # the same with and without the memo
