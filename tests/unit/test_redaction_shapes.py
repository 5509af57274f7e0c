"""A secret inside any shape a tool returns reaches no sink; text that only looks secret stays.

Each tool returns a dict holding a planted secret (a literal from the environment, and a
provider-shaped key) inside one container shape: a set, an object known only by its
`repr`, an object hiding it in an attribute, a dataclass, a pydantic model, nesting 100
levels deep, a cycle. Every sink is checked: a callback handler's `on_tool_end`, a
`BaseTracer`'s runs, `astream_events`, an app logger given the output with `extra=`, the
library's own log records with `extra=`, the state, and the bytes of a SQLite checkpoint
file. Then the corpus: real-looking credentials are redacted, near misses are not, and
no credential of the corpus reaches any of those sinks.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import sqlite3
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.tools import BaseTool, StructuredTool, tool
from langchain_core.tracers.base import BaseTracer
from langchain_core.tracers.schemas import Run
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from pydantic import BaseModel

from agentloop import ModelOptions, create_tool_loop, install_log_redaction
from agentloop.observability.redaction import REDACTED, Redactor
from agentloop.testing import ScriptedChatModel, plan_reply

SECRET = "Horse/Battery Staple+42"
"""Set as `BILLING_DB_PASSWORD` in the environment when the loop is built."""
KEY = "sk-proj-Q9x7Lw2Zr5Tt8Yb3Nc6Vd1Mf"
"""A provider-shaped key nobody configured: found by its shape."""
PLANTED = (SECRET, KEY)


@dataclasses.dataclass
class Credentials:
    user: str
    password: str
    key: str


class CredentialsModel(BaseModel):
    user: str
    password: str
    key: str


class Connection:
    """An object the loop knows only by its `repr`, which shows the secret."""

    def __init__(self) -> None:
        self.dsn = f"postgresql://billing:{SECRET}@db/{KEY}"

    def __repr__(self) -> str:
        return f"Connection({self.dsn})"


class Vault:
    """An object whose `repr` shows nothing, holding the secret in an attribute."""

    def __init__(self) -> None:
        self.secrets = {"password": SECRET, "key": KEY}


def nested(depth: int) -> dict[str, Any]:
    inner: dict[str, Any] = {"password": SECRET, "key": KEY}
    for _ in range(depth):
        inner = {"next": inner}
    return inner


def cyclic() -> dict[str, Any]:
    data: dict[str, Any] = {"password": SECRET, "key": KEY}
    data["self"] = data
    return data


SHAPES: dict[str, Callable[[], Any]] = {
    "set": lambda: {"values": {SECRET, KEY, "public"}},
    "object": lambda: {"connection": Connection()},
    "hidden": lambda: {"vault": Vault()},
    "dataclass": lambda: {"creds": Credentials("billing", SECRET, KEY)},
    "model": lambda: {"creds": CredentialsModel(user="billing", password=SECRET, key=KEY)},
    "deep": lambda: nested(100),
    "cycle": lambda: {"data": cyclic()},
}


def shape_tool(shape: str) -> BaseTool:
    make = SHAPES[shape]

    async def run(n: int) -> Any:
        return make()

    def run_sync(n: int) -> Any:
        return make()

    return StructuredTool.from_function(
        func=run_sync, coroutine=run, name=f"get_{shape}", description=f"Read the {shape}."
    )


def everything(value: Any) -> str:
    """Every text reachable from `value`: containers, attributes, reprs (for the search)."""
    parts: list[str] = []
    seen: set[int] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            parts.append(item)
            continue
        if isinstance(item, bytes):
            parts.append(item.decode("utf-8", "replace"))
            continue
        if item is None or isinstance(item, bool | int | float) or id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, Mapping):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple | set | frozenset):
            stack.extend(item)
        else:
            with contextlib.suppress(RecursionError):
                parts.append(repr(item))
            fields = getattr(item, "__dict__", None)
            if isinstance(fields, dict):
                stack.append(fields)
    return "\n".join(parts)


def assert_clean(seen: Any) -> None:
    text = everything(seen)
    for secret in PLANTED:
        assert secret not in text
    assert "Vault object" not in text or "secrets" not in text


class ToolEnds(BaseCallbackHandler):
    """Keeps every tool output; logs each to an app logger with `extra=`, as apps do."""

    def __init__(self) -> None:
        self.outputs: list[Any] = []

    def on_tool_end(self, output: Any, **kwargs: Any) -> None:
        self.outputs.append(output)
        logging.getLogger("app.audit").info("tool ended", extra={"tool_output": output})


class KeepingTracer(BaseTracer):
    """A tracer that keeps the runs it would persist."""

    def __init__(self) -> None:
        super().__init__()
        self.runs: list[Run] = []

    def _persist_run(self, run: Run) -> None:
        self.runs.append(run)


def run_contents(runs: list[Run]) -> list[Any]:
    contents: list[Any] = []
    stack = list(runs)
    while stack:
        run = stack.pop()
        contents.extend([run.inputs, run.outputs, run.error, run.events])
        stack.extend(run.child_runs)
    return contents


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(dict(record.__dict__))


def loop_of(shapes: list[str], checkpointer: Any = None) -> Any:
    commands = [{"tool_name": f"get_{shape}", "tool_kwargs": {"n": 1}} for shape in shapes]
    return create_tool_loop(
        ScriptedChatModel([plan_reply("execute", commands), plan_reply("response")]),
        [shape_tool(shape) for shape in shapes],
        models=ModelOptions(answer_model=ScriptedChatModel(["ok"], repeat_last=True)),
        checkpointer=checkpointer,
    )


@pytest.fixture
def app_log() -> Any:
    handler = Records()
    logger = logging.getLogger("app.audit")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)


async def test_a_secret_in_any_shape_reaches_no_sink(
    run_loop: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, app_log: Records
) -> None:
    monkeypatch.setenv("BILLING_DB_PASSWORD", SECRET)
    database = tmp_path / "checkpoints.sqlite"
    shapes = list(SHAPES)
    handler, tracer = ToolEnds(), KeepingTracer()
    config = {"configurable": {"thread_id": "shapes"}, "callbacks": [handler, tracer]}
    payload = {"user_input": "read everything"}
    if run_loop.entry == "invoke":
        connection = sqlite3.connect(database, check_same_thread=False)
        out = await run_loop(loop_of(shapes, SqliteSaver(connection)), payload, config)
        connection.close()
    else:
        async with AsyncSqliteSaver.from_conn_string(str(database)) as saver:
            out = await run_loop(loop_of(shapes, saver), payload, config)
    records = out["tool_logs"]
    assert [record["tool_name"] for record in records] == [f"get_{s}" for s in shapes]
    assert all(record["success"] for record in records), records
    assert len(handler.outputs) == len(shapes)
    assert_clean(handler.outputs)
    assert not any(isinstance(output, Vault) for output in handler.outputs)
    assert_clean(run_contents(tracer.runs))
    assert len(app_log.records) == len(shapes)
    assert_clean(app_log.records)
    assert_clean(out)
    assert REDACTED in everything(records)
    stored = b"".join(path.read_bytes() for path in tmp_path.glob("checkpoints.sqlite*"))
    assert b"get_set" in stored  # the records are there
    for secret in PLANTED:
        assert secret.encode() not in stored


async def test_astream_events_see_no_secret_in_any_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BILLING_DB_PASSWORD", SECRET)
    shapes = list(SHAPES)
    events = [
        event
        async for event in loop_of(shapes).astream_events(
            {"user_input": "read everything"}, version="v2"
        )
    ]
    ends = [event for event in events if event["event"] == "on_tool_end"]
    assert len(ends) == len(shapes)
    assert_clean([event["data"] for event in events])


@pytest.mark.parametrize("shape", list(SHAPES))
def test_log_records_of_the_library_redact_extra_fields(
    shape: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BILLING_DB_PASSWORD", SECRET)
    graph = loop_of([shape])
    install_log_redaction()  # as the app does: the library changes no logging by itself
    handler = Records()
    logger = logging.getLogger("agentloop.observability.audit")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        logger.info("result of %s", shape, extra={"result": SHAPES[shape](), "key": KEY})
    finally:
        logger.removeHandler(handler)
    [record] = handler.records
    assert_clean(record)
    assert record["key"] == REDACTED
    del graph


# --- the corpus ------------------------------------------------------------------------

JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
CREDENTIALS = {
    "sk-proj-Q9x7Lw2Zr5Tt8Yb3Nc6Vd1Mf": "Q9x7Lw2Zr5Tt8Yb3Nc6Vd1Mf",
    "sk-ant-api03-Zq8Xw7Cv6Bn5Ml4Kj3Hg2": "Zq8Xw7Cv6Bn5Ml4Kj3Hg2",
    "ghp_16C7e42F292c6912E7710c838347Ae178B4a": "16C7e42F292c6912E7710c838347Ae178B4a",
    "github_pat_11ABCDEFG0123456789_abcdefghijKLMNOP": "11ABCDEFG0123456789",
    "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOp": "AbCdEfGhIjKlMnOp",
    "AKIAIOSFODNN7EXAMPLE": "IOSFODNN7EXAMPLE",
    "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q": "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
    "glpat-xY12zW34vU56tS78rQ90": "xY12zW34vU56tS78rQ90",
    JWT: JWT.rsplit(".", 1)[1],
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7nJ1vX9\n-----END RSA PRIVATE KEY-----": (
        "MIIEowIBAAKCAQEA7nJ1vX9"
    ),
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA": "b3BlbnNzaC1rZXktdjEAAAAA",
    "password=hunter22": "hunter22",
    "api_key=9f8e7d6c5b4a3210": "9f8e7d6c5b4a3210",
    "Authorization: Bearer abcDEF123456ghiJKL": "abcDEF123456ghiJKL",
    "Authorization: Basic dXNlcjpodW50ZXIyMg==": "dXNlcjpodW50ZXIyMg",
    '{"client_secret": "Zx9-Qw8_Er7-Ty6"}': "Zx9-Qw8_Er7-Ty6",
    "token: 8f14e45fceea167a5a36dedd4bea2543": "8f14e45fceea167a5a36dedd4bea2543",
    "session_token=Ab12Cd34Ef56": "Ab12Cd34Ef56",
    "https://api.example.com/v1?access_token=Zx81Lq02Mv93&page=2": "Zx81Lq02Mv93",
    "PASSWORD=correcthorsebatterystaple": "correcthorsebatterystaple",
    '{"client_secret": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0B\\n-----END': (
        "MIIEvQIBADANBgkqhkiG9w0B"
    ),
    # AWS secret access keys: bare, and as config files, env files and STS JSON spell them
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY": "K7MDENG/bPxRfiCY",
    "N1XaKGj0osnRI9u9JLTe6T+ppRlvfwIS00tCe7mc": "N1XaKGj0osnRI9u9JLTe6T",
    "[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\n"
    "aws_secret_access_key = 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\n": "ppRlvfwIS00tCe7mc",
    "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY": "K7MDENG/bPxRfiCY",
    '{"AccessKeyId": "ASIAXXX", "SecretAccessKey": "N1XaKGj0osnRI9u9JLTe6T+ppRlvfwIS00tCe7mc"}': (
        "N1XaKGj0osnRI9u9JLTe6T"
    ),
    "aws_session_token = IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQD": "IQoJb3JpZ2lu",
    # Stripe secret and restricted keys
    "sk_live_4eC39HqLyjWDarjtT1zdp7dc": "4eC39HqLyjWDarjtT1zdp7dc",
    "rk_live_ZLzkpal6VDX6rPc9FRQj5j0i0V0n7KilW2CFioQd": "ZLzkpal6VDX6rPc9FRQj5j0i0V0n7K",
    "STRIPE_API_KEY=sk_live_TaCM8A6x0QRHH38w8mJ2VNbJ": "TaCM8A6x0QRHH38w8mJ2VNbJ",
    # Azure storage and Service Bus connection strings
    "DefaultEndpointsProtocol=https;AccountName=billing;AccountKey=uwsy+HScaGyVBfRtogaiKYexQDsHw"
    "+5m9iDDBYZYv8I4/iCo66L5Vr9YVyJgTInuaIvrj3tBWUpD59e5CXRKHw==;EndpointSuffix=core.windows.net": (
        "uwsy+HScaGyVBfRtogaiKYexQDsHw"
    ),
    '{"accountKey": "uwsy+HScaGyVBfRtogaiKYexQDsHw+5m9iDDBYZYv8I4/iCo66L5Vr9YVyJgTI"}': (
        "uwsy+HScaGyVBfRtogaiKYexQDsHw"
    ),
    "Endpoint=sb://billing.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;"
    "SharedAccessKey=Kq3pV8xN2mL5rT9wB4yH7cZ1dF6gJ0sAeU2iO5bXk8M=": "Kq3pV8xN2mL5rT9wB4yH7c",
    # passwords in URLs, whatever the scheme
    "postgres://billing:Sup3rS3cret!@db.internal:5432/app": "Sup3rS3cret!",
    "DATABASE_URL=postgresql://app:pw-9f8e7d6c@db:5432/app?sslmode=require": "pw-9f8e7d6c",
    "mysql://root:Tr0ub4dor&3@mysql.internal/shop": "Tr0ub4dor&3",
    "redis://:Rds-2kQ9xLm7@cache:6379/0": "Rds-2kQ9xLm7",
    "amqp://guest:Rabb1tMQpass@rabbit:5672/vhost": "Rabb1tMQpass",
    "mongodb+srv://app:Mng0-pass-77@cluster0.example.mongodb.net/db": "Mng0-pass-77",
    "mongodb://app:Mng0-pass-77@one:27017,two:27017/db?replicaSet=rs0": "Mng0-pass-77",
    "https://x-access-token:Zq8Xw7Cv6Bn5Ml4Kj3@github.com/acme/app.git": "Zq8Xw7Cv6Bn5Ml4Kj3",
    "postgres://ops:p@ss-w0rd@db/app": "ss-w0rd",
    # a GCP service account key file
    '{"type": "service_account", "project_id": "billing-prod", '
    '"private_key_id": "6494657e373ff6c8ac4ef2c5da2870486e67f8fb", "private_key": '
    '"-----BEGIN PRIVATE KEY-----\\nMIIEvgIBADANBgkqhkiG\\n-----END PRIVATE KEY-----\\n"}': (
        "6494657e373ff6c8ac4ef2c5da2870486e67f8fb"
    ),
    # SendGrid, Twilio API key SIDs, npm, Hugging Face
    "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": "okxJNG6ctWjltaqa0e",
    "SENDGRID_API_KEY=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": (
        "okxJNG6ctWjltaqa0e"
    ),
    "SK3d382c8390b94d504e822334811390a4": "3d382c8390b94d504e822334811390a4",
    "twilio api key SK3d382c8390b94d504e822334811390a4 secret": "3d382c8390b94d504e8223",
    "npm_q1m4sVW5vuvRlx8HMAyB0jdIA6KVop2YqCei": "q1m4sVW5vuvRlx8HMAyB0jdIA6KVop2YqCei",
    "//registry.npmjs.org/:_authToken=npm_q1m4sVW5vuvRlx8HMAyB0jdIA6KVop2YqCei": "q1m4sVW5vuvRlx8H",
    "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": "qBiiKnfJFTMBnIXiCWmfJkpupPJCBJonJZ",
    "HF_TOKEN=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": "qBiiKnfJFTMBnIXiCWmf",
}
"""Real-looking credentials (the text, and the part of it that must disappear)."""

NEAR_MISSES = [
    "token=True",
    "password: none",
    "secret_santa",
    "tokens=128",
    "max_tokens=4096",
    "api_key=${API_KEY}",
    "password=<your password>",
    "token={{ token }}",
    "password=%(password)s",
    "secret=********",
    "password=required",
    "token=undefined",
    "Bearer authentication is required",
    "Basic authentication uses base64",
    "the secret is out",
    "a token bucket refills",
    "signature=sha256",
    "password: hunter2",
    "Keyboard shortcuts: Ctrl+K",
    "sklearn and skimage",
    "akiak is a town in Alaska",
    "eyJ alone is not a JWT",
    # hex digests, UUIDs, base64 digests, paths and names 40 characters long
    "da39a3ee5e6b4b0d3255bfef95601890afd80709",
    "DA39A3EE5E6B4B0D3255BFEF95601890AFD80709",
    "commit 0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c",
    "123e4567-e89b-12d3-a456-426614174000",
    "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=",
    "src/ComponentsLibrary/ButtonGroup2Varian",
    "V1OrganizationExternalKeysPostRequestGcp",
    "see Users/JohnSmith/Documents2024/ReportFina.pdf",
    "aws_secret_access_key = ${AWS_SECRET_ACCESS_KEY}",
    "AWS_ACCESS_KEY_ID is the key's id",
    # Stripe's public keys, and words
    "pk_live_51H8xYzQ7wE2rT5yU8iO1pA4sD",
    "sk_live_mode=false",
    "rk_live_ keys are restricted",
    # connection strings without a secret
    "AccountName=devstoreaccount1;SharedAccessKeyName=RootManageSharedAccessKey",
    "AccountKey=<your account key>",
    "postgres://billing@db.internal:5432/app",
    "postgresql://app:${PGPASSWORD}@db:5432/app",
    "redis://cache:6379/0",
    "ssh://git@github.com:22/acme/app.git",
    "http://[::1]:8080/health",
    "https://example.com/a:b@c",
    "mailto:ann@example.com",
    # a service account's public fields
    '"client_email": "billing@billing-prod.iam.gserviceaccount.com"',
    '"project_id": "billing-prod-123456"',
    # near SendGrid, Twilio, npm and Hugging Face
    "SG.1 release notes",
    "SKU-5e0f4a9b8c7d6e5f4a3b2c1d0e9f8a7b",
    "AC5e0f4a9b8c7d6e5f4a3b2c1d0e9f8a7b",
    "SK5e0f4a9b8c7d6e5f4a3b2c1d0e9f8a7",
    "npm_config_cache=/tmp/npm-cache",
    "npm_package_version=1.2.3",
    "hf_hub_download",
    "HF_HUB_ENABLE_HF_TRANSFER=1",
]
"""Text that merely looks like a secret (documented in docs/guarantees.md, Secrets stay out):
values shorter than 8 characters, placeholders, plain words under 20 characters, and
words that contain `token`, `secret` or `key`. Each must stay exactly as it is."""


@pytest.mark.parametrize(("credential", "secret"), list(CREDENTIALS.items()))
def test_real_looking_credentials_are_redacted(credential: str, secret: str) -> None:
    redacted = Redactor(environ={})(f"found {credential} here")
    assert REDACTED in redacted and secret not in redacted


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_near_misses_are_left_as_they_are(text: str) -> None:
    assert Redactor(environ={})(text) == text
    assert Redactor(environ={})(f"config: {text}; done") == f"config: {text}; done"


@pytest.mark.parametrize(
    "scheme", ["postgres", "postgresql", "mysql", "redis", "rediss", "amqp", "mongodb+srv", "https"]
)
def test_a_urls_password_goes_and_its_scheme_user_and_host_stay(scheme: str) -> None:
    url = f"{scheme}://app_user:Pw-8x7c6v5b@db.internal:5432/app?sslmode=require"
    assert Redactor(environ={})(f"using {url} now") == (
        f"using {scheme}://app_user:{REDACTED}@db.internal:5432/app?sslmode=require now"
    )


def test_what_a_kept_part_holds_is_still_redacted() -> None:
    """A user, a value that is no credential, a token that is no key: searched all the same."""
    redact = Redactor(["hunter22x", "Ab3dEf9h"], environ={})
    github = "https://ghp_16C7e42F292c6912E7710c838347Ae178B4a:x-oauth-basic@github.com/acme"
    assert redact(github) == f"https://{REDACTED}:{REDACTED}@github.com/acme"
    assert redact("postgres://hunter22x:Pw-8x7c6v5b@db/app") == (
        f"postgres://{REDACTED}:{REDACTED}@db/app"
    )
    assert redact("token=true_hunter22x") == f"token=true_{REDACTED}"
    assert redact("path V1OrganizationExternalKeysPostReqAb3dEf9h") == (
        f"path V1OrganizationExternalKeysPostReq{REDACTED}"
    )


async def test_the_record_keeps_near_misses_and_redacts_credentials(run_loop: Any) -> None:
    @tool
    def read_config(section: str) -> dict[str, Any]:
        """Read a configuration section."""
        return {"near": list(NEAR_MISSES), "real": list(CREDENTIALS), "set": set(NEAR_MISSES)}

    graph = create_tool_loop(
        ScriptedChatModel(
            [
                plan_reply(
                    "execute", [{"tool_name": "read_config", "tool_kwargs": {"section": "a"}}]
                ),
                plan_reply("response"),
            ]
        ),
        [read_config],
        models=ModelOptions(answer_model=ScriptedChatModel(["ok"], repeat_last=True)),
    )
    handler = ToolEnds()
    out = await run_loop(graph, {"user_input": "config"}, {"callbacks": [handler]})
    [record] = out["tool_logs"]
    assert record["success"] and not record["truncated"]
    assert record["result"]["near"] == NEAR_MISSES
    assert sorted(record["result"]["set"]) == sorted(NEAR_MISSES)
    assert handler.outputs[0]["near"] == NEAR_MISSES
    assert all(REDACTED in text for text in record["result"]["real"])
    assert all(REDACTED in text for text in handler.outputs[0]["real"])


def corpus_loop(checkpointer: Any = None) -> Any:
    @tool
    def read_config(section: str) -> dict[str, Any]:
        """Read a configuration section."""
        return {"real": list(CREDENTIALS), "near": list(NEAR_MISSES)}

    command = {"tool_name": "read_config", "tool_kwargs": {"section": "all"}}
    return create_tool_loop(
        ScriptedChatModel([plan_reply("execute", [command]), plan_reply("response")]),
        [read_config],
        models=ModelOptions(answer_model=ScriptedChatModel(["ok"], repeat_last=True)),
        checkpointer=checkpointer,
    )


def leaked(text: str) -> list[str]:
    """The secret parts of the corpus found in `text`."""
    return [secret for secret in CREDENTIALS.values() if secret in text]


async def test_no_credential_of_the_corpus_reaches_a_sink(
    run_loop: Any, tmp_path: Path, app_log: Records
) -> None:
    database = tmp_path / "checkpoints.sqlite"
    handler, tracer = ToolEnds(), KeepingTracer()
    config = {"configurable": {"thread_id": "corpus"}, "callbacks": [handler, tracer]}
    payload = {"user_input": "read the config"}
    if run_loop.entry == "invoke":
        connection = sqlite3.connect(database, check_same_thread=False)
        out = await run_loop(corpus_loop(SqliteSaver(connection)), payload, config)
        connection.close()
    else:
        async with AsyncSqliteSaver.from_conn_string(str(database)) as saver:
            out = await run_loop(corpus_loop(saver), payload, config)
    [record] = out["tool_logs"]
    assert record["success"] and record["result"]["near"] == NEAR_MISSES
    assert all(REDACTED in text for text in record["result"]["real"])
    assert handler.outputs[0]["near"] == NEAR_MISSES
    for sink in (out, handler.outputs, run_contents(tracer.runs), app_log.records):
        assert leaked(everything(sink)) == []
    stored = b"".join(path.read_bytes() for path in tmp_path.glob("checkpoints.sqlite*"))
    assert b"read_config" in stored  # the record is there
    assert leaked(stored.decode("utf-8", "replace")) == []


async def test_astream_events_see_no_credential_of_the_corpus() -> None:
    events = [
        event
        async for event in corpus_loop().astream_events({"user_input": "config"}, version="v2")
    ]
    [end] = [event for event in events if event["event"] == "on_tool_end"]
    assert leaked(everything([event["data"] for event in events])) == []
    assert "V1OrganizationExternalKeysPostRequestGcp" in everything(end["data"])


def test_log_records_of_the_library_redact_the_corpus(caplog: pytest.LogCaptureFixture) -> None:
    install_log_redaction()  # as the app does: the library changes no logging by itself
    caplog.set_level(logging.INFO)
    logger = logging.getLogger("agentloop.durability.sql")
    for credential in CREDENTIALS:
        logger.warning("connecting with %s", credential, extra={"credential": credential})
    for text in NEAR_MISSES:
        logger.info("near %s", text, extra={"text": text})
    records = [dict(record.__dict__) for record in caplog.records]
    assert len(records) == len(CREDENTIALS) + len(NEAR_MISSES)
    assert leaked(caplog.text) == [] and leaked(everything(records)) == []
    near = [record.getMessage() for record in caplog.records][len(CREDENTIALS) :]
    assert near == [f"near {text}" for text in NEAR_MISSES]


class Huge:
    """An object whose text is 10 MB."""

    def __repr__(self) -> str:
        return "h" * 10_000_000

    __str__ = __repr__


async def test_an_object_cut_to_its_repr_makes_the_record_truncated(run_loop: Any) -> None:
    @tool
    def get_blob(n: int) -> Any:
        """Return an object with a huge text."""
        return {"blob": Huge(), "n": n}

    @tool
    def get_bare_blob(n: int) -> Any:
        """Return the object itself."""
        return Huge()

    commands = [
        {"tool_name": "get_blob", "tool_kwargs": {"n": 1}},
        {"tool_name": "get_bare_blob", "tool_kwargs": {"n": 2}},
    ]
    graph = create_tool_loop(
        ScriptedChatModel([plan_reply("execute", commands), plan_reply("response")]),
        [get_blob, get_bare_blob],
        models=ModelOptions(answer_model=ScriptedChatModel(["ok"], repeat_last=True)),
    )
    out = await run_loop(graph, {"user_input": "blob"})
    nested_record, bare = out["tool_logs"]
    assert nested_record["success"] and nested_record["truncated"]
    assert nested_record["result"]["n"] == 1 and len(nested_record["result"]["blob"]) <= 1000
    assert bare["success"] and bare["truncated"]
    assert bare["result"].startswith("hhh") and len(bare["result"]) < 20_000
