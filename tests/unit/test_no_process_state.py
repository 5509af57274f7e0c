"""Nothing process-wide: two loops share no cache or registry, and the library leaves
logging and `atexit` alone unless the app asks (`install_log_redaction`).
"""

from __future__ import annotations

import atexit
import logging
import weakref
from collections.abc import Callable, Iterator
from typing import Any, cast

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from agentloop import (
    GovernanceOptions,
    LogRedaction,
    MCPToolset,
    ModelOptions,
    PlanningOptions,
    ToolPolicy,
    create_tool_loop,
    install_log_redaction,
)
from agentloop.governance.call_config import CallInfo
from agentloop.nodes.accelerate import Accelerator
from agentloop.nodes.parts import LoopParts
from agentloop.observability.redaction import REDACTED, installed_log_redaction
from agentloop.testing import ScriptedChatModel, plan_reply

SECRET = "orchard-key-5f4e3d2c1b"


@tool
def get_price(item: str) -> str:
    """The price of an item."""
    return f"{item}: 3 EUR"


@tool
def get_stock(item: str) -> str:
    """How many of an item are in stock."""
    return f"{item}: 12"


def _loop_parts(graph: Any) -> LoopParts:
    """The one `LoopParts` a compiled loop's nodes share (found in their closures)."""
    found: dict[int, LoopParts] = {}
    for node in graph.nodes.values():
        bound = node.bound
        for function in (getattr(bound, "func", None), getattr(bound, "coroutine", None)):
            owner = getattr(function, "__self__", None)
            candidates = [getattr(owner, "parts", None)]
            candidates += [
                cell.cell_contents for cell in getattr(function, "__closure__", None) or ()
            ]
            found.update({id(c): c for c in candidates if isinstance(c, LoopParts)})
    assert len(found) == 1, "every node of a loop shares one LoopParts"
    return next(iter(found.values()))


def _accelerator(graph: Any) -> Accelerator:
    """The one `Accelerator` a compiled loop's nodes share (the plan, call_tool, answer)."""
    owners = [
        getattr(getattr(node.bound, "coroutine", None), "__self__", None)
        for node in graph.nodes.values()
    ]
    found = {
        id(a): a for o in owners if isinstance(a := getattr(o, "accelerator", None), Accelerator)
    }
    assert len(found) == 1, "every node of a loop shares one Accelerator"
    return next(iter(found.values()))


def _owned(graph: Any) -> dict[str, Any]:
    """Every cache, registry and pool a loop holds, by name."""
    parts = _loop_parts(graph)
    runner = parts.runner
    return {
        "planned_arguments": parts.planned_arguments,
        "replays": parts.replays,
        "identities": parts.identities,
        "accelerator": _accelerator(graph),
        "models": parts.models,
        "catalog": parts.tools,
        "registry": parts.registry,
        "sampling": parts.sampling,
        "runner": runner,
        "result_cache": runner.cache,
        "whole_results": runner.whole_results,
        "invoker": runner.invoker,
        "tool_threads": runner.invoker.threads,
        "prompts": parts.prompts,
    }


def _two_loops() -> tuple[Any, Any]:
    """Two loops of one process with different tools and options."""
    rounds = [
        plan_reply("execute", [{"tool_name": "get_price", "tool_kwargs": {"item": "plum"}}]),
        plan_reply("execute", [{"tool_name": "get_price", "tool_kwargs": {"item": "pear"}}]),
        plan_reply("response"),
    ]
    first = create_tool_loop(
        ScriptedChatModel(rounds),
        [get_price],
        models=ModelOptions(answer_model=ScriptedChatModel(["plums cost 3"], repeat_last=True)),
        governance=GovernanceOptions(policies={"get_price": ToolPolicy(cache_ttl_s=60.0)}),
        checkpointer=InMemorySaver(),
    )
    second = create_tool_loop(
        ScriptedChatModel([plan_reply("response")]),
        [get_stock],
        models=ModelOptions(answer_model=ScriptedChatModel(["none"], repeat_last=True)),
        planning=PlanningOptions(keep_tool_results=3),
        max_rounds=4,
    )
    return first, second


def test_two_loops_share_no_cache_registry_or_pool() -> None:
    first, second = (_owned(graph) for graph in _two_loops())
    shared = [name for name in first if first[name] is second[name]]
    assert shared == []


async def test_a_run_of_one_loop_fills_only_its_own_caches(run_loop: Any) -> None:
    first, second = _two_loops()
    mine, theirs = _owned(first), _owned(second)
    config = {"configurable": {"thread_id": "prices"}}
    out = await run_loop(first, {"user_input": "what do plums and pears cost?"}, config)
    assert [record["success"] for record in out["round_state"]["done_plans"]] == [True, True]
    filled = ("replays", "identities", "result_cache")
    assert all(len(mine[name]) > 0 for name in filled), {n: len(mine[n]) for n in filled}
    kept = (*filled, "whole_results", "planned_arguments")
    assert all(len(theirs[name]) == 0 for name in kept)


def _call_of(sampler: str) -> CallInfo:
    """A call's info as far as sampling reads it: its loop's sampler key."""
    return cast("CallInfo", {"sampler": sampler})


def test_a_toolset_answers_each_loops_sampling_with_that_loops_model() -> None:
    toolset = MCPToolset({"mcpServers": {}})
    try:
        graphs = [
            create_tool_loop(ScriptedChatModel([plan_reply("response")], name=name), [toolset])
            for name in ("first", "second")
        ]
        for graph in graphs:
            sampling = _loop_parts(graph).sampling
            assert toolset.samplers.of(_call_of(sampling.key)) is sampling.model
        other = MCPToolset({"mcpServers": {}})
        assert other.samplers.of(_call_of(_loop_parts(graphs[0]).sampling.key)) is None
        other.close()
    finally:
        toolset.close()


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Callable[..., Any]]]:
    """What `atexit.register` was given while the test ran, but Python's own finalizers.

    The first `weakref.finalize` of a process registers the one hook of the standard
    library that runs every finalizer still alive at exit; a toolset's own finalizer
    (which closes it if the app did not) goes through it, like any other object's.
    """
    hooks: list[Callable[..., Any]] = []

    def record(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Callable[..., Any]:
        if function != weakref.finalize._exitfunc:  # type: ignore[attr-defined]
            hooks.append(function)
        return function

    monkeypatch.setattr(atexit, "register", record)
    yield hooks


def test_building_loops_options_and_toolsets_changes_no_logging_and_no_atexit(
    registered: list[Callable[..., Any]],
) -> None:
    factory = logging.getLogRecordFactory()
    options = GovernanceOptions(redact=lambda text: text.replace(SECRET, "[KEY]"))
    graphs = _two_loops()
    toolset = MCPToolset({"mcpServers": {}})
    toolset.close()
    assert logging.getLogRecordFactory() is factory
    assert installed_log_redaction() is None
    assert registered == []
    del options, graphs


def test_install_log_redaction_is_idempotent_and_reversible(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def hide_key(text: str) -> str:
        return text.replace(SECRET, "[KEY]")

    factory = logging.getLogRecordFactory()
    caplog.set_level(logging.INFO)
    log = logging.getLogger("agentloop.governance.catalog")

    redaction = install_log_redaction(hide_key)
    assert isinstance(redaction, LogRedaction)
    again = install_log_redaction(hide_key)
    assert again is redaction and redaction.hooks == [hide_key]  # one factory, one hook
    assert logging.getLogRecordFactory() is redaction
    log.info("using %s and sk-proj-Q9x7Lw2Zr5Tt8Yb3Nc6Vd1Mf", SECRET)
    assert SECRET not in caplog.text and "[KEY]" in caplog.text and REDACTED in caplog.text

    redaction.uninstall()
    assert logging.getLogRecordFactory() is factory
    assert installed_log_redaction() is None
    caplog.clear()
    log.info("using %s", SECRET)
    assert SECRET in caplog.text  # the app's logging is as it was


def test_a_hook_removed_no_longer_applies(caplog: pytest.LogCaptureFixture) -> None:
    def hide_key(text: str) -> str:
        return text.replace(SECRET, "[KEY]")

    caplog.set_level(logging.INFO)
    redaction = install_log_redaction(hide_key)
    redaction.remove(hide_key)
    logging.getLogger("agentloop").info("using %s", SECRET)
    assert SECRET in caplog.text
    redaction.uninstall()


def test_uninstalled_under_a_later_factory_it_passes_records_through(
    caplog: pytest.LogCaptureFixture,
) -> None:
    factory = logging.getLogRecordFactory()
    redaction = install_log_redaction(lambda text: text.replace(SECRET, "[KEY]"))

    def later(*args: Any, **kwargs: Any) -> logging.LogRecord:
        return redaction(*args, **kwargs)

    logging.setLogRecordFactory(later)  # the app wraps the factory afterwards
    try:
        redaction.uninstall()
        assert logging.getLogRecordFactory() is later  # the app's own is left in place
        caplog.set_level(logging.INFO)
        logging.getLogger("agentloop").info("using %s", SECRET)
        assert SECRET in caplog.text
    finally:
        logging.setLogRecordFactory(factory)
