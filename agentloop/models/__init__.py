"""Chat models: choosing them, calling them, streaming them, counting what they cost.

- `resolve`: a model object or a `provider:name` string, chosen per run;
- `calls`: one model call with its retries, fallbacks and limits (`ModelRetryPolicy`);
- `stream`: a model's reply as it streams, within `ModelLimits`;
- `usage`: token usage and cost, per agent.

May import: `agentloop.base`, `agentloop.errors`.
"""
