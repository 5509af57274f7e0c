"""How the command judges a model failure: by the error's type, status and the failing model."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.exceptions import ModelAuthenticationError, ModelNotFoundError

from agentloop.cli.failures import ModelFailures, describe_model_error


class StatusError(Exception):
    def __init__(self, status_code: int, body: Any = None) -> None:
        super().__init__(f"Error code: {status_code} - {body}")
        self.status_code = status_code
        self.body = body


@pytest.mark.parametrize(
    ("error", "transient", "needle"),
    [
        (ModelAuthenticationError("bad key"), False, "rejected the credentials"),
        (StatusError(403, {"error": {"message": "no access"}}), False, "(HTTP 403: no access)"),
        (ModelNotFoundError("no such model"), False, "no such model"),
        (StatusError(400, {"message": "bad field"}), False, "(HTTP 400: bad field)"),
        (StatusError(429, {"error": {"message": "slow down"}}), True, "rate limited"),
        (ConnectionRefusedError("refused"), True, "cannot be reached (refused)"),
        (StatusError(503), True, "the model failed (HTTP 503"),
        (ValueError("odd"), False, "the model failed (odd)"),
    ],
)
def test_errors_are_judged_by_type_and_status(
    error: BaseException, transient: bool, needle: str
) -> None:
    judged, line = describe_model_error(error)
    assert judged is transient
    assert needle in line
    assert "\n" not in line


def test_the_failing_model_s_own_errors_decide() -> None:
    failures = ModelFailures()
    failures.on_llm_error(StatusError(429), tags=["agentloop:plan"])  # retried, then fine
    failures.on_llm_error(ModelAuthenticationError("bad key"), tags=["agentloop:answer"])
    answer_failed = failures.failure({"status": "answer_failed"})
    assert answer_failed is not None
    assert answer_failed.code == 2
    assert answer_failed.message.startswith("answer model failed: the model rejected")
    assert failures.failure({"status": "ok"}) is None
    planner_failed = failures.failure({"status": "planner_failed"})
    assert planner_failed is not None and planner_failed.code == 4


def test_a_plan_that_cannot_be_used_is_no_model_failure() -> None:
    assert ModelFailures().failure({"status": "planner_failed"}) is None
