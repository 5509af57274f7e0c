from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from processes import server_pids, wait_until_gone

from agentloop.cli.servers import bundled_servers_config
from agentloop.mcp import (
    MCPSessionPool,
    MCPToolError,
    MCPTransportError,
    load_mcp_config,
    mcp_tool_annotations,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc"),
]


@pytest.fixture
def notes_file(tmp_path: Path) -> Path:
    return tmp_path / "notes.jsonl"


@pytest.fixture
async def pool(notes_file: Path) -> AsyncIterator[MCPSessionPool]:
    async with MCPSessionPool(load_mcp_config(bundled_servers_config(notes_file))) as pool:
        yield pool


async def test_list_tools_with_annotations(pool: MCPSessionPool) -> None:
    tools = {tool.name: tool for tool in await pool.list_tools()}

    assert set(tools) == {
        "search_documents",
        "read_document",
        "calculate",
        "save_note",
        "list_notes",
        "read_note",
    }
    assert tools["search_documents"].metadata is not None
    assert tools["search_documents"].metadata["mcp_server"] == "docs"
    assert mcp_tool_annotations(tools["search_documents"]) == {
        "readOnlyHint": True,
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": False,
    }
    assert mcp_tool_annotations(tools["calculate"])["readOnlyHint"] is True
    save = mcp_tool_annotations(tools["save_note"])
    assert (save["readOnlyHint"], save["destructiveHint"], save["idempotentHint"]) == (
        False,
        True,
        False,
    )
    assert pool.sessions_opened == {"docs": 1, "calculator": 1, "notes": 1}


async def test_allow_and_deny_filter_tools(notes_file: Path) -> None:
    config = bundled_servers_config(notes_file)
    config["mcpServers"]["notes"]["deny"] = ["save_note"]
    config["mcpServers"]["docs"]["allow"] = ["search_documents"]
    del config["mcpServers"]["calculator"]

    async with MCPSessionPool(load_mcp_config(config)) as pool:
        names = {tool.name for tool in await pool.list_tools()}

    assert names == {"search_documents", "list_notes", "read_note"}


async def test_search_and_read_documents(pool: MCPSessionPool) -> None:
    hits = await pool.call_tool("docs", "search_documents", {"query": "Lumen Bay tram lines"})

    assert hits[0]["doc_id"] == "lumen-bay-tram-network"
    assert set(hits[0]) == {"doc_id", "title", "score", "snippet"}
    assert hits[0]["score"] > hits[-1]["score"] or len(hits) == 1
    doc = await pool.call_tool("docs", "read_document", {"doc_id": hits[0]["doc_id"]})
    assert doc["title"] == "The Lumen Bay tram network"
    assert "61 stops" in doc["text"]


async def test_langchain_tool_calls_through_the_pool(pool: MCPSessionPool) -> None:
    tools = {tool.name: tool for tool in await pool.list_tools()}

    hits = await tools["search_documents"].ainvoke({"query": "lantern festival", "limit": 1})

    assert [hit["doc_id"] for hit in hits] == ["lumen-bay-lantern-festival"]
    assert pool.sessions_opened["docs"] == 1


async def test_calculate(pool: MCPSessionPool) -> None:
    assert await pool.call_tool("calculator", "calculate", {"expression": "2*(3+4)"}) == {
        "expression": "2*(3+4)",
        "result": 14,
    }
    value = await pool.call_tool("calculator", "calculate", {"expression": "round(sqrt(2), 3)"})
    assert value["result"] == 1.414


async def test_save_note_is_idempotent_by_key(pool: MCPSessionPool, notes_file: Path) -> None:
    args = {"title": "Tram fare", "body": "2.10 euros", "idempotency_key": "k-1"}

    first = await pool.call_tool("notes", "save_note", args)
    second = await pool.call_tool("notes", "save_note", args)

    assert first["deduplicated"] is False
    assert second["deduplicated"] is True
    assert second["id"] == first["id"]
    lines = notes_file.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1
    assert json.loads(lines[0])["title"] == "Tram fare"
    listed = await pool.call_tool("notes", "list_notes", {})
    assert [note["id"] for note in listed] == [first["id"]]
    note = await pool.call_tool("notes", "read_note", {"note_id": first["id"]})
    assert note["body"] == "2.10 euros"


@pytest.mark.parametrize(
    ("server", "tool", "arguments", "message"),
    [
        ("docs", "read_document", {"doc_id": "atlantis"}, "unknown doc_id 'atlantis'"),
        ("calculator", "calculate", {"expression": "2 +* 3"}, "invalid expression"),
        ("calculator", "calculate", {"expression": "__import__('os')"}, "unsupported syntax"),
        ("calculator", "calculate", {"expression": "9**9**9"}, "exponents are limited"),
        ("notes", "read_note", {"note_id": "nope"}, "unknown note_id 'nope'"),
    ],
)
async def test_tool_errors_raise_mcp_tool_error(
    pool: MCPSessionPool, server: str, tool: str, arguments: dict[str, str], message: str
) -> None:
    with pytest.raises(MCPToolError, match=message) as caught:
        await pool.call_tool(server, tool, arguments)

    assert (caught.value.server, caught.value.tool) == (server, tool)
    assert pool.sessions_opened[server] == 1  # an error result keeps the session


async def test_concurrent_calls_share_one_process(pool: MCPSessionPool) -> None:
    results = await asyncio.gather(
        *(pool.call_tool("calculator", "calculate", {"expression": f"{i} * 10"}) for i in range(10))
    )

    assert [r["result"] for r in results] == [i * 10 for i in range(10)]
    assert pool.sessions_opened["calculator"] == 1
    assert len(server_pids("calculator")) == 1


async def test_killed_server_is_restarted(pool: MCPSessionPool) -> None:
    await pool.call_tool("calculator", "calculate", {"expression": "1+1"})
    (old_pid,) = server_pids("calculator")

    os.kill(old_pid, signal.SIGKILL)
    await wait_until_gone(old_pid)
    try:
        first = await pool.call_tool("calculator", "calculate", {"expression": "2+2"})
    except MCPTransportError:
        pass
    else:
        assert first["result"] == 4
    second = await pool.call_tool("calculator", "calculate", {"expression": "3+3"})

    assert second["result"] == 6
    assert pool.sessions_opened["calculator"] == 2
    (new_pid,) = server_pids("calculator")
    assert new_pid != old_pid


async def test_call_in_flight_when_server_dies_raises_transport_error(
    pool: MCPSessionPool,
) -> None:
    await pool.call_tool("calculator", "calculate", {"expression": "1"})
    (pid,) = server_pids("calculator")
    os.kill(pid, signal.SIGSTOP)  # the call below waits for an answer that never comes
    call = asyncio.create_task(pool.call_tool("calculator", "calculate", {"expression": "2"}))
    await asyncio.sleep(0.2)
    os.kill(pid, signal.SIGKILL)

    with pytest.raises(MCPTransportError, match="'calculator'"):
        await asyncio.wait_for(call, 10)
    assert (await pool.call_tool("calculator", "calculate", {"expression": "5"}))["result"] == 5


async def test_aclose_stops_every_process(notes_file: Path) -> None:
    pool = MCPSessionPool(load_mcp_config(bundled_servers_config(notes_file)))
    await pool.list_tools()
    assert all(len(server_pids(m)) == 1 for m in ("docsearch", "calculator", "notes"))

    await pool.aclose()
    await pool.aclose()  # idempotent

    assert all(server_pids(m) == [] for m in ("docsearch", "calculator", "notes"))
    with pytest.raises(RuntimeError, match="closed"):
        await pool.call_tool("calculator", "calculate", {"expression": "1"})


async def test_child_environment_has_no_parent_secrets(
    monkeypatch: pytest.MonkeyPatch, notes_file: Path
) -> None:
    monkeypatch.setenv("AGENTLOOP_TEST_SECRET", "hunter2")
    config = bundled_servers_config(notes_file)
    async with MCPSessionPool(load_mcp_config(config)) as pool:
        await pool.call_tool("calculator", "calculate", {"expression": "1"})
        (pid,) = server_pids("calculator")
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")

    assert not [v for v in environ if v.startswith(b"AGENTLOOP_TEST_SECRET=")]
    assert any(v.startswith(b"PATH=") for v in environ)


async def test_unstartable_servers_raise_transport_error() -> None:
    specs = load_mcp_config(
        {
            "missing": {"command": "/nonexistent/agentloop-server", "args": []},
            "crashes": {"command": sys.executable, "args": ["-m", "agentloop.cli.servers.absent"]},
            "offline": {"url": "http://127.0.0.1:9/mcp"},
        }
    )
    async with MCPSessionPool(specs, startup_timeout=10) as pool:
        for name in ("missing", "crashes", "offline"):
            with pytest.raises(MCPTransportError, match=f"'{name}' could not be started"):
                await pool.call_tool(name, "anything", {})
        assert pool.sessions_opened == {"missing": 0, "crashes": 0, "offline": 0}
