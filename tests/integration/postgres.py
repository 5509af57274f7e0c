"""The PostgreSQL server of the integration tests (AGENTLOOP_TEST_POSTGRES_DSN)."""

from __future__ import annotations

import os

import pytest

POSTGRES_DSN = os.environ.get("AGENTLOOP_TEST_POSTGRES_DSN", "")


def postgres_dsn() -> str:
    """The DSN, after checking the server answers; skip (fail on CI) when it does not."""
    reason = ""
    if not POSTGRES_DSN:
        reason = "AGENTLOOP_TEST_POSTGRES_DSN is not set (.ci/run sets it when PostgreSQL runs)"
    else:
        try:
            import psycopg

            with psycopg.connect(POSTGRES_DSN, connect_timeout=5):
                pass
        except Exception as error:  # the reason is shown in the skip message
            reason = f"PostgreSQL at AGENTLOOP_TEST_POSTGRES_DSN is not reachable: {error}"
    if reason:
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return POSTGRES_DSN
