"""A loop that delegates to a sub-agent loop, for LangGraph Studio.

The coordinator's planner hands the user's question to `ask_researcher`, the key-free
demo loop (bundled MCP servers, rule-based planner) offered as a tool; the sub-agent's
progress shows up in the coordinator's stream as `agent_*` events, and the
coordinator's answer is the researcher's answer.
"""

import json

from langchain_core.messages import BaseMessage

from agentloop import ModelOptions, as_tool, create_tool_loop
from agentloop.base.messages import message_text
from agentloop.cli.demo import DEMO_QUESTION, build_demo_loop
from agentloop.testing import ScriptedChatModel, plan_reply

PURPOSE = "Delegate the research"

researcher = as_tool(
    build_demo_loop(name="researcher"),
    name="ask_researcher",
    description="Researches a question with documents, a calculator and notes.",
)


def _section(text: str, tag: str) -> str:
    """The text between a prompt's `<tag>` and `</tag>` ("" when absent)."""
    end = text.find(f"</{tag}>")
    start = text.rfind(f"<{tag}>", 0, end)
    return text[start + len(tag) + 2 : end].strip() if 0 <= start < end else ""


def _json(text: str, default: object) -> object:
    for candidate in (text, text.rsplit("\n", 1)[-1]):
        try:
            return json.loads(candidate)
        except json.JSONDecodeError:
            continue
    return default


def _coordinator_plan(messages: list[BaseMessage]) -> str:
    request = message_text(messages[-1])
    if "round_index: 0" not in request:
        return str(plan_reply("response"))
    question = _json(_section(request, "user_input"), "")
    command = {
        "purpose": PURPOSE,
        "tool_name": "ask_researcher",
        "tool_kwargs": {"user_input": str(question or DEMO_QUESTION)},
        "todo_suggestion": "Answer with the researcher's findings.",
    }
    return str(plan_reply("execute", [command]))


def _coordinator_answer(messages: list[BaseMessage]) -> str:
    """The researcher's answer, as the tool result the answer prompt holds."""
    results = _json(_section(message_text(messages[-1]), "action_results"), {})
    found = results.get(PURPOSE) if isinstance(results, dict) else None
    if isinstance(found, str) and found:
        return found
    return f"The researcher could not answer: {json.dumps(found, ensure_ascii=False)}"


graph = create_tool_loop(
    ScriptedChatModel(responder=_coordinator_plan),
    [researcher],
    models=ModelOptions(answer_model=ScriptedChatModel(responder=_coordinator_answer)),
    name="coordinator",
)
