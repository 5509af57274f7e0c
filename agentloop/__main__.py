"""`python -m agentloop`: the `agentloop` command."""

from __future__ import annotations

from agentloop.cli import main

__all__: list[str] = []

if __name__ == "__main__":
    raise SystemExit(main())
