"""Entry point of `python -m bench`."""

from bench.run import main

raise SystemExit(main())
