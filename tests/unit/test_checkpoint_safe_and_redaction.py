"""Property tests: state is checkpoint-safe for every serializer, secrets never survive."""

from __future__ import annotations

import json
import math
from typing import Any

import ormsgpack
from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from agentloop.base.checkpoint_safe import (
    checkpoint_safe,
    decode_arguments,
    encode_arguments,
    safe_text,
)
from agentloop.observability.redaction import REDACTED, Redactor, redact_data

ANY_TEXT = st.text(alphabet=st.characters(blacklist_categories=()), max_size=30)
"""Text that may hold lone surrogates."""
HUGE_INTS = st.integers(min_value=-(10**40), max_value=10**40)
FLOATS = st.floats(allow_nan=True, allow_infinity=True)
SCALARS = st.one_of(st.none(), st.booleans(), HUGE_INTS, FLOATS, ANY_TEXT, st.binary(max_size=20))
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.dictionaries(ANY_TEXT, inner, max_size=5),
        st.frozensets(st.integers(), max_size=3),
        st.tuples(inner, inner),
    ),
    max_leaves=25,
)
SERDE = JsonPlusSerializer()


def strict_json(value: Any) -> bytes:
    return json.dumps(value, allow_nan=False, ensure_ascii=False).encode("utf-8")


@settings(max_examples=300)
@given(VALUES)
def test_checkpoint_safe_values_pass_every_serializer(value: Any) -> None:
    safe = checkpoint_safe(value)
    strict_json(safe)
    ormsgpack.packb(safe)
    kind, data = SERDE.dumps_typed(safe)
    assert SERDE.loads_typed((kind, data)) == safe
    assert checkpoint_safe(safe) == safe  # idempotent


@given(
    st.text(
        alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
        max_size=50,
    )
)
def test_valid_text_is_unchanged(text: str) -> None:
    assert safe_text(text) == text and checkpoint_safe(text) is text


def test_nul_becomes_the_replacement_character() -> None:
    assert safe_text("pdf\x00text\x00") == "pdf\ufffdtext\ufffd"
    assert checkpoint_safe({"k\x00": ["a\x00"]}) == {"k\ufffd": ["a\ufffd"]}
    encoded = encode_arguments({"text": "a\x00b", "nested": ["\x00"]})
    assert "\x00" not in json.dumps(encoded, ensure_ascii=False)
    assert decode_arguments(encoded) == {"text": "a\x00b", "nested": ["\x00"]}


JSON_ARGUMENTS = st.dictionaries(
    st.text(alphabet="abcdefgh_", min_size=1, max_size=8),
    st.recursive(
        st.one_of(st.none(), st.booleans(), HUGE_INTS, st.text(max_size=10)),
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.dictionaries(st.text(alphabet="xyz", min_size=1, max_size=3), inner, max_size=3),
        ),
        max_leaves=10,
    ),
    max_size=5,
)


@settings(max_examples=300)
@given(JSON_ARGUMENTS)
def test_arguments_keep_their_big_integers(arguments: dict[str, Any]) -> None:
    encoded = encode_arguments(arguments)
    strict_json(encoded)
    ormsgpack.packb(encoded)
    assert decode_arguments(encoded) == arguments


def test_checkpoint_safe_examples() -> None:
    value = {"n": 2**70, "s": "a\ud800b", "f": [math.nan, -math.inf], "b": b"\xff", 3: {1, 2}}
    assert checkpoint_safe(value) == {
        "n": str(2**70),
        "s": "a\ufffdb",
        "f": ["NaN", "-Infinity"],
        "b": "<1 bytes>",
        "3": [1, 2],
    }


SECRETS = st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=8,
                  max_size=30).filter(lambda secret: secret not in "[REDACTED]")  # fmt: skip
# a secret inside the marker itself would be "found" in every redacted text
PLAIN = st.text(alphabet="abcdefghij klmnop.,!?\n", max_size=80)


@settings(max_examples=300)
@given(st.lists(SECRETS, min_size=1, max_size=3), PLAIN, PLAIN, st.integers(0, 2))
def test_planted_secrets_never_survive(
    secrets: list[str], before: str, after: str, which: int
) -> None:
    redactor = Redactor(secrets, environ={})
    secret = secrets[which % len(secrets)]
    text = f"{before}{secret}{after}"
    redacted = redactor(text)
    assert secret not in redacted
    assert redactor(redacted) == redacted  # idempotent


def test_a_secret_matching_the_marker_in_another_case_leaves_the_marker_alone() -> None:
    """Secrets match in any case: `rEDACTED` also matches inside `[REDACTED]` itself."""
    redactor = Redactor(["rEDACTED"], environ={})
    assert redactor("a rEDACTED b") == "a [REDACTED] b"
    assert redactor("a [REDACTED] b") == "a [REDACTED] b"  # not `[[REDACTED]]`
    around = Redactor(["[REDACTED]abc"], environ={})  # a secret that holds the marker
    assert around("x [REDACTED]abc y") == "x [REDACTED] y"


@given(PLAIN)
def test_text_without_secrets_is_unchanged(text: str) -> None:
    assert Redactor(["correct-horse-battery"], environ={})(text) == text


@given(
    st.sampled_from(["sk-", "sk-ant-", "ghp_", "github_pat_", "xoxb-", "glpat-"]),
    st.text(
        alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
        min_size=24,
        max_size=40,
    ),
)
def test_credential_shapes_are_redacted(prefix: str, body: str) -> None:
    redacted = Redactor(environ={})(f"token {prefix}{body} used")
    assert body not in redacted and REDACTED in redacted


def test_environment_secrets_and_parameters() -> None:
    redactor = Redactor(environ={"SERVICE_API_KEY": "abc123def456", "HOME": "/root/home"})
    text = "GET /v1?q=paris&api_key=xyz98765&lang=en from /root/home with abc123def456"
    assert redactor(text) == (
        "GET /v1?q=paris&api_key=[REDACTED]&lang=en from /root/home with [REDACTED]"
    )


@given(VALUES)
def test_redacting_data_keeps_its_shape(value: Any) -> None:
    safe = checkpoint_safe(value)
    redacted = redact_data(safe, lambda text: text.upper())
    assert type(redacted) is type(safe)
    if isinstance(safe, dict | list):
        assert len(redacted) == len(safe)


def test_keys_redacted_alike_both_stay() -> None:
    row = {"0R00": 1, "0r00": 2, "0R00 (2)": 3}
    assert redact_data(row, lambda text: text.upper()) == {
        "0R00": 1,
        "0R00 (2)": 2,
        "0R00 (2) (2)": 3,
    }
    secrets = {"sk-live-4f9aA81bC0d2E3f4": "a", "sk-live-9f8eD7c6B5a4F3e2": "b"}
    redacted = redact_data(secrets, Redactor(environ={}))
    assert sorted(redacted.values()) == ["a", "b"]
    assert not any("sk-live" in key for key in redacted)


def test_a_secret_inside_a_parameter_name_is_redacted() -> None:
    assert Redactor(["SIGNATURE="], environ={})("SIGNATURE=Ab12Cd34Ef") == "[REDACTED]"
    assert Redactor(["h_token="], environ={})("refresh_token=Ab12Cd34") == "[REDACTED]"
    # a value too short to be a credential keeps only the literal secret out
    assert Redactor(["SIGNATURE="], environ={})("SIGNATURE=????") == "[REDACTED]????"
    # other parameters keep their name
    assert Redactor(["SIGNATURE="], environ={})("password=hunter22") == "password=[REDACTED]"


def test_plain_keys_are_kept_and_everything_else_is_still_redacted() -> None:
    secret = "hunter2-battery-staple"
    redactor = Redactor([secret], environ={})
    record = {
        "tool_name": f"lookup {secret}",
        "kwargs": {secret: secret, "tool_name": "x\x00y"},
        f"extra {secret}": [secret],
    }
    safe = checkpoint_safe(record, redactor, plain_keys=frozenset({"tool_name", "kwargs"}))
    assert safe == {
        "tool_name": f"lookup {REDACTED}",
        "kwargs": {REDACTED: REDACTED, "tool_name": "x\ufffdy"},
        f"extra {REDACTED}": [REDACTED],
    }
    assert secret not in json.dumps(safe)
