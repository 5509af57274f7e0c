"""References between the commands of one plan (`"$N"`, `"${N}"`): pure parts and loops."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.tools import tool
from timeline import Timeline

from agentloop import ModelOptions, create_tool_loop
from agentloop.nodes.execute import assign_batches
from agentloop.planning.check import plan_problem, reference_example
from agentloop.planning.references import (
    GENERIC_REFERENCE_EXAMPLE,
    command_dependencies,
    reference_problem,
    referenced_numbers,
    resolve_references,
    result_text,
)
from agentloop.state import PlanDecision, ToolCommand
from agentloop.testing import ScriptedChatModel, plan_reply


def command(tool_name: str, **kwargs: Any) -> ToolCommand:
    return {
        "purpose": "",
        "tool_name": tool_name,
        "tool_kwargs": kwargs,
        "todo_suggestion": "",
        "next": "",
    }


# --- finding references --------------------------------------------------------------------


def test_whole_and_text_references_are_found_at_any_depth() -> None:
    kwargs = {
        "name": "$1",
        "query": "${2} (director of ${1})",
        "filters": [{"tag": "${3}"}, ["$4", 7, None]],
        "plain": "costs $5.50",
        "${9}": "keys are not read",
    }
    assert referenced_numbers(kwargs) == [1, 2, 3, 4]
    assert command_dependencies(command("t", **kwargs)) == [0, 1, 2, 3]


@pytest.mark.parametrize(
    "text", ["$", "$x", "$1x", " $1", "${x}", "${1", "$ {1}", "price: $1.50", "{1}", "$$"]
)
def test_strings_that_are_not_references(text: str) -> None:
    assert referenced_numbers({"value": text}) == []


def test_no_arguments_no_references() -> None:
    assert referenced_numbers({}) == []
    assert command_dependencies(command("t")) == []


# --- checking a plan's references ----------------------------------------------------------


def test_backward_references_are_fine() -> None:
    commands = [
        command("search_web", query="x"),
        command("get_org", name="$1"),
        command("get_bio", query="${2} of ${1}"),
    ]
    assert reference_problem(commands) == ""


def test_a_forward_reference_is_a_problem() -> None:
    problem = reference_problem([command("a", q="$2"), command("b", q="x")])
    assert problem.startswith("command 1 (a) refers to $2, a later command")


def test_a_self_reference_is_a_problem() -> None:
    problem = reference_problem([command("a", q="x"), command("b", q="see ${2}")])
    assert problem.startswith("command 2 (b) refers to $2, its own result")


@pytest.mark.parametrize("number", [0, 3, 12])
def test_a_reference_out_of_range_is_a_problem(number: int) -> None:
    problem = reference_problem([command("a", q="x"), command("b", q=f"${number}")])
    assert problem == (
        f"command 2 (b) refers to ${number}, but the plan's commands are numbered 1 to 2"
    )


def test_plan_problem_reports_bad_references() -> None:
    decision: PlanDecision = {
        "next_action": "execute",
        "execution_commands": [command("a", q="$2"), command("a", q="x")],
    }
    assert "a later command" in plan_problem(decision, lambda name: True)
    good: PlanDecision = {
        "next_action": "execute",
        "execution_commands": [command("a", q="x"), command("a", q="$1")],
    }
    assert plan_problem(good, lambda name: True) == ""


# --- resolving -----------------------------------------------------------------------------


def test_a_whole_reference_keeps_the_results_type() -> None:
    results = {1: {"name": "Lumen", "size": 3}, 2: 3, 3: "text", 4: None, 5: [1, 2]}
    kwargs = {"a": "$1", "b": "$2", "c": "$3", "d": "$4", "e": "$5"}
    assert resolve_references(kwargs, results) == {
        "a": {"name": "Lumen", "size": 3},
        "b": 3,
        "c": "text",
        "d": None,
        "e": [1, 2],
    }


def test_a_whole_reference_is_a_copy() -> None:
    results = {1: {"items": [1]}}
    resolved = resolve_references({"a": "$1"}, results)
    resolved["a"]["items"].append(2)
    assert results == {1: {"items": [1]}}


def test_text_references_are_replaced_by_the_results_text() -> None:
    results = {1: "Lumen Bay", 2: {"director": "Mara Okafor"}, 3: 42, 4: True}
    resolved = resolve_references(
        {"query": "${2} (director of ${1})", "n": "${3}", "flag": "is ${4}, ${1}"}, results
    )
    assert resolved == {
        "query": '{"director":"Mara Okafor"} (director of Lumen Bay)',
        "n": "42",
        "flag": "is true, Lumen Bay",
    }


def test_references_are_resolved_in_nested_values() -> None:
    results = {1: "a", 2: 7}
    value = {"outer": [{"inner": "$2"}, ["x ${1}", "$1"]], "keep": 1.5}
    assert resolve_references(value, results) == {
        "outer": [{"inner": 7}, ["x a", "a"]],
        "keep": 1.5,
    }


def test_a_missing_result_leaves_the_reference_as_written() -> None:
    assert resolve_references({"a": "$3", "b": "x ${3}"}, {1: "r"}) == {"a": "$3", "b": "x ${3}"}


def test_result_text() -> None:
    assert result_text("plain") == "plain"
    assert result_text({"é": [1, 2]}) == '{"é":[1,2]}'
    assert result_text(None) == "null"
    assert result_text(2.5) == "2.5"


# --- batches -------------------------------------------------------------------------------


def test_batches_without_dependencies_are_unchanged() -> None:
    assert assign_batches([True, True, False, True, True], None) == [0, 0, 1, 2, 2]
    assert assign_batches([True, True, True, False, True], 2) == [0, 0, 1, 2, 3]
    assert assign_batches([False, False], None) == [0, 1]
    assert assign_batches([], 3) == []


def test_a_call_waits_for_what_it_needs_and_the_others_do_not() -> None:
    # 0: independent, 1: needs 0, 2: independent, 3: needs 1
    assert assign_batches([True] * 4, None, [[], [0], [], [1]]) == [0, 1, 0, 2]
    assert assign_batches([True] * 4, 1, [[], [0], [], []]) == [0, 1, 2, 3]


def test_an_unsafe_call_with_dependencies_keeps_its_order() -> None:
    # 0: safe, 1: safe needing 0, 2: unsafe needing 0, 3: safe
    assert assign_batches([True, True, False, True], None, [[], [0], [0], []]) == [0, 1, 2, 3]
    # a safe call needing an unsafe one
    assert assign_batches([False, True, True], None, [[], [0], []]) == [0, 1, 1]


def test_waiting_for_a_later_call_is_refused() -> None:
    with pytest.raises(ValueError, match="earlier calls"):
        assign_batches([True, True], None, [[1], []])


# --- the plan prompt's reference example ---------------------------------------------------


def describe(name: str, read_only: bool = True, **properties: Any) -> dict[str, Any]:
    return {
        "name": name,
        "read_only": read_only,
        "args_schema": {"type": "object", "properties": properties, "required": list(properties)},
    }


def example_commands(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    text = reference_example(tools)
    assert text.startswith('"execution_commands": [')
    commands: list[dict[str, Any]] = json.loads("{" + text + "}")["execution_commands"]
    return commands


def test_the_reference_example_uses_real_tools_and_a_text_argument() -> None:
    tools = [
        describe("add", a={"type": "integer"}, b={"type": "integer"}),
        describe("search_web", query={"type": "string"}),
    ]
    first, second = example_commands(tools)
    assert first["tool_name"] == "add"
    assert first["tool_kwargs"] == {"a": 1, "b": 1}
    assert second["tool_name"] == "search_web"
    assert second["tool_kwargs"] == {"query": "${1}"}


def test_the_reference_example_may_use_one_tool_twice() -> None:
    commands = example_commands([describe("search_web", query={"type": "string"})])
    assert [c["tool_name"] for c in commands] == ["search_web"] * 2
    assert commands[1]["tool_kwargs"] == {"query": "${1}"}


def test_the_reference_example_without_a_text_argument_uses_a_whole_result() -> None:
    commands = example_commands([describe("add", a={"type": "integer"})])
    assert commands[1]["tool_kwargs"] == {"a": "$1"}


def test_the_reference_example_prefers_read_only_tools_and_skips_idempotency_keys() -> None:
    tools = [
        describe("send_note", read_only=False, text={"type": "string"}),
        describe("write_log", read_only=False, idempotency_key={"type": "string"}),
        describe("get_page", number={"type": "integer"}),
        describe("search_web", mode={"type": "string", "enum": ["fast"]}, query={"type": "string"}),
    ]
    first, second = example_commands(tools)
    assert (first["tool_name"], second["tool_name"]) == ("get_page", "search_web")
    assert second["tool_kwargs"] == {"mode": "fast", "query": "${1}"}
    only_key = example_commands([describe("write_log", idempotency_key={"type": "string"})])
    assert only_key[1]["tool_kwargs"] == {"idempotency_key": "$1"}


def test_the_reference_example_without_any_argument_is_generic() -> None:
    assert reference_example([describe("now")]) == GENERIC_REFERENCE_EXAMPLE
    assert reference_example([]) == GENERIC_REFERENCE_EXAMPLE


# --- loops ---------------------------------------------------------------------------------


def cmd(tool_name: str, **kwargs: Any) -> dict[str, Any]:
    return {
        "purpose": f"{tool_name} {sorted(kwargs)}",
        "tool_name": tool_name,
        "tool_kwargs": kwargs,
    }


Builder = Callable[[list[Any], list[Any]], tuple[Any, ScriptedChatModel]]


@pytest.fixture
def build(planning_for: Callable[..., dict[str, Any]]) -> Builder:
    """A loop of scripted models in the test's plan mode."""

    def loop(plans: list[Any], tools: list[Any]) -> tuple[Any, ScriptedChatModel]:
        planner = ScriptedChatModel(plans)
        answerer = ScriptedChatModel(["ok"], repeat_last=True)
        return create_tool_loop(
            planner, tools, models=ModelOptions(answer_model=answerer), **planning_for()
        ), planner

    return loop


class Calls(Timeline):
    """What tools received, and the order of their steps ("start x", "end x")."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def run(self, name: str, kwargs: dict[str, Any], *beside: str) -> None:
        """Record a call; run beside the calls named in `beside` (they meet), or a moment."""
        self.calls.append((name, kwargs))
        if beside:
            await self.meet(name, *beside)
        else:
            self.start(name)
            await asyncio.sleep(0.05)  # room for a call wrongly started beside it to show
        self.end(name)

    def done_before(self, first: str, second: str) -> bool:
        """Whether call `first` ended before call `second` started."""
        return self.before(f"end {first}", f"start {second}")


async def test_a_chain_of_references_gives_the_tools_resolved_values(
    run_loop: Any, build: Builder
) -> None:
    seen = Calls()

    @tool
    async def search_web(query: str) -> str:
        """Search the web."""
        await seen.run("search_web", {"query": query})
        return "Lumen Bay Transit Authority"

    @tool
    async def get_organization(name: str) -> dict[str, str]:
        """An organization's record."""
        await seen.run("get_organization", {"name": name})
        return {"name": name, "director": "Mara Okafor"}

    @tool
    async def get_biography(query: str) -> str:
        """A person's biography."""
        await seen.run("get_biography", {"query": query})
        return f"biography: {query}"

    plan = plan_reply(
        "execute",
        [
            cmd("search_web", query="who runs the ferries"),
            cmd("get_organization", name="$1"),
            cmd("get_biography", query="${2} (director of ${1})"),
        ],
    )
    graph, _ = build([plan, plan_reply("response")], [search_web, get_organization, get_biography])
    out = await run_loop(graph, {"user_input": "who directs the ferries?"})
    organization = {"name": "Lumen Bay Transit Authority", "director": "Mara Okafor"}
    text = json.dumps(organization, separators=(",", ":"))
    expected = [
        ("search_web", {"query": "who runs the ferries"}),
        ("get_organization", {"name": "Lumen Bay Transit Authority"}),
        ("get_biography", {"query": f"{text} (director of Lumen Bay Transit Authority)"}),
    ]
    assert seen.calls == expected
    assert [(r["tool_name"], r["kwargs"]) for r in out["tool_logs"]] == expected
    records = out["round_state"]["last_round_records"]
    assert [(r["tool_name"], r["kwargs"]) for r in records] == expected
    assert all(r["success"] for r in records)
    assert records[1]["result"] == organization
    assert seen.done_before("search_web", "get_organization")
    assert seen.done_before("get_organization", "get_biography")


async def test_independent_commands_run_in_parallel_while_a_referring_one_waits(
    run_loop: Any, build: Builder
) -> None:
    seen = Calls()

    @tool
    async def get_a(q: str) -> str:
        """A."""
        # runs until get_b has started: in parallel they meet however late the machine
        # starts get_b; one after the other they cannot
        await seen.run("get_a", {"q": q}, "get_b")
        return "from a"

    @tool
    async def get_b(q: str) -> str:
        """B."""
        await seen.run("get_b", {"q": q}, "get_a")
        return "from b"

    @tool
    async def get_c(q: str) -> str:
        """C."""
        await seen.run("get_c", {"q": q})
        return "from c"

    # the referring command is listed between the two independent ones
    plan = plan_reply(
        "execute", [cmd("get_a", q="x"), cmd("get_c", q="after ${1}"), cmd("get_b", q="y")]
    )
    graph, _ = build([plan, plan_reply("response")], [get_a, get_b, get_c])
    out = await run_loop(graph, {"user_input": "go"})
    seen.assert_met()
    assert seen.overlapped("get_a", "get_b")
    assert seen.done_before("get_a", "get_c")
    records = out["round_state"]["last_round_records"]
    assert [r["tool_name"] for r in records] == ["get_a", "get_c", "get_b"]  # command order
    assert records[1]["kwargs"] == {"q": "after from a"}


async def test_a_reference_to_a_failed_command_fails_without_running(
    run_loop: Any, build: Builder
) -> None:
    ran: list[str] = []

    @tool
    def search_web(query: str) -> str:
        """Always fails."""
        ran.append("search_web")
        raise ValueError("search service said no")

    @tool
    def get_organization(name: str) -> str:
        """Never reached."""
        ran.append("get_organization")
        return name

    @tool
    def get_biography(query: str) -> str:
        """Never reached either."""
        ran.append("get_biography")
        return query

    @tool
    def get_count(n: int) -> int:
        """Echo."""
        ran.append("get_count")
        return n

    plan = plan_reply(
        "execute",
        [
            cmd("search_web", query="ferries"),
            cmd("get_organization", name="$1"),
            cmd("get_biography", query="${2}"),
            cmd("get_count", n="many"),  # invalid arguments: settled before anything runs
            cmd("get_organization", name="count ${4}"),
        ],
    )
    tools = [search_web, get_organization, get_biography, get_count]
    graph, _ = build([plan, plan_reply("response")], tools)
    out = await run_loop(graph, {"user_input": "go"})
    assert ran == ["search_web"]
    search, organization, biography, count, by_count = out["round_state"]["last_round_records"]
    assert not search["success"]
    assert organization["error_type"] == "reference_failed"
    assert organization["error"].startswith(
        "get_organization was not run: its argument refers to $1 (search_web), which failed: "
    )
    assert "search service said no" in organization["error"]
    assert organization["kwargs"] == {"name": "$1"}
    assert organization["result"]["error"] == "reference_failed"
    assert biography["error_type"] == "reference_failed"
    assert biography["error"].startswith(
        "get_biography was not run: its argument refers to $2 (get_organization), which failed: "
        "get_organization was not run"
    )
    assert count["error_type"] == "invalid_arguments"
    assert by_count["error_type"] == "reference_failed"
    assert "refers to $4 (get_count), which failed: Invalid arguments" in by_count["error"]


async def test_a_forward_reference_makes_the_planner_plan_again(
    run_loop: Any, build: Builder
) -> None:
    ran: list[str] = []

    @tool
    def get_value(key: str) -> str:
        """A value."""
        ran.append(key)
        return f"value of {key}"

    bad = plan_reply("execute", [cmd("get_value", key="$2"), cmd("get_value", key="x")])
    good = plan_reply("execute", [cmd("get_value", key="x"), cmd("get_value", key="$1")])
    graph, planner = build([bad, good, plan_reply("response")], [get_value])
    out = await run_loop(graph, {"user_input": "go"})
    assert len(planner.requests) == 3
    reask = str(planner.requests[1][-1].content)
    assert "command 1 (get_value) refers to $2, a later command" in reask
    assert ran == ["x", "value of x"]  # only the second plan ran
    assert out["status"] == "ok"


async def test_a_forward_reference_is_a_plan_reasked_event(build: Builder) -> None:
    @tool
    def get_value(key: str) -> str:
        """A value."""
        return key

    bad = plan_reply("execute", [cmd("get_value", key="$1")])
    graph, _ = build([bad, plan_reply("response")], [get_value])
    events = [
        event
        async for event in graph.astream({"user_input": "go"}, stream_mode="custom")
        if event["type"] in ("plan_reasked", "tool_started")
    ]
    reason = (
        "command 1 (get_value) refers to $1, its own result; use only results of earlier commands"
    )
    assert [(e["type"], e.get("reason")) for e in events] == [("plan_reasked", reason)]


async def test_an_unsafe_tool_with_references_keeps_its_order(
    run_loop: Any, build: Builder
) -> None:
    seen = Calls()

    @tool
    async def get_a(q: str) -> str:
        """A."""
        await seen.run("get_a", {"q": q}, "get_b")
        return "from a"

    @tool
    async def get_b(q: str) -> str:
        """B."""
        await seen.run("get_b", {"q": q}, "get_a")
        return "from b"

    @tool
    async def send_note(text: str) -> str:
        """Side effect."""
        await seen.run("send_note", {"text": text})
        return "sent"

    @tool
    async def get_c(q: str) -> str:
        """C."""
        await seen.run("get_c", {"q": q})
        return "from c"

    plan = plan_reply(
        "execute",
        [
            cmd("get_a", q="x"),
            cmd("get_b", q="y"),
            cmd("send_note", text="note: ${1}"),
            cmd("get_c", q="$3"),
        ],
    )
    graph, _ = build([plan, plan_reply("response")], [get_a, get_b, send_note, get_c])
    out = await run_loop(graph, {"user_input": "go"})
    seen.assert_met()
    assert seen.overlapped("get_a", "get_b")
    assert seen.done_before("get_a", "send_note")
    assert seen.done_before("get_b", "send_note")  # after every call listed before it
    assert seen.done_before("send_note", "get_c")
    assert seen.calls[2:] == [("send_note", {"text": "note: from a"}), ("get_c", {"q": "sent"})]
    assert all(r["success"] for r in out["tool_logs"])


async def test_the_plan_prompt_teaches_references_with_the_loops_tools(
    run_loop: Any, build: Builder, plan_mode: str
) -> None:
    @tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return "sunny"

    graph, planner = build([plan_reply("response")], [get_weather])
    await run_loop(graph, {"user_input": "hi"})
    system = str(planner.requests[0][0].content)
    if plan_mode == "native":  # calls of one reply, numbered from 1; no JSON plan to show
        assert (
            '"$1" is the result\nof call 1 of the reply, "${1}" its text inside a string' in system
        )
        assert "execution_commands" not in system
    else:
        assert '"$1" is the whole result of command 1' in system
        assert (
            '"execution_commands": [{"tool_name": "get_weather", "tool_kwargs": {"city": "text '
            'from the request"}}, {"tool_name": "get_weather", "tool_kwargs": {"city": "${1}"}}]'
        ) in system


async def test_a_whole_reference_is_coerced_for_an_integer_parameter(
    run_loop: Any, build: Builder
) -> None:
    @tool
    def count_text(text: str) -> str:
        """A count, as text."""
        return "3"

    @tool
    def get_number(n: int) -> int:
        """A number."""
        return 4

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    plan = plan_reply(
        "execute",
        [
            cmd("count_text", text="abc"),
            cmd("get_number", n=1),
            cmd("add", a="$1", b="$2"),
            cmd("add", a="${1}", b=10),
        ],
    )
    graph, _ = build([plan, plan_reply("response")], [count_text, get_number, add])
    out = await run_loop(graph, {"user_input": "go"})
    records = out["round_state"]["last_round_records"]
    assert [(r["kwargs"], r["result"]) for r in records[2:]] == [
        ({"a": 3, "b": 4}, 7),
        ({"a": 3, "b": 10}, 13),
    ]
