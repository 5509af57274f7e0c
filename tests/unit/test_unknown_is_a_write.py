"""A tool nobody classified is presumed to write: never retried, cached, deduplicated or early."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver

from agentloop import GovernanceOptions, ModelOptions, ToolPolicy, ToolRetry, create_tool_loop
from agentloop.governance.policy import resolve_policy
from agentloop.testing import ScriptedChatModel, plan_reply

FAST_RETRY = ToolRetry(max_attempts=3, initial_delay_s=0, jitter=False)


def _charge_card_tool(charges: list[str]) -> BaseTool:
    @tool
    def charge_card(card: str, amount: int) -> str:
        """Charge a card."""
        charges.append(card)
        raise ConnectionError("the connection dropped after the charge went through")

    return charge_card


@pytest.mark.parametrize("saver", [None, "memory"])
async def test_an_unclassified_tool_that_fails_transiently_after_its_effect_runs_once(
    run_loop: Any, planning_for: Callable[..., dict[str, Any]], saver: str | None
) -> None:
    charges: list[str] = []
    step = {"tool_name": "charge_card", "tool_kwargs": {"card": "4242", "amount": 30}}
    planner = ScriptedChatModel([plan_reply("execute", [step]), plan_reply("response")])
    graph = create_tool_loop(
        planner,
        [_charge_card_tool(charges)],
        models=ModelOptions(answer_model=ScriptedChatModel(["done"], repeat_last=True)),
        governance=GovernanceOptions(default_retry=FAST_RETRY),
        checkpointer=InMemorySaver() if saver else None,
        **planning_for(),
    )
    config = {"configurable": {"thread_id": f"charge-{run_loop.entry}-{saver}"}}
    out = await run_loop(graph, {"user_input": "charge it"}, config)
    [record] = out["round_state"]["done_plans"]
    assert charges == ["4242"]  # charged once, not retried
    assert record["attempts"] == 1 and not record["success"]
    assert record["error_type"] == "network_error"


@pytest.mark.parametrize(
    "name",
    ["charge_card", "pay_invoice", "refund_order", "post_refund", "transfer_funds", "book_room",
     "check_in_guest", "getaway", "lookupx", "process"],
)  # fmt: skip
def test_names_without_a_read_verb_are_writes(name: str) -> None:
    policy = resolve_policy(_named(name))
    assert not (policy.read_only or policy.idempotent or policy.concurrency_safe)
    assert policy.classified_by_default and policy.writes_state


@pytest.mark.parametrize(
    "name",
    [
        # a read verb joined to a write
        "get_and_delete", "fetch_and_charge", "search_and_replace", "list_delete",
        "read_and_clear", "getOrCreate", "find_or_create_user", "lookup_and_lock",
        "describeAndDrop",
        # every way of writing a name splits into the same words
        "GetAndDelete", "get-and-delete", "get.and.delete", "GET_AND_DELETE", "getURLAndDrop",
        # a write word anywhere, without a conjunction
        "get_user_then_ban", "fetch_invoice_pay", "list_files_remove", "read_config_update",
        "search_index_reset", "get_job_run", "findAndModify", "lookupUpsert",
        # a conjunction joins a second action, even one no list names
        "search_and_tidy", "find_or_make_user", "fetch_then_bake", "get_terms_and_conditions",
        # a word that is also a noun keeps the name a write ("get the set" or "get, set")
        "get_set", "get_order", "list_post", "get_lock_status",
    ],
)  # fmt: skip
def test_a_read_verb_with_a_write_or_a_conjunction_anywhere_is_a_write(name: str) -> None:
    policy = resolve_policy(_named(name))
    assert not (policy.read_only or policy.idempotent or policy.concurrency_safe), name
    assert not policy.repeat_safe and policy.writes_state
    assert policy.classified_by_default


@pytest.mark.parametrize(
    "name", ["get_weather", "getWeather", "get-weather", "search", "list_files", "read_file",
             "find_user", "fetch_page", "lookup", "describe_table", "search_docs",
             "fetchUserProfile", "FetchUserProfile", "get.weather", "GET_WEATHER",
             "get_settings", "get_deleted_items", "list_orders", "get_user_updates",
             "getURLList", "describe_table_columns", "lookup_isbn13"],
)  # fmt: skip
def test_a_read_verb_followed_by_nouns_makes_a_tool_read_only(name: str) -> None:
    policy = resolve_policy(_named(name))
    assert policy.read_only and policy.idempotent and policy.concurrency_safe, name
    assert policy.repeat_safe and not policy.writes_state
    assert not policy.classified_by_default


def _get_and_delete_tool(effects: list[str]) -> BaseTool:
    @tool
    def get_and_delete(key: str) -> str:
        """Return a stored value and delete it."""
        effects.append(key)
        raise ConnectionError("the connection dropped after the value was deleted")

    return get_and_delete


@pytest.mark.parametrize("saver", [None, "memory"])
async def test_a_read_verb_joined_to_a_write_is_not_retried_after_its_effect(
    run_loop: Any, planning_for: Callable[..., dict[str, Any]], saver: str | None
) -> None:
    effects: list[str] = []
    step = {"tool_name": "get_and_delete", "tool_kwargs": {"key": "session-7"}}
    planner = ScriptedChatModel([plan_reply("execute", [step]), plan_reply("response")])
    graph = create_tool_loop(
        planner,
        [_get_and_delete_tool(effects)],
        models=ModelOptions(answer_model=ScriptedChatModel(["done"], repeat_last=True)),
        governance=GovernanceOptions(default_retry=FAST_RETRY),
        checkpointer=InMemorySaver() if saver else None,
        **planning_for(),
    )
    config = {"configurable": {"thread_id": f"get-and-delete-{run_loop.entry}-{saver}"}}
    out = await run_loop(graph, {"user_input": "take the value"}, config)
    [record] = out["round_state"]["done_plans"]
    assert effects == ["session-7"]  # deleted once, not retried
    assert record["attempts"] == 1 and not record["success"]
    assert record["error_type"] == "network_error"


def test_declarations_classify_and_name_rules_never_make_a_tool_a_write() -> None:
    assert resolve_policy(_named("charge_card"), ToolPolicy(read_only=True)).read_only
    by_metadata = _named("quote_price")
    by_metadata.metadata = {"agentloop": {"read_only": True}}
    assert resolve_policy(by_metadata).concurrency_safe
    hinted = _named("quote_price")
    hinted.metadata = {"readOnlyHint": True}
    assert resolve_policy(hinted).idempotent
    declared = resolve_policy(_named("get_or_charge"), ToolPolicy(read_only=False))
    assert not declared.read_only and not declared.classified_by_default


def test_each_build_says_once_which_tools_were_classified_by_default(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tools = [_named("charge_card"), _named("book_room"), _named("get_weather")]
    with caplog.at_level(logging.INFO, logger="agentloop.policy"):
        create_tool_loop(ScriptedChatModel(["{}"]), tools)
    lines = [r.getMessage() for r in caplog.records if r.name == "agentloop.policy"]
    assert len(lines) == 1
    assert "charge_card, book_room" in lines[0] and "get_weather" not in lines[0]
    assert "read_only=True" in lines[0]


def _named(name: str) -> BaseTool:
    @tool(name)
    def the_tool(x: str) -> str:
        """Do something."""
        return x

    return the_tool
