"""A server that exits at once, saying why on stderr (argv[1]), like a missing setting."""

from __future__ import annotations

import sys

if __name__ == "__main__":
    print("starting up", file=sys.stderr)
    print(sys.argv[1], file=sys.stderr, flush=True)
    sys.exit(2)
