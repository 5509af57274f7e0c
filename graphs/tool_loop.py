"""The tool loop served by `langgraph dev` / LangGraph Studio.

With `AGENTLOOP_MODEL` set (e.g. `openai:gpt-4.1-mini`) the loop plans and answers with
that model; otherwise it runs the key-free demo (rule-based planner, local tools). A run
can also pick a model in Studio's context form (`model`).
"""

import os

from agentloop import create_tool_loop
from agentloop.cli.demo import build_demo_loop, demo_tools

_model = os.environ.get("AGENTLOOP_MODEL", "").strip()

graph = (
    create_tool_loop(_model, demo_tools(), name="tool_loop")
    if _model
    else build_demo_loop(name="tool_loop")
)
