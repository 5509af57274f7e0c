"""Answers to an MCP elicitation: shapes accepted, and the schema's defaults (SEP-1034)."""

from __future__ import annotations

import pytest
from mcp import types

from agentloop.mcp import elicit_result

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "default": "Ada"},
        "count": {"type": "integer", "default": 3},
        "free": {"type": "string"},
    },
}


def test_an_accepted_answer_gets_the_defaults_it_leaves_out() -> None:
    answer = elicit_result({"action": "accept", "content": {"name": "Bo"}}, SCHEMA)
    assert answer.action == "accept"
    assert answer.content == {"name": "Bo", "count": 3}


def test_an_empty_acceptance_gets_every_default() -> None:
    assert elicit_result("accept", SCHEMA).content == {"name": "Ada", "count": 3}
    assert elicit_result("accept").content is None  # no schema, nothing to fill


def test_a_declined_answer_carries_no_content() -> None:
    answer = elicit_result({"action": "decline", "content": {"name": "Bo"}}, SCHEMA)
    assert answer.action == "decline" and answer.content is None


def test_an_elicit_result_is_taken_as_it_is() -> None:
    given = types.ElicitResult(action="accept", content={"free": "x"})
    assert elicit_result(given, SCHEMA).content == {"free": "x", "name": "Ada", "count": 3}


def test_another_shape_is_refused() -> None:
    with pytest.raises(ValueError, match="maybe"):
        elicit_result("maybe")
