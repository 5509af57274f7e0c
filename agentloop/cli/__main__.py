"""`python -m agentloop.cli`."""

from agentloop.cli import main

raise SystemExit(main())
