"""A server with 2,000 tools: the planner is offered a bounded list, chosen by patterns.

Measured on this server: every plan request holds about 41,500 characters with the
default cap of 128 tools, against about 629,000 with all 2,000.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from third_party import cmd, own_server

from agentloop import ModelOptions, create_tool_loop
from agentloop.mcp import MCPToolset
from agentloop.testing import ScriptedChatModel, plan_reply

pytestmark = pytest.mark.integration

PROMPT_BOUND = 60_000
"""Characters a plan request may hold with the default cap (2,000 tools: ~629,000)."""
CAP_WARNING = "only the first 128, in config order, are offered to the planner"


def prompt_chars(request: list[Any]) -> int:
    return sum(len(str(message.content)) for message in request)


async def test_a_big_toolset_offers_the_planner_a_bounded_list(
    run_loop: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        caplog.at_level(logging.WARNING, logger="agentloop"),
        MCPToolset({"many": own_server("many_tools")}) as toolset,
    ):
        assert len(toolset.tools) == 128
        for question in ("find x", "find y"):  # two runs, one warning
            planner = ScriptedChatModel(
                [plan_reply("execute", [cmd("crm_0000", query="x")]), plan_reply("response")]
            )
            graph = create_tool_loop(
                planner, [toolset], models=ModelOptions(answer_model=ScriptedChatModel(["ok"]))
            )
            out = await run_loop(graph, {"user_input": question})
            (record,) = out["tool_logs"]
            assert record["success"], record
            for request in planner.requests:
                assert prompt_chars(request) < PROMPT_BOUND
                assert "crm_0000" in str(request[0].content)  # the tool list, in the rules
                assert "files_1999" not in str(request[0].content)  # beyond the cap
    warnings = [r for r in caplog.records if CAP_WARNING in r.getMessage()]
    assert len(warnings) == 1
    assert '"tools": {"include"' in warnings[0].getMessage()
    assert "max_tools" in warnings[0].getMessage()


def test_name_patterns_choose_the_tools(caplog: pytest.LogCaptureFixture) -> None:
    config = {
        "many": own_server(
            "many_tools",
            tools={"include": ["search_00*", "crm_0000"], "exclude": ["search_000*"]},
        )
    }
    with caplog.at_level(logging.WARNING, logger="agentloop"), MCPToolset(config) as toolset:
        names = [tool.name for tool in toolset.tools]
    expected = ["crm_0000"] + [f"search_{i:04d}" for i in range(10, 100) if i % 4 == 2]
    assert sorted(names) == sorted(expected)
    assert CAP_WARNING not in caplog.text


def test_the_cap_is_the_apps_to_choose() -> None:
    with MCPToolset({"many": own_server("many_tools", "300")}, max_tools=None) as toolset:
        assert len(toolset.tools) == 300
    with MCPToolset({"many": own_server("many_tools", "300")}, max_tools=10) as toolset:
        assert [tool.name for tool in toolset.tools] == [
            f"{('crm', 'billing', 'search', 'files')[i % 4]}_{i:04d}" for i in range(10)
        ]
