"""What a server's tools promise, held to the spec against a server written on the wire alone.

`servers/contract.py` uses no SDK: it sends what a server of either protocol revision may
send, a broken result too. A result that breaks its tool's `outputSchema` fails the call
with the schema error; the planner sees each tool's title; the client declares only the
capabilities the loop serves; and on a 2026-07-28 server (mcp 2.x), a call that asks for
input mid-call (multi-round requests) reaches the interrupt or the elicitation handler as
an elicitation does, and the call then ends with the answer.
"""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from third_party import cmd, own_server, prompt_tools

from agentloop import ModelOptions, create_tool_loop
from agentloop.mcp import ELICITATION_INTERRUPT, MCPToolset
from agentloop.mcp.sdk import MCP_MAJOR
from agentloop.testing import ScriptedChatModel, plan_reply

pytestmark = pytest.mark.integration


def loop_with(toolset: MCPToolset, *plans: Any, **options: Any) -> tuple[Any, ScriptedChatModel]:
    planner = ScriptedChatModel([*plans, plan_reply("response")])
    answer = ModelOptions(answer_model=ScriptedChatModel(["done"]))
    return create_tool_loop(planner, [toolset], models=answer, **options), planner


async def test_a_result_that_breaks_its_output_schema_fails_with_the_schema_error(
    run_loop: Any,
) -> None:
    with MCPToolset({"contract": own_server("contract")}) as toolset:
        plan = [cmd("weather"), cmd("broken_weather"), cmd("unstructured_weather")]
        graph, _ = loop_with(toolset, plan_reply("execute", plan))
        out = await run_loop(graph, {"user_input": "the weather"})
    good, broken, unstructured = out["tool_logs"]
    assert good["success"] and good["result"] == {"temperature": 21.5, "sky": "clear"}
    assert not broken["success"]
    assert "Invalid structured content returned by tool broken_weather" in broken["error"]
    assert "'warm' is not of type 'number'" in broken["error"]
    assert not unstructured["success"]
    assert "has an output schema but did not return structured content" in unstructured["error"]


async def test_the_planner_sees_each_tools_title(run_loop: Any) -> None:
    with MCPToolset({"contract": own_server("contract")}) as toolset:
        graph, planner = loop_with(toolset)
        await run_loop(graph, {"user_input": "which tools?"})
    listed = prompt_tools(planner.requests[0])
    assert listed["weather"]["title"] == "Weather Report"  # its title wins over the annotation's
    assert listed["forecast"]["title"] == "Forecast Desk"  # the annotation's, where it has none
    assert "title" not in listed["declared"]


@pytest.mark.parametrize("modern", [False, True], ids=["2025-11-25", "2026-07-28"])
async def test_the_client_declares_only_what_the_loop_serves(
    run_loop: Any, modern: bool, tmp_path: Any
) -> None:
    if modern and MCP_MAJOR < 2:
        pytest.skip("protocol 2026-07-28 needs mcp 2.x")
    args = ["--modern"] if modern else []
    served = own_server("contract", *args, roots=[str(tmp_path)])
    with MCPToolset({"served": served}) as toolset:
        graph, _ = loop_with(toolset, plan_reply("execute", [cmd("declared")]))
        out = await run_loop(graph, {"user_input": "what did the client declare?"})
        served_declares = out["tool_logs"][0]["result"]
    with MCPToolset({"quiet": own_server("contract", *args, elicitation=False)}) as toolset:
        quiet_declares = await toolset.call("quiet", "declared", {})
    # roots are fixed (never `listChanged`); sampling only with "sampling": true
    assert served_declares.get("roots") == {}
    assert "sampling" not in served_declares
    assert set(served_declares["elicitation"]) == {"form", "url"}
    assert "elicitation" not in quiet_declares and "roots" not in quiet_declares


async def test_a_result_the_protocol_does_not_allow_is_the_servers_failure(
    run_loop: Any,
) -> None:
    with MCPToolset({"contract": own_server("contract")}) as toolset:
        graph, _ = loop_with(toolset, plan_reply("execute", [cmd("malformed")]))
        out = await run_loop(graph, {"user_input": "-"})
    (record,) = out["tool_logs"]
    assert not record["success"]
    assert (
        "answered a call to 'malformed' with a result the protocol does not allow"
        in (record["error"])
    )
    assert record["result"]["error"] != "invalid_arguments"  # not the planner's mistake


needs_2026 = pytest.mark.skipif(MCP_MAJOR < 2, reason="multi-round requests need mcp 2.x")


@needs_2026
async def test_a_2026_result_that_names_no_result_type_is_complete(run_loop: Any) -> None:
    with MCPToolset({"contract": own_server("contract", "--modern")}) as toolset:
        graph, _ = loop_with(toolset, plan_reply("execute", [cmd("bare")]))
        out = await run_loop(graph, {"user_input": "-"})
    (record,) = out["tool_logs"]
    assert record["success"] and record["result"] == "bare", record


@needs_2026
async def test_input_asked_for_mid_call_reaches_the_interrupt(run_loop: Any) -> None:
    with MCPToolset({"contract": own_server("contract", "--modern")}) as toolset:
        graph, _ = loop_with(
            toolset, plan_reply("execute", [cmd("confirm")]), checkpointer=InMemorySaver()
        )
        thread = {"configurable": {"thread_id": "asks"}}
        paused = await run_loop(graph, {"user_input": "confirm it"}, thread)
        (question,) = paused["__interrupt__"]
        assert question.value["type"] == ELICITATION_INTERRUPT
        assert question.value["message"] == "Go ahead?" and question.value["tool"] == "confirm"
        out = await run_loop(graph, Command(resume={"action": "accept", "content": {}}), thread)
    (record,) = out["tool_logs"]
    assert record["success"], record
    assert record["result"] == 'confirmed: accept {"sure": true}'  # the schema's default filled in


@needs_2026
async def test_input_asked_for_mid_call_reaches_the_elicitation_handler(run_loop: Any) -> None:
    asked: list[dict[str, Any]] = []

    def handler(request: dict[str, Any]) -> dict[str, Any]:
        asked.append(request)
        return {"action": "decline"}

    config = {"contract": own_server("contract", "--modern")}
    with MCPToolset(config, elicitation_handler=handler) as toolset:
        graph, _ = loop_with(toolset, plan_reply("execute", [cmd("confirm")]))
        out = await run_loop(graph, {"user_input": "confirm it"})
    (record,) = out["tool_logs"]
    assert record["result"] == "confirmed: decline null"
    assert [request["message"] for request in asked] == ["Go ahead?"]
