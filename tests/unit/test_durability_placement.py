"""Where the ledger lives: the LangGraph server's database, store or file, and warnings.

The server's own checkpointer needs the running server (the integration tests in
`tests/integration/test_server_durability.py` use the real one); here savers of the
same shape stand in: subclasses of `InMemorySaver`, named `InMemorySaver`, defined in a
`langgraph_runtime_inmem` module, as `langgraph dev` has it, or in another runtime
edition's module.
"""

from __future__ import annotations

import logging
import socket
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore
from langgraph.store.sqlite.aio import AsyncSqliteStore

from agentloop import (
    ConfigurationError,
    GovernanceOptions,
    ModelOptions,
    ToolPolicy,
    create_tool_loop,
)
from agentloop.durability import (
    AsyncSqliteLedger,
    CallGuard,
    LedgerKey,
    MemoryLedger,
    PostgresUriLedger,
    SqliteFileLedger,
    StoreLedger,
    is_server_checkpointer,
    ledger_for,
    server_database_uri,
)
from agentloop.durability.ledger import OWNER, LedgerOp
from agentloop.durability.server_database import (
    DEV_LEDGER_FILE,
    LEDGER_PATH_VARIABLE,
    dev_ledger_path,
)
from agentloop.durability.store import LEDGER_NAMESPACE
from agentloop.testing import ScriptedChatModel, plan_reply, planning_round

KEY = LedgerKey("thread.with.dots", "agent|call_tool", "call-1")
DEAD_OWNER = f"{OWNER.split('|')[0]}|999999999|1|deadbeef"

DevSaver: type[InMemorySaver] = type(
    "InMemorySaver", (InMemorySaver,), {"__module__": "langgraph_runtime_inmem.checkpoint"}
)
"""The shape of `langgraph dev`'s checkpointer: same class name as LangGraph's own."""
ServerSaver: type[InMemorySaver] = type(
    "InMemorySaver", (InMemorySaver,), {"__module__": "langgraph_runtime_postgres.checkpoint"}
)
"""The checkpointer of another runtime edition of the server, run without a database URI."""


@pytest.fixture(autouse=True)
def no_server_database(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Not under LangGraph Server: no `POSTGRES_URI` / `DATABASE_URI` unless a test sets one.

    `langgraph dev`'s ledger file goes to the test's folder.
    """
    monkeypatch.delenv("POSTGRES_URI", raising=False)
    monkeypatch.delenv("DATABASE_URI", raising=False)
    monkeypatch.setenv(LEDGER_PATH_VARIABLE, str(tmp_path / "dev" / "ledger.sqlite"))


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[SqliteStore]:
    conn = sqlite3.connect(tmp_path / "store.sqlite", check_same_thread=False,
                           isolation_level=None)  # fmt: skip
    store = SqliteStore(conn)
    store.setup()
    yield store
    conn.close()


def served(graph: Any, checkpointer: Any, store: Any = None) -> Any:
    """The graph as the LangGraph server runs it: a copy with its checkpointer and store."""
    return graph.copy(update={"checkpointer": checkpointer, "store": store})


@pytest.fixture
async def async_store(tmp_path: Path) -> AsyncIterator[AsyncSqliteStore]:
    """A durable store for loops run through `invoke` (in a worker thread) and `ainvoke`."""
    async with AsyncSqliteStore.from_conn_string(str(tmp_path / "store.sqlite")) as store:
        await store.setup()
        yield store


def payments_loop(
    effects: list[str], before_effect: Callable[[], None] | None = None, **options: Any
) -> Any:
    @tool
    def send_payment(amount: int) -> str:
        """Send a payment (side effect)."""
        if before_effect is not None:
            before_effect()
        effects.append(f"payment:{amount}")
        return f"paid {amount}"

    def planner(messages: list[Any]) -> str:
        if planning_round(messages) == 0:
            command = {"tool_name": "send_payment", "tool_kwargs": {"amount": 5}}
            return str(plan_reply("execute", [command]))
        return str(plan_reply("response"))

    return create_tool_loop(
        ScriptedChatModel(responder=planner),
        [send_payment],
        models=ModelOptions(answer_model=ScriptedChatModel(responder=lambda messages: "paid")),
        governance=GovernanceOptions(policies={"send_payment": ToolPolicy(idempotent=False)}),
        **options,
    )


# --- choosing the ledger ---------------------------------------------------------------


def test_server_checkpointers_are_told_by_module_not_by_name() -> None:
    assert is_server_checkpointer(ServerSaver())
    assert not is_server_checkpointer(InMemorySaver())
    assert type(ServerSaver()).__name__ == type(InMemorySaver()).__name__


def test_a_server_checkpointer_gets_the_runs_store(sqlite_store: SqliteStore) -> None:
    ledger = ledger_for(ServerSaver(), sqlite_store)
    assert isinstance(ledger, StoreLedger) and ledger.store is sqlite_store and ledger.durable
    saver = ServerSaver()
    assert isinstance(ledger_for(saver), MemoryLedger)  # no store: this process
    assert isinstance(ledger_for(saver, sqlite_store), StoreLedger)  # the next run has one
    assert isinstance(ledger_for(InMemorySaver(), sqlite_store), MemoryLedger)
    assert not StoreLedger(InMemoryStore()).durable


def test_the_servers_postgres_uri_comes_before_its_store(
    sqlite_store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URI", "postgresql+asyncpg://u@127.0.0.1:5/db")
    assert server_database_uri() == "postgresql://u@127.0.0.1:5/db"
    monkeypatch.setenv("POSTGRES_URI", "postgres://u@127.0.0.1:6/server")
    ledger = ledger_for(ServerSaver(), sqlite_store)
    assert (
        isinstance(ledger, PostgresUriLedger) and ledger.uri == "postgresql://u@127.0.0.1:6/server"
    )
    assert ledger.durable and ledger is ledger_for(ServerSaver(), sqlite_store)
    assert isinstance(ledger_for(InMemorySaver(), sqlite_store), MemoryLedger)
    monkeypatch.setenv("POSTGRES_URI", "redis://127.0.0.1:6379")  # not PostgreSQL
    monkeypatch.delenv("DATABASE_URI")
    assert server_database_uri() is None
    assert isinstance(ledger_for(ServerSaver(), sqlite_store), StoreLedger)


def test_langgraph_dev_gets_a_ledger_file_beside_its_state(
    sqlite_store: SqliteStore, tmp_path: Path
) -> None:
    ledger = ledger_for(DevSaver(), sqlite_store)
    assert isinstance(ledger, SqliteFileLedger) and ledger.durable and ledger.cross_process
    assert ledger.path == tmp_path / "dev" / "ledger.sqlite"
    assert ledger is ledger_for(DevSaver())  # one file, one ledger, whatever the saver object
    assert ledger.claim(KEY, OWNER) is None
    assert ledger.claim(KEY, DEAD_OWNER) is not None  # atomic: the first claim holds
    after_restart = SqliteFileLedger(ledger.path)
    entry = after_restart.get(KEY)
    assert entry is not None and entry.owner == OWNER and entry.outcome is None
    after_restart.close()


def test_langgraph_devs_ledger_file_is_in_its_state_folder_unless_told(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(LEDGER_PATH_VARIABLE)
    assert dev_ledger_path() == DEV_LEDGER_FILE == Path(".langgraph_api/agentloop_ledger.sqlite")


def test_a_server_database_uri_comes_before_langgraph_devs_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("POSTGRES_URI", "postgresql://u@127.0.0.1:6/server")
    assert isinstance(ledger_for(DevSaver()), PostgresUriLedger)


@pytest.mark.parametrize("variable", ["POSTGRES_URI", "DATABASE_URI"])
def test_a_server_database_that_cannot_be_reached_fails_the_build(
    variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as probe:  # a port where nothing listens
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv(variable, f"postgresql://agentloop@127.0.0.1:{port}/ledger")
    with pytest.raises(ConfigurationError) as caught:
        payments_loop([])  # compiled without a checkpointer, as a server serves it
    message = str(caught.value)
    assert message.startswith(f"{variable} names a PostgreSQL database the side-effect ledger")
    assert f"127.0.0.1:{port}" in message or "connect" in message.lower()
    assert f"correct {variable}, or unset it" in message
    payments_loop([], checkpointer=InMemorySaver())  # its own checkpointer: the URI is unused
    read_only_loop()  # nothing to guard


# --- the store ledger's claims ----------------------------------------------------------


def test_store_ledger_claims_finishes_and_forgets(sqlite_store: SqliteStore) -> None:
    ledger = StoreLedger(sqlite_store)
    assert ledger.get(KEY) is None
    assert ledger.claim(KEY, OWNER) is None
    lost = ledger.claim(KEY, "other|1|1|x")
    assert lost is not None and lost.owner == OWNER and lost.outcome is None
    ledger.release(KEY, "other|1|1|x")  # not the claimant: nothing happens
    assert ledger.get(KEY) is not None
    ledger.finish(KEY, OWNER, {"result": "paid"})
    entry = ledger.get(KEY)
    assert entry is not None and entry.outcome == {"result": "paid"}
    ledger.take_over(KEY, "other|1|1|x")
    entry = ledger.get(KEY)
    assert entry is not None and entry.owner == "other|1|1|x" and entry.outcome is None
    ledger.forget_thread(KEY.thread_id)
    assert ledger.get(KEY) is None and not sqlite_store.search((LEDGER_NAMESPACE,))


async def test_store_ledger_async_claims_and_an_unknown_outcome() -> None:
    store = InMemoryStore()
    ledger = StoreLedger(store)
    assert await ledger.operation(LedgerOp("claim", KEY, DEAD_OWNER)) is None
    settled = await CallGuard(ledger, KEY, side_effects=True, timeout_s=1.0).decide()
    assert settled is not None and settled.kind == "unknown_outcome"
    await ledger.operation(LedgerOp("finish", KEY, DEAD_OWNER, {"result": "paid"}))
    settled = await CallGuard(ledger, KEY, side_effects=True).decide()
    assert settled is not None and settled.kind == "replayed"
    await ledger.operation(LedgerOp("forget_thread", thread_id=KEY.thread_id))
    assert await ledger.operation(LedgerOp("get", KEY)) is None


async def test_an_async_sqlite_ledger_awaits_the_savers_own_connection(tmp_path: Path) -> None:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "cp.sqlite")) as saver:
        ledger = AsyncSqliteLedger(saver)
        assert await ledger.operation(LedgerOp("claim", KEY, DEAD_OWNER)) is None
        entry = await ledger.operation(LedgerOp("get", KEY))
        assert entry is not None and entry.owner == DEAD_OWNER
        with pytest.raises(RuntimeError, match="is async: run the loop with ainvoke"):
            ledger.get(KEY)  # blocking on the saver's own loop would deadlock: refused
        rows = await (await saver.conn.execute("SELECT owner FROM agentloop_ledger")).fetchall()
        assert [tuple(row) for row in rows] == [(DEAD_OWNER,)]


# --- through the loop -------------------------------------------------------------------


async def test_a_replay_after_a_restart_is_replayed_from_the_store(
    run_loop: Any, async_store: AsyncSqliteStore
) -> None:
    """The server reloads its checkpoints after a restart: a new saver object, same data."""
    effects: list[str] = []
    before = ServerSaver()
    graph = served(payments_loop(effects, interrupt_before=["execute"]), before, async_store)
    config = {"configurable": {"thread_id": "t"}}
    await run_loop(graph, {"user_input": "pay"}, config)
    paused = graph.get_state(config).config
    out = await run_loop(graph, None, config)
    assert effects == ["payment:5"] and not out["tool_logs"][0].get("replayed")
    after = ServerSaver()
    after.storage, after.writes, after.blobs = before.storage, before.writes, before.blobs
    restarted = served(payments_loop(effects, interrupt_before=["execute"]), after, async_store)
    out = await run_loop(restarted, None, paused)
    assert effects == ["payment:5"]
    assert out["tool_logs"][0]["replayed"] is True and out["answer"] == "paid"


async def test_a_lasting_checkpointer_without_a_lasting_ledger_warns(
    run_loop: Any, caplog: pytest.LogCaptureFixture
) -> None:
    graph = served(payments_loop([]), ServerSaver())
    events: list[dict[str, Any]] = []
    with caplog.at_level(logging.WARNING, logger="agentloop"):
        for thread in ("a", "b"):
            config = {"configurable": {"thread_id": thread}}
            if run_loop.entry == "invoke":
                events += graph.stream({"user_input": "x"}, config, stream_mode="custom")
            else:
                events += [e async for e in graph.astream({"user_input": "x"}, config,
                                                          stream_mode="custom")]  # fmt: skip
    warnings = [e for e in events if e["type"] == "durability_warning"]
    assert len(warnings) == 2 and warnings[0]["ledger"] == "MemoryLedger"
    assert "langgraph_runtime_postgres.checkpoint.InMemorySaver" in warnings[0]["message"]
    logged = [r for r in caplog.records if "side-effect ledger" in r.getMessage()]
    assert len(logged) == 1 and logged[0].levelno == logging.WARNING


def read_only_loop(**options: Any) -> Any:
    return create_tool_loop(
        ScriptedChatModel(responder=lambda messages: str(plan_reply("response"))),
        [],
        models=ModelOptions(
            answer_model=ScriptedChatModel(responder=lambda messages: "nothing to do")
        ),
        **options,
    )


@pytest.mark.parametrize("case", ["server_store", "in_memory_saver", "no_side_effects"])
async def test_no_ledger_warning_where_the_ledger_lasts(
    case: str, async_store: AsyncSqliteStore
) -> None:
    graph = {
        "server_store": lambda: served(payments_loop([]), ServerSaver(), async_store),
        "in_memory_saver": lambda: payments_loop([], checkpointer=InMemorySaver()),
        "no_side_effects": lambda: served(read_only_loop(), ServerSaver()),
    }[case]()
    config = {"configurable": {"thread_id": "t"}}
    events = [e async for e in graph.astream({"user_input": "x"}, config, stream_mode="custom")]
    assert [e["type"] for e in events if e["type"] == "plan_decided"]
    assert not [e for e in events if e["type"] == "durability_warning"]


# --- langgraph dev: the ledger file and the server's retries ----------------------------


def _claims(path: Path) -> list[tuple[str, str | None]]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT call_key, outcome FROM agentloop_ledger WHERE call_key NOT LIKE 'server-run:%'"
        ).fetchall()
    return [(str(key), outcome) for key, outcome in rows]


def server_config(run: str, attempt: int, thread: str = "t") -> dict[str, Any]:
    """A run's config as the LangGraph server gives it: its run id and attempt."""
    return {
        "configurable": {"thread_id": thread, "run_id": run},
        "metadata": {"run_id": run, "run_attempt": attempt},
    }


async def test_under_langgraph_dev_a_payment_is_claimed_on_disk_before_it_is_made(
    run_loop: Any, tmp_path: Path
) -> None:
    ledger_file = tmp_path / "dev" / "ledger.sqlite"
    seen: list[list[tuple[str, str | None]]] = []
    graph = served(payments_loop([], lambda: seen.append(_claims(ledger_file))), DevSaver())
    out = await run_loop(graph, {"user_input": "pay"}, server_config("run-1", 1))
    [[(key, outcome)]] = seen  # read from another connection while the tool ran
    assert outcome is None and key == out["tool_logs"][0]["position_key"]
    [(_, finished)] = _claims(ledger_file)
    assert finished is not None and "paid 5" in finished


async def test_a_run_the_server_retries_from_older_checkpoints_keeps_its_calls(
    run_loop: Any,
) -> None:
    """The retry starts from checkpoints that lack the earlier turn: it counts another turn."""
    effects: list[str] = []
    saver = DevSaver()
    await run_loop(served(payments_loop(effects), saver), {"user_input": "pay"},
                   server_config("run-0", 1))  # fmt: skip
    request = {"user_input": "pay again"}
    first = await run_loop(served(payments_loop(effects), saver), request,
                           server_config("run-1", 1))  # fmt: skip
    assert effects == ["payment:5", "payment:5"]
    stale = DevSaver()  # restarted with checkpoints written before both runs
    retried = await run_loop(served(payments_loop(effects), stale), request,
                             server_config("run-1", 2))  # fmt: skip
    assert effects == ["payment:5", "payment:5"]
    [paid], [again] = first["tool_logs"], retried["tool_logs"]
    assert again["position_key"] == paid["position_key"] and again["replayed"] is True
    another = await run_loop(served(payments_loop(effects), stale), request,
                             server_config("run-2", 1))  # fmt: skip
    assert effects == ["payment:5"] * 3  # another run of the server: a new request
    assert not another["tool_logs"][0].get("replayed")


async def ledger_warnings(run_loop: Any, graph: Any, config: dict[str, Any]) -> list[str]:
    """Run a retried attempt: the messages of its durability warnings."""
    events = await run_loop.stream(graph, {"user_input": "pay"}, config, stream_mode="custom")
    return [e["message"] for e in events if e["type"] == "durability_warning"]


@pytest.mark.parametrize(
    ("stopped_before", "attempt", "said"),
    [
        ("prepare", 2, "the server retries run run-1 (attempt 2)"),
        ("call_tool", 1, "run run-1 recorded itself in the side-effect ledger"),
    ],
)
async def test_a_retry_whose_ledger_lost_the_run_warns(
    run_loop: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    stopped_before: str,
    attempt: int,
    said: str,
) -> None:
    """The checkpoints an earlier attempt wrote outlived the ledger.

    Stopped before `prepare` (its start checkpointed), the server's count of attempts
    tells the retry; stopped before its call (past `prepare`, which recorded the run),
    the call's own run names the lost record, whatever the count (`langgraph dev` counts
    1 again after a restart).
    """
    effects: list[str] = []
    saver = DevSaver()
    await run_loop(served(payments_loop(effects), saver), {"user_input": "pay"},
                   server_config("run-1", 1), interrupt_before=[stopped_before])  # fmt: skip
    monkeypatch.setenv(LEDGER_PATH_VARIABLE, str(tmp_path / "lost" / "ledger.sqlite"))
    graph = served(payments_loop(effects), saver)
    with caplog.at_level(logging.WARNING, logger="agentloop"):
        warnings = await ledger_warnings(run_loop, graph, server_config("run-1", attempt))
    [warning] = warnings
    assert said in warning and "side-effect ledger (SqliteFileLedger)" in warning
    assert effects == ["payment:5"]  # the retry pays: the ledger cannot say it paid before
    logged = [r for r in caplog.records if said in r.getMessage()]
    assert len(logged) == 1 and logged[0].levelno == logging.WARNING


async def test_a_retry_whose_first_attempt_never_reached_the_graph_does_not_warn(
    run_loop: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker took the run and died before it started: no checkpoint, nothing to fear."""
    effects: list[str] = []
    graph = served(payments_loop(effects), DevSaver())
    with caplog.at_level(logging.WARNING, logger="agentloop"):
        warnings = await ledger_warnings(run_loop, graph, server_config("run-1", 2))
    assert warnings == [] and effects == ["payment:5"]
    assert not [r for r in caplog.records if "side-effect ledger" in r.getMessage()]
