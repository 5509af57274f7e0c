"""MCP by the spec, against real servers: annotations, sessions, failures, tool lists.

Third-party servers (mcp-server-git, mcp-server-time) and this suite's small ones
(`servers/`), each a real process.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from processes import child_pids
from third_party import (
    cmd,
    git_server,
    make_repo,
    own_server,
    prompt_tools,
    time_server,
)

from agentloop import ModelOptions, create_tool_loop
from agentloop.errors import MCPTransportError
from agentloop.governance.policy import resolve_policy
from agentloop.mcp import MCPToolset
from agentloop.testing import ScriptedChatModel, plan_reply, planning_round

pytestmark = pytest.mark.integration


def loop_with(
    toolset: MCPToolset, *plans: Any, answer: str = "done", **options: Any
) -> tuple[Any, ScriptedChatModel]:
    planner = ScriptedChatModel([*plans, plan_reply("response")])
    graph = create_tool_loop(
        planner, [toolset], models=ModelOptions(answer_model=ScriptedChatModel([answer])), **options
    )
    return graph, planner


async def wait_for(condition: Any, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the condition did not come true in time"
        await asyncio.sleep(0.05)


# -- annotations -------------------------------------------------------------------------------


def test_policies_follow_the_spec_defaults(tmp_path: Path) -> None:
    with MCPToolset(
        {"git": git_server(), "time": time_server(), "plain": own_server("plain")}
    ) as toolset:
        tools = {tool.name: tool for tool in toolset.tools}
        git_log = resolve_policy(tools["git_log"])
        assert git_log.read_only and git_log.concurrency_safe and git_log.idempotent
        # readOnlyHint, destructiveHint, idempotentHint all false
        commit = resolve_policy(tools["git_commit"])
        assert not commit.read_only and not commit.concurrency_safe and not commit.idempotent
        # idempotentHint true: the planner is told, the loop still never repeats it
        add = resolve_policy(tools["git_add"])
        assert add.repeat_safe and not add.idempotent and not add.concurrency_safe
        # no annotations at all: not read-only, so it runs alone and is never repeated
        toggle = resolve_policy(tools["toggle"])
        assert "readOnlyHint" not in (tools["toggle"].metadata or {})
        assert not toggle.read_only and not toggle.concurrency_safe and not toggle.idempotent
        assert resolve_policy(tools["get_current_time"]).read_only


async def test_a_commit_runs_alone_and_in_order(tmp_path: Path, run_loop: Any) -> None:
    repo = str(make_repo(tmp_path / "repo"))
    with MCPToolset({"git": git_server()}) as toolset:
        graph, planner = loop_with(
            toolset,
            plan_reply(
                "execute",
                [
                    cmd("git_add", repo_path=repo, files=["a.txt"]),
                    cmd("git_commit", repo_path=repo, message="first commit"),
                    cmd("git_log", repo_path=repo, max_count=5),
                ],
            ),
        )
        out = await run_loop(graph, {"user_input": "commit a.txt and show the log"})
    add, commit, log = out["tool_logs"]
    assert add["success"] and commit["success"] and log["success"], out["tool_logs"]
    assert "first commit" in log["result"]
    listed = prompt_tools(planner.requests[0])
    assert listed["git_commit"]["side_effects"] is True
    assert listed["git_commit"]["idempotent"] is False
    assert listed["git_add"]["idempotent"] is True
    assert listed["git_log"]["side_effects"] is False


async def test_a_tool_with_side_effects_is_never_dropped_as_a_duplicate(run_loop: Any) -> None:
    with MCPToolset({"plain": own_server("plain")}) as toolset:
        graph, _ = loop_with(
            toolset,
            plan_reply("execute", [cmd("toggle"), cmd("toggle")]),
            plan_reply("execute", [cmd("toggle")]),
        )
        out = await run_loop(graph, {"user_input": "toggle thrice"})
    assert [r["result"] for r in out["tool_logs"]] == [1, 2, 3]
    assert not any(r.get("duplicate") for r in out["tool_logs"])


async def test_a_write_is_not_retried_after_its_server_died(tmp_path: Path) -> None:
    marker = tmp_path / "explode.log"
    with MCPToolset({"plain": own_server("plain")}) as toolset:
        graph, _ = loop_with(
            toolset, plan_reply("execute", [cmd("explode", marker_file=str(marker))])
        )
        out = await graph.ainvoke({"user_input": "explode"})
    (record,) = out["tool_logs"]
    assert record["success"] is False and record["attempts"] == 1
    assert marker.read_text().splitlines() == ["called"]


async def test_a_read_only_tool_is_retried_on_a_fresh_session(tmp_path: Path) -> None:
    counter = tmp_path / "calls"
    with MCPToolset({"flaky": own_server("flaky_reader", str(counter))}) as toolset:
        graph, _ = loop_with(toolset, plan_reply("execute", [cmd("lookup", key="k")]))
        out = await graph.ainvoke({"user_input": "look k up"})
        assert toolset.sessions_opened() == {"flaky": 2}
    (record,) = out["tool_logs"]
    assert record["success"] and record["result"] == "value of k"
    assert record["attempts"] == 2


async def test_server_config_policies_win_over_annotations(tmp_path: Path) -> None:
    config = {"plain": own_server("plain", policies={"peek": {"read_only": True}})}
    with MCPToolset(config) as toolset:
        tools = {tool.name: tool for tool in toolset.tools}
        assert resolve_policy(tools["peek"]).concurrency_safe
        assert not resolve_policy(tools["toggle"]).concurrency_safe


# -- sessions ----------------------------------------------------------------------------------


async def test_runs_and_threads_share_one_session_per_server(run_loop: Any) -> None:
    with MCPToolset({"time": time_server()}) as toolset:
        tools = toolset.tools  # listed once, on the session the runs then share
        assert {tool.name for tool in tools} >= {"get_current_time", "convert_time"}

        def plan(messages: Any) -> Any:
            if planning_round(messages) != 0:
                return plan_reply("response")
            return plan_reply("execute", [cmd("get_current_time", timezone="UTC")])

        planner = ScriptedChatModel(responder=plan)
        graph = create_tool_loop(
            planner,
            [toolset],
            models=ModelOptions(answer_model=ScriptedChatModel(repeat_last=True, replies=["ok"])),
        )
        first = await run_loop(graph, {"user_input": "time?"}, {"configurable": {"thread_id": "a"}})
        assert first["tool_logs"][0]["success"], first["tool_logs"]
        pids = child_pids("mcp-server-time")
        assert len(pids) == 1
        # a second run, and then three concurrent runs on other threads: no new process
        await run_loop(graph, {"user_input": "time again?"}, {"configurable": {"thread_id": "b"}})
        outs = await asyncio.gather(
            *(
                graph.ainvoke(
                    {"user_input": f"time {n}?"}, {"configurable": {"thread_id": f"t{n}"}}
                )
                for n in range(3)
            )
        )
        assert all(out["tool_logs"][0]["success"] for out in outs)
        assert toolset.sessions_opened() == {"time": 1}
        assert child_pids("mcp-server-time") == pids
    await wait_for(lambda: not child_pids("mcp-server-time"))


async def test_a_run_scoped_server_gets_a_session_per_run(run_loop: Any) -> None:
    for scope, second in (("toolset", 2), ("run", 1)):
        with MCPToolset({"plain": own_server("plain", scope=scope)}) as toolset:
            planner = ScriptedChatModel(
                [
                    plan_reply("execute", [cmd("toggle")]),
                    plan_reply("response"),
                    plan_reply("execute", [cmd("toggle")]),
                    plan_reply("response"),
                ]
            )
            graph = create_tool_loop(
                planner, [toolset], models=ModelOptions(answer_model=ScriptedChatModel(["a", "b"]))
            )
            await run_loop(graph, {"user_input": "flip"})
            out = await run_loop(graph, {"user_input": "flip again"})
            assert out["tool_logs"][0]["result"] == second, scope
            await wait_for(lambda: toolset.open_runs == [])


def test_closing_the_toolset_stops_its_processes() -> None:
    toolset = MCPToolset({"time": time_server()})
    assert toolset.tools
    assert len(child_pids("mcp-server-time")) == 1
    toolset.close()
    toolset.close()  # twice is fine
    deadline = time.monotonic() + 10
    while child_pids("mcp-server-time") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert child_pids("mcp-server-time") == []
    with pytest.raises(RuntimeError, match="closed"):
        asyncio.run(toolset.call("time", "get_current_time", {"timezone": "UTC"}))


async def test_async_with_closes_the_toolset() -> None:
    async with MCPToolset({"time": time_server()}) as toolset:
        assert toolset.tools
        assert child_pids("mcp-server-time")
    await wait_for(lambda: not child_pids("mcp-server-time"))


# -- a server that fails -----------------------------------------------------------------------


async def test_a_server_that_fails_at_build_is_left_out_then_tried_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, run_loop: Any
) -> None:
    flag = tmp_path / "ready"
    config = {"late": own_server("wakes_late", str(flag)), "time": time_server()}
    with MCPToolset(config, retry_interval_s=0.2) as toolset:
        planner = ScriptedChatModel(
            [
                plan_reply("execute", [cmd("late_answer")]),
                plan_reply("response"),
                plan_reply("execute", [cmd("late_answer")]),
                plan_reply("response"),
            ]
        )
        with caplog.at_level(logging.INFO, logger="agentloop"):
            graph = create_tool_loop(
                planner, [toolset], models=ModelOptions(answer_model=ScriptedChatModel(["a", "b"]))
            )
        assert "late" in toolset.unavailable
        assert "MCP server 'late' is unavailable" in caplog.text
        assert "the database is not there yet" in caplog.text  # its stderr, in its logger
        events: list[dict[str, Any]] = []
        async for mode, chunk in graph.astream(
            {"user_input": "late?"}, stream_mode=["custom", "values"]
        ):
            if mode == "custom":
                events.append(chunk)
            else:
                out = chunk
        (unavailable,) = [e for e in events if e["type"] == "mcp_server_unavailable"]
        assert unavailable["server"] == "late" and "could not be started" in unavailable["reason"]
        # a plan naming no available tool goes back to the planner, which then responds
        (reask,) = [e for e in events if e["type"] == "plan_reasked"]
        assert "unknown: late_answer" in reask["reason"]
        assert out["tool_logs"] == [] and out["status"] == "ok"
        assert "late_answer" not in prompt_tools(planner.requests[0])

        flag.touch()
        await wait_for(lambda: not toolset.unavailable)
        out = await run_loop(graph, {"user_input": "late now?"})
        assert out["tool_logs"][0]["result"] == "finally here", out["tool_logs"]
        assert "late_answer" in prompt_tools(planner.requests[-2])


def test_a_required_server_that_fails_stops_the_build(tmp_path: Path) -> None:
    config = {"late": own_server("wakes_late", str(tmp_path / "never"), required=True)}
    with pytest.raises(MCPTransportError, match="could not be started"):
        create_tool_loop(ScriptedChatModel([]), [MCPToolset(config)])


async def test_a_server_killed_between_calls_is_restarted(tmp_path: Path) -> None:
    counter = tmp_path / "calls"
    counter.write_text("1")  # the flaky server no longer dies on its own
    with MCPToolset({"flaky": own_server("flaky_reader", str(counter))}) as toolset:
        graph, _ = loop_with(
            toolset,
            plan_reply("execute", [cmd("lookup", key="a")]),
            plan_reply("execute", [cmd("lookup", key="b")]),
        )
        (pid,) = child_pids("flaky_reader.py")
        os.kill(pid, signal.SIGKILL)
        out = await graph.ainvoke({"user_input": "a and b"})
        assert [r["result"] for r in out["tool_logs"]] == ["value of a", "value of b"]
        assert toolset.sessions_opened() == {"flaky": 2}


# -- tool lists and logs -----------------------------------------------------------------------


async def test_a_tool_added_during_a_run_is_offered_in_its_next_round(run_loop: Any) -> None:
    with MCPToolset({"dynamic": own_server("dynamic")}) as toolset:
        planner = ScriptedChatModel(
            [
                plan_reply("execute", [cmd("unlock_slowly")]),
                plan_reply("execute", [cmd("secret")]),
                plan_reply("response"),
            ]
        )
        graph = create_tool_loop(
            planner, [toolset], models=ModelOptions(answer_model=ScriptedChatModel(["a"]))
        )
        out = await run_loop(graph, {"user_input": "unlock, then the secret"})
    assert "secret" not in prompt_tools(planner.requests[0])
    assert "secret" in prompt_tools(planner.requests[1])
    assert [r["result"] for r in out["tool_logs"]] == ["unlocked", "opened sesame"]


async def test_the_tool_list_is_refreshed_on_list_changed(
    caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    with MCPToolset({"dynamic": own_server("dynamic")}) as toolset:
        planner = ScriptedChatModel(
            [
                plan_reply("execute", [cmd("unlock"), cmd("shout", text="hi")]),
                plan_reply("response"),
                plan_reply("execute", [cmd("secret")]),
                plan_reply("response"),
            ]
        )
        with caplog.at_level(logging.INFO, logger="agentloop.mcp.server"):
            graph = create_tool_loop(
                planner, [toolset], models=ModelOptions(answer_model=ScriptedChatModel(["a", "b"]))
            )
            version = toolset.version
            first = await graph.ainvoke({"user_input": "unlock"})
            assert first["tool_logs"][1]["result"] == "HI"
            await wait_for(lambda: toolset.version > version)
            second = await graph.ainvoke({"user_input": "the secret?"})
    assert second["tool_logs"][0]["result"] == "opened sesame"
    assert "secret" not in prompt_tools(planner.requests[0])
    assert "secret" in prompt_tools(planner.requests[2])
    # the server's stderr went to its logger, not to the terminal
    logged = [r for r in caplog.records if r.name == "agentloop.mcp.server.dynamic"]
    assert any("shouting 'hi'" in r.getMessage() for r in logged)
    assert "shouting" not in capfd.readouterr().err
