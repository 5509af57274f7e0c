"""What a run shows of itself: events, redaction, the audit log, tables and pictures.

- `events`: every progress event, declared once (`_event_base` holds their base, the
  registry and the emitters);
- `redaction`: secrets out of records, events, checkpoints and log lines;
- `audit`: `AuditLog`, a `wrap_tool_call` middleware that remembers every call;
- `display`: a finished run as a table (`RunReport`), in Jupyter and terminals;
- `diagram`: a compiled graph as a picture, drawn offline (`show_graph`).

May import: `agentloop.base`, `agentloop.errors`.
"""
