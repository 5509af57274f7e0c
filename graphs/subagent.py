"""A loop that delegates to a sub-agent loop, for LangGraph Studio.

The coordinator's planner hands the research to `ask_researcher`, the key-free demo loop
(bundled MCP servers, rule-based planner) offered as a tool; the sub-agent's progress shows
up in the coordinator's stream as `agent_*` events.
"""

from agentloop import as_tool, create_tool_loop
from agentloop.demo import DEMO_QUESTION, build_demo_loop
from agentloop.testing import ScriptedChatModel, plan_reply

researcher = as_tool(
    build_demo_loop(name="researcher"),
    name="ask_researcher",
    description="Researches a question with documents, a calculator and notes.",
)


def _coordinator_plan(messages: list) -> str:  # type: ignore[type-arg]
    first_round = "round_index: 0" in str(messages[-1].content)
    if not first_round:
        return str(plan_reply("response"))
    command = {
        "purpose": "Delegate the research",
        "tool_name": "ask_researcher",
        "tool_kwargs": {"user_input": DEMO_QUESTION},
        "todo_suggestion": "Answer with the researcher's findings.",
    }
    return str(plan_reply("execute", [command]))


graph = create_tool_loop(
    ScriptedChatModel(responder=_coordinator_plan),
    [researcher],
    answer_model=ScriptedChatModel(
        responder=lambda messages: "The researcher reports:\n" + str(messages[-1].content)[-600:]
    ),
    name="coordinator",
)
