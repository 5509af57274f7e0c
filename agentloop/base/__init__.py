"""The bottom floor: shapes and helpers every part of the loop shares.

- `call_shapes`: the shapes one tool call takes (`ToolCommand`, `PreparedCall`,
  `ToolExecutionRecord`, the call statuses);
- `messages`: reading LangChain messages (their text, the request a run answers);
- `sync`: running coroutines from sync code, blocking work off the event loop;
- `retry`: tenacity retries that cost nothing on the happy path;
- `jsonable`: whatever a tool returned, as plain JSON data;
- `checkpoint_safe`: values every LangGraph checkpoint serializer accepts.

May import: `agentloop.errors` and third-party packages, nothing else of agentloop.
"""
