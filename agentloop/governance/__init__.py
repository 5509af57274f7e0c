"""The governance of a tool call: what a tool is, and the layers each call goes through.

- a tool compiled once: `spec`, `registry`, `catalog` (the tools now, MCP toolsets
  included), `policy` (read-only or not, timeouts, retries), `injected`, `artifacts`,
  `call_config`, `call_id` (a call's typed identity);
- its arguments (`arguments/`: schema, names, coercion, validation), the planner's own
  arguments where redaction changed them (`planned_arguments`, `redacted`);
- the layers, composed once when the loop is built: `app_layers` (the app's
  `wrap_tool_call` middleware, outermost), `layers` (judge, fallback, bound,
  cache, rate limit), `freshness` (read after write), `cache` and `cache_scope`,
  `invoke` (timeouts and retries), `threads` (the sync tools' pool), `processes`
  (ending a timed-out call's children), `output` and `results/` (bounding what a tool
  returned), `whole_results` (the whole values of cut results, for references);
- the outcome: `outcome`, `judge`, `records`, `late` (late outcomes), `deferred` (calls
  completed from referenced results), `pipeline` (one call from command to record).

A layer sees one call. May import: `agentloop.planning` and every part below it
(`state`, `models`, `durability`, `observability`, `base`, `errors`).
"""
