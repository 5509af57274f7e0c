"""The loop's nodes and routers, side by side; `agentloop.graph` wires them."""

from __future__ import annotations

from agentloop.nodes._runnable import LoopNode, Router
from agentloop.nodes.answer import make_answer, to_action_results
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
