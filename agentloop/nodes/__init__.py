"""The loop's nodes and routers; `agentloop.graph` wires them.

- `plan` (`plan_call`, `plan_model`): ask the planner, read its decision as it streams;
- `prepare` / `preparation`, `execute`: a round's calls, resolved, ordered and sent;
- `call_tool` (`guarded`): one call through the governance layers and the ledger;
- `answer` (`answer_call`, `structured`): the reply, with the results injected;
- `routes`: where a run goes next, a pure function of state;
- `accelerate`: streaming dispatch, the speculative answer, a native reply adopted;
- `parts` / `reads`: what every node of one compiled loop shares; `updates`: the update
  each node returns; `_runnable`: nodes as LangGraph runnables.

May import: `agentloop.middleware`, `agentloop.mcp`, and every part below them.
"""

from __future__ import annotations

from agentloop.nodes._runnable import LoopNode, Router
from agentloop.nodes.answer import make_answer
from agentloop.nodes.answer_call import to_action_results
from agentloop.nodes.call_tool import make_call_tool
from agentloop.nodes.execute import CALL_NODE, make_execute
from agentloop.nodes.parts import LoopParts
from agentloop.nodes.plan import make_plan
from agentloop.nodes.prepare import make_prepare
from agentloop.nodes.routes import route_entry, route_execute, route_plan, route_start

__all__ = [
    "CALL_NODE",
    "LoopNode",
    "LoopParts",
    "Router",
    "make_answer",
    "make_call_tool",
    "make_execute",
    "make_plan",
    "make_prepare",
    "route_execute",
    "route_plan",
    "route_entry",
    "route_start",
    "to_action_results",
]
