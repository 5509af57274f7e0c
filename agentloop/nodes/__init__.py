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
