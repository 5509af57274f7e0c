"""The governance pipeline of a tool call, one module per stage."""
