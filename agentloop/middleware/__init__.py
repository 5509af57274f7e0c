"""LangChain's middleware protocol in a tool loop, and the transcript it reads and edits.

- `stack`: the app's middleware and the loop's own as one stack (`LoopMiddleware`):
  `wrap_model_call` around every model request, `wrap_tool_call` around every tool call;
- `hooks`: `before_agent` / `before_model` / `after_model` / `after_agent`, run as
  `create_agent` runs them, their updates applied as a node's are;
- `transcript`: the run's `messages` as `create_agent` keeps them (each plan an
  `AIMessage` with `tool_calls`, each outcome a `ToolMessage`).

May import: `agentloop.settings`, `agentloop.options`, `agentloop.governance`, and
every part below them.
"""
