"""Secrets stay out of every sink: callbacks, astream_events, logs, encoded forms."""

from __future__ import annotations

import base64
import logging
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote
from uuid import UUID

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.tools import BaseTool, tool
from pydantic import BaseModel

from agentloop import (
    GovernanceOptions,
    ModelOptions,
    ToolPolicy,
    ToolRetry,
    create_tool_loop,
    install_log_redaction,
)
from agentloop.mcp.config import load_mcp_config
from agentloop.observability.redaction import REDACTED, Redactor, installed_log_redaction
from agentloop.testing import ScriptedChatModel, plan_reply

SECRET = "Horse/Battery Staple+42"
"""Set as `BILLING_DB_PASSWORD` in the environment when the loop is built."""


def leaky_loop(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("BILLING_DB_PASSWORD", SECRET)

    @tool
    def get_settings(section: str) -> str:
        """Settings of a section."""
        return f"db settings: user=billing secret {SECRET} host=db"

    @tool
    def get_balance(account: str) -> str:
        """Balance of an account."""
        msg = f"login to the billing database failed with {SECRET}"
        raise ConnectionError(msg)

    commands = [
        {"tool_name": "get_settings", "tool_kwargs": {"section": "db"}},
        {"tool_name": "get_balance", "tool_kwargs": {"account": "a-1"}},
    ]
    return create_tool_loop(
        ScriptedChatModel([plan_reply("execute", commands), plan_reply("response")]),
        [get_settings, get_balance],
        models=ModelOptions(answer_model=ScriptedChatModel(["ok"], repeat_last=True)),
        governance=GovernanceOptions(
            policies={"get_balance": ToolPolicy(retry=ToolRetry(max_attempts=1))}
        ),
    )


class ToolEvents(BaseCallbackHandler):
    """Keeps what LangChain reports about tool runs, as text."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, UUID | None]] = []

    def on_tool_start(self, serialized: Any, input_str: str, **kwargs: Any) -> None:
        self.seen.append(("start", str(kwargs.get("name") or serialized), kwargs["parent_run_id"]))

    def on_tool_end(self, output: Any, **kwargs: Any) -> None:
        self.seen.append(("end", repr(output), kwargs.get("parent_run_id")))

    def on_tool_error(self, error: BaseException, **kwargs: Any) -> None:
        self.seen.append(("error", f"{error!r} {error}", kwargs.get("parent_run_id")))


async def test_callbacks_see_redacted_tool_outputs_and_errors(
    run_loop: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = leaky_loop(monkeypatch)
    handler = ToolEvents()
    out = await run_loop(graph, {"user_input": "settings"}, {"callbacks": [handler]})
    kinds = sorted(kind for kind, _, _ in handler.seen)
    assert kinds == ["end", "error", "start", "start"]
    assert all(parent is not None for _, _, parent in handler.seen)  # still in the run tree
    assert SECRET not in str(handler.seen)
    assert all(REDACTED in text for kind, text, _ in handler.seen if kind != "start")
    balance = out["tool_logs"][1]
    assert balance["error_type"] == "network_error"  # the redacted error keeps its type
    assert SECRET not in str(out)


async def test_astream_events_see_redacted_tool_outputs_and_errors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    graph = leaky_loop(monkeypatch)
    tool_events = [
        event
        async for event in graph.astream_events({"user_input": "settings"}, version="v2")
        if event["event"] in ("on_tool_end", "on_tool_error")
    ]
    assert sorted(event["event"] for event in tool_events) == ["on_tool_end", "on_tool_error"]
    assert SECRET not in repr(tool_events)
    assert all(REDACTED in repr(event["data"]) for event in tool_events)


TOKEN = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"
"""A provider-shaped token nobody configured: found by its shape."""
BEARER = "Bearer abcDEF123456ghiJKL"


class UpstreamError(Exception):
    """An HTTP client's error: a clean message, the secrets only in its attributes."""

    def __init__(self, message: str, *, status_code: int, response_body: str) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.response_body = response_body
        self.headers = {"Authorization": BEARER, "Accept": "application/json"}


class Session:
    """An object known only by its `repr`, holding the secret in an attribute."""

    def __init__(self) -> None:
        self.password = SECRET


class VaultLocked(Exception):
    """A custom exception holding secrets as attributes, its message clean."""

    def __init__(self, path: str) -> None:
        super().__init__(f"the vault at {path} is locked")
        self.secret = SECRET
        self.session = Session()
        self.raw = f'{{"token": "{TOKEN}"}}'.encode()


def attribute_loop(monkeypatch: pytest.MonkeyPatch, raised: list[Exception]) -> Any:
    """Tools whose exceptions hold secrets in attributes, chained errors and messages."""
    monkeypatch.setenv("BILLING_DB_PASSWORD", SECRET)

    @tool
    def fetch_invoice(number: str) -> str:
        """Fetch an invoice."""
        error = UpstreamError(
            "upstream refused the request",
            status_code=401,
            response_body=f'{{"error": "bad token", "token": "{TOKEN}"}}',
        )
        raised.append(error)
        raise error

    @tool
    async def open_vault(path: str) -> str:
        """Open a vault."""
        error = VaultLocked(path)
        raised.append(error)
        raise error

    @tool
    def get_customer(customer_id: str) -> str:
        """Get a customer."""
        try:
            raise UpstreamError("lookup failed", status_code=500, response_body=TOKEN)
        except UpstreamError as cause:
            raise LookupError(f"no customer {customer_id}") from cause

    @tool
    def get_balance(account: str) -> str:
        """Balance of an account."""
        msg = f"login to the billing database failed with {SECRET}"
        raise ConnectionError(msg)

    tools = [fetch_invoice, open_vault, get_customer, get_balance]
    commands = [
        {"tool_name": "fetch_invoice", "tool_kwargs": {"number": "F-1"}},
        {"tool_name": "open_vault", "tool_kwargs": {"path": "billing"}},
        {"tool_name": "get_customer", "tool_kwargs": {"customer_id": "c-7"}},
        {"tool_name": "get_balance", "tool_kwargs": {"account": "a-1"}},
    ]
    once = ToolPolicy(retry=ToolRetry(max_attempts=1))
    return create_tool_loop(
        ScriptedChatModel([plan_reply("execute", commands), plan_reply("response")]),
        tools,
        models=ModelOptions(answer_model=ScriptedChatModel(["ok"], repeat_last=True)),
        governance=GovernanceOptions(policies={tool.name: once for tool in tools}),
    )


def reachable(value: Any) -> str:
    """Every text a callback can reach from an error: its text, arguments, attributes, chain."""
    parts: list[str] = []
    seen: set[int] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            parts.append(item)
        elif isinstance(item, bytes):
            parts.append(item.decode("utf-8", "replace"))
        elif item is None or isinstance(item, bool | int | float) or id(item) in seen:
            continue
        elif isinstance(item, Mapping):
            seen.add(id(item))
            stack.extend([*item.keys(), *item.values()])
        elif isinstance(item, list | tuple | set | frozenset):
            seen.add(id(item))
            stack.extend(item)
        else:
            seen.add(id(item))
            parts.append(repr(item))
            if isinstance(item, BaseException):
                parts.append(str(item))
                stack.extend([item.args, item.__cause__, item.__context__])
            stack.append(getattr(item, "__dict__", None))
    return "\n".join(parts)


def assert_no_secret_reachable(value: Any) -> None:
    text = reachable(value)
    for secret in (SECRET, TOKEN, BEARER):
        assert secret not in text


class ToolErrors(BaseCallbackHandler):
    """Keeps the exceptions LangChain hands to `on_tool_error`."""

    def __init__(self) -> None:
        self.errors: list[BaseException] = []

    def on_tool_error(self, error: BaseException, **kwargs: Any) -> None:
        self.errors.append(error)


async def test_on_tool_error_sees_no_secret_in_an_exceptions_attributes(
    run_loop: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    raised: list[Exception] = []
    handler = ToolErrors()
    graph = attribute_loop(monkeypatch, raised)
    out = await run_loop(graph, {"user_input": "invoices"}, {"callbacks": [handler]})
    assert len(handler.errors) == 4
    assert_no_secret_reachable(handler.errors)
    by_type = {type(error).__name__: error for error in handler.errors}
    upstream = by_type["UpstreamError"]
    assert isinstance(upstream, UpstreamError)  # a redacted copy of the same type
    assert str(upstream) == "upstream refused the request"
    assert upstream.status_code == 401
    assert REDACTED in upstream.response_body and "bad token" in upstream.response_body
    assert upstream.headers == {"Authorization": f"Bearer {REDACTED}", "Accept": "application/json"}
    vault = by_type["VaultLocked"]
    assert str(vault) == "the vault at billing is locked" and vault.secret == REDACTED
    assert str(by_type["LookupError"]) == "no customer c-7"
    # the tool's own exceptions are left as they were
    assert [type(error) for error in raised] == [UpstreamError, VaultLocked]
    assert TOKEN in raised[0].response_body and raised[1].secret == SECRET  # type: ignore[attr-defined]
    records = {record["tool_name"]: record for record in out["tool_logs"]}
    assert records["get_balance"]["error_type"] == "network_error"
    assert not any(record["success"] for record in records.values())
    assert_no_secret_reachable(out)


async def test_astream_events_see_no_secret_in_an_exceptions_attributes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    graph = attribute_loop(monkeypatch, [])
    errors = [
        event
        async for event in graph.astream_events({"user_input": "invoices"}, version="v2")
        if event["event"] == "on_tool_error"
    ]
    assert len(errors) == 4
    assert all(isinstance(event["data"]["error"], Exception) for event in errors)
    assert_no_secret_reachable([event["data"] for event in errors])


class VaultPath(BaseModel):
    path: str


class ReadVault(BaseTool):
    """A tool written as a `BaseTool` subclass."""

    name: str = "read_vault"
    description: str = "Read the vault."
    args_schema: type[BaseModel] = VaultPath

    def _run(self, path: str) -> str:
        return f"vault {path}: {SECRET}"


async def test_base_tool_subclasses_are_redacted_before_callbacks(
    run_loop: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VAULT_TOKEN", SECRET)
    command = {"tool_name": "read_vault", "tool_kwargs": {"path": "db"}}
    graph = create_tool_loop(
        ScriptedChatModel([plan_reply("execute", [command]), plan_reply("response")]),
        [ReadVault()],
        models=ModelOptions(answer_model=ScriptedChatModel(["ok"], repeat_last=True)),
    )
    handler = ToolEvents()
    out = await run_loop(graph, {"user_input": "vault"}, {"callbacks": [handler]})
    assert [kind for kind, _, _ in handler.seen] == ["start", "end"]
    assert SECRET not in str(handler.seen) and REDACTED in handler.seen[1][1]
    assert out["tool_logs"][0]["result"] == f"vault db: {REDACTED}"


def test_encoded_and_case_folded_secrets_are_redacted() -> None:
    redact = Redactor([SECRET], environ={})
    forms = {
        "upper": SECRET.upper(),
        "lower": SECRET.lower(),
        "url": quote(SECRET, safe=""),
        "url-lower": quote(SECRET, safe="").lower(),
        "base64": base64.b64encode(SECRET.encode()).decode(),
        "urlsafe": base64.urlsafe_b64encode(SECRET.encode()).decode(),
    }
    for offset in range(3):  # inside a longer encoded text, at each alignment
        wrapped = ("u" * offset + f"user:{SECRET}:end").encode()
        forms[f"basic-{offset}"] = base64.b64encode(wrapped).decode()
    for name, form in forms.items():
        text = f"header x-{name}: {form} ok"
        assert redact(text) != text, name
        core = form[4:-4]
        assert core not in redact(text), name
    assert redact("nothing secret here, just text") == "nothing secret here, just text"


def test_child_and_mcp_sdk_loggers_are_redacted(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    graph = leaky_loop(monkeypatch)
    install_log_redaction()  # the environment holds the secret
    caplog.set_level(logging.DEBUG)
    names = ("agentloop.mcp.toolset", "agentloop.governance.catalog", "mcp.client.stdio", "httpx")
    sdk_2 = ("client", "httpx2", "httpcore2.http11")  # the mcp 2.x session's, its HTTP client's
    for name in (*names, *sdk_2):
        logging.getLogger(name).warning("connecting with %s", SECRET)
    try:
        raise RuntimeError(SECRET)
    except RuntimeError:
        logging.getLogger("agentloop.mcp.pools").exception("failed")
    assert len(caplog.records) == 8
    assert SECRET not in caplog.text
    assert caplog.text.count(REDACTED) == 8
    del graph


def test_server_url_path_and_query_values_are_secrets() -> None:
    url = "https://mcp.example.com/t/tok_9f8e7d6c5b4a/mcp?key=q-0123456789abcdef&v=2"
    (spec,) = load_mcp_config({"mcpServers": {"remote": {"url": url}}})
    assert {"tok_9f8e7d6c5b4a", "q-0123456789abcdef"} <= spec.secrets
    redact = Redactor(spec.secrets, environ={})
    line = redact(f"HTTP Request: POST {url} 200")
    assert "tok_9f8e7d6c5b4a" not in line and "q-0123456789abcdef" not in line


def test_a_redacted_record_can_be_copied(monkeypatch: pytest.MonkeyPatch) -> None:
    graph = leaky_loop(monkeypatch)
    install_log_redaction()
    made = logging.getLogger("agentloop.x").makeRecord(
        "agentloop.x", logging.INFO, __file__, 1, "made with %s", (SECRET,), None
    )
    copied = logging.makeLogRecord(made.__dict__)  # as structlog's formatter does
    assert made.getMessage() == copied.getMessage() == f"made with {REDACTED}"
    del graph


def test_building_a_loop_changes_no_process_wide_logging(monkeypatch: pytest.MonkeyPatch) -> None:
    factory = logging.getLogRecordFactory()
    graph = leaky_loop(monkeypatch)
    assert logging.getLogRecordFactory() is factory
    assert installed_log_redaction() is None
    del graph


def test_a_secret_exported_after_install_is_redacted_from_log_records(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    install_log_redaction()
    caplog.set_level(logging.INFO)
    monkeypatch.setenv("LATE_SERVICE_TOKEN", "late-secret-0123456789")
    logging.getLogger("agentloop.governance.catalog").info("using late-secret-0123456789")
    assert "late-secret-0123456789" not in caplog.text
    assert REDACTED in caplog.text


def test_an_apps_redact_hook_also_redacts_log_records(caplog: pytest.LogCaptureFixture) -> None:
    def hide_plums(text: str) -> str:
        return text.replace("plum-orchard-77", "[PLUM]")

    options = GovernanceOptions(redact=hide_plums)
    install_log_redaction(options.redact)
    caplog.set_level(logging.INFO)
    logging.getLogger("agentloop.nodes").info("visiting plum-orchard-77")
    assert "plum-orchard-77" not in caplog.text and "[PLUM]" in caplog.text
    del options


async def test_a_result_holding_the_loops_field_names_is_still_redacted(
    run_loop: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record's own ids are the loop's; the same keys inside a result are the tool's."""
    monkeypatch.setenv("BILLING_DB_PASSWORD", SECRET)

    @tool
    def get_ids(section: str) -> dict[str, str]:
        """Ids of a section."""
        return {"call_id": SECRET, "call_key": f"key {SECRET}", "position_key": SECRET}

    graph = create_tool_loop(
        ScriptedChatModel(
            [
                plan_reply("execute", [{"tool_name": "get_ids", "tool_kwargs": {"section": "a"}}]),
                plan_reply("response"),
            ]
        ),
        [get_ids],
        models=ModelOptions(answer_model=ScriptedChatModel(["ok"], repeat_last=True)),
    )
    out = await run_loop(graph, {"user_input": "read the ids"})
    (record,) = out["round_state"]["done_plans"]
    assert record["result"] == {
        "call_id": REDACTED,
        "call_key": f"key {REDACTED}",
        "position_key": REDACTED,
    }
    assert record["call_id"] and record["call_key"] and REDACTED not in record["call_id"]
    assert SECRET not in repr(out)
