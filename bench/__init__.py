"""Benchmarks of agentloop against LangChain's prebuilt agents.

Run from the repository root with `python -m bench` (or `python bench/run.py`);
`--quick` runs a smaller smoke version. See `bench/README.md`.
"""
