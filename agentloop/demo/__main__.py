"""`python -m agentloop.demo [question]`."""

from agentloop.demo import main

raise SystemExit(main())
