"""Streamable HTTP sessions that recover: a restarted server, a dropped response stream.

A real server process on 127.0.0.1 (`servers/http_streams.py`): restarted under steady
calls, the next call reopens the session at once and succeeds (a 404 for the old
session id means the request was never processed, so even a write is sent again);
a response stream dropped mid-call is resumed with `Last-Event-ID` when the server
keeps its events, and fails at once, not after the call's timeout, when the server
is gone. A write whose connection breaks after its request left (the server killed
or restarted while it runs) is `unknown_outcome` and is not sent again; one that
never left (the server is down) is a plain failure.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from third_party import OWN_SERVERS, SERVER_PYTHON, cmd

from agentloop import ModelOptions, create_tool_loop
from agentloop.errors import MCPTransportError
from agentloop.mcp import MCPToolset
from agentloop.testing import ScriptedChatModel, plan_reply

pytestmark = pytest.mark.integration


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class HttpServer:
    """`servers/http_streams.py` on one port, started again on the same port at will."""

    def __init__(self, *options: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.options = options
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [SERVER_PYTHON, str(OWN_SERVERS / "http_streams.py"), str(self.port), *self.options],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            assert self.process.poll() is None, "the HTTP MCP server exited"
            time.sleep(0.1)
        pytest.fail("the HTTP MCP server did not start")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)
            self.process.wait(timeout=30)

    def restart(self) -> None:
        """Stop it as a supervisor does (SIGTERM, SIGKILL if it lingers), start it again."""
        assert self.process is not None
        self.process.terminate()
        try:
            self.process.wait(timeout=5)  # a call it still answers holds its shutdown
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)
        self.start()


@pytest.fixture
def server() -> Iterator[HttpServer]:
    running = HttpServer()
    running.start()
    try:
        yield running
    finally:
        running.stop()


async def test_a_restarted_server_gets_a_new_session_at_once(
    server: HttpServer, tmp_path: Path
) -> None:
    target = tmp_path / "lines.txt"
    with MCPToolset({"remote": {"url": server.url}}) as toolset:
        for i in range(3):  # steady calls
            assert await toolset.call("remote", "add", {"a": i, "b": 1}) == i + 1
        await asyncio.to_thread(server.stop)
        await asyncio.to_thread(server.start)  # it knows no session now
        assert await toolset.call("remote", "add", {"a": 2, "b": 2}) == 4  # the next call
        assert toolset.sessions_opened()["remote"] == 2
        await asyncio.to_thread(server.stop)
        await asyncio.to_thread(server.start)
        # a write answered 404 was not processed: sent again on the new session, once
        assert await toolset.call("remote", "append", {"path": str(target), "line": "x"}) == (
            "appended"
        )
        assert toolset.sessions_opened()["remote"] == 3
    assert target.read_text(encoding="utf-8").splitlines() == ["x"]


def test_a_restarted_server_under_invoke(server: HttpServer) -> None:
    with MCPToolset({"remote": {"url": server.url}}) as toolset:
        assert asyncio.run(toolset.call("remote", "add", {"a": 1, "b": 1})) == 2
        server.stop()
        server.start()
        assert asyncio.run(toolset.call("remote", "add", {"a": 1, "b": 2})) == 3


async def test_a_dropped_stream_is_resumed(server: HttpServer) -> None:
    with MCPToolset({"remote": {"url": server.url}}) as toolset:
        assert await toolset.call("remote", "drops_stream", {"text": "hi"}) == "resumed: hi"
        assert toolset.sessions_opened()["remote"] == 1


async def test_a_stream_dropped_for_good_fails_at_once(server: HttpServer, tmp_path: Path) -> None:
    stalling = tmp_path / "stalling"
    with MCPToolset({"remote": {"url": server.url}}) as toolset:
        assert await toolset.call("remote", "add", {"a": 1, "b": 1}) == 2
        arguments = {"seconds": 3600, "marker": str(stalling)}
        call = asyncio.ensure_future(toolset.call("remote", "stall", arguments))
        await until_written(stalling, call)  # the call is in flight on the server
        await asyncio.to_thread(server.stop, signal.SIGKILL)  # the stream ends unanswered
        # ended by the closed connection, not by the stream's 300 s read timeout
        with pytest.raises(MCPTransportError, match="closed the connection"):
            await asyncio.wait_for(call, 60)


# -- a write cut by a broken connection ------------------------------------------------------


@pytest.fixture(params=["event stream", "json response"])
def answering(request: pytest.FixtureRequest) -> Iterator[HttpServer]:
    """The server, answering each call on an event stream or with one JSON response."""
    running = HttpServer(*(["json"] if request.param == "json response" else []))
    running.start()
    try:
        yield running
    finally:
        running.stop()


def write_loop(toolset: MCPToolset, target: Path) -> Any:
    planner = ScriptedChatModel(
        [
            plan_reply("execute", [cmd("append_then_stall", path=str(target), line="x")]),
            plan_reply("response"),
        ]
    )
    return create_tool_loop(
        planner,
        [toolset],
        models=ModelOptions(answer_model=ScriptedChatModel(["done"])),
        checkpointer=InMemorySaver(),
    )


async def until_written(target: Path, run: asyncio.Future[Any]) -> None:
    """Wait until the tool's effect took place on the server (the run still in flight)."""
    for _ in range(600):
        if target.exists():
            return
        assert not run.done(), run.result()
        await asyncio.sleep(0.05)
    raise AssertionError("the server never ran the write")


@pytest.mark.parametrize("cut", ["killed", "restarted"])
async def test_a_write_cut_by_a_broken_connection_is_unknown_and_not_sent_again(
    answering: HttpServer, run_loop: Any, tmp_path: Path, cut: str
) -> None:
    target = tmp_path / "lines.txt"
    with MCPToolset({"remote": {"url": answering.url}}) as toolset:
        graph = write_loop(toolset, target)
        thread = {"configurable": {"thread_id": f"cut-{cut}-{run_loop.entry}"}}
        run = asyncio.ensure_future(run_loop(graph, {"user_input": "append x"}, thread))
        await until_written(target, run)  # it ran on the server, which now holds the answer
        if cut == "killed":
            await asyncio.to_thread(answering.stop, signal.SIGKILL)
        else:
            await asyncio.to_thread(answering.restart)
        out = await asyncio.wait_for(run, 120)
        (record,) = out["tool_logs"]
        assert record["error_type"] == "unknown_outcome" and record["status"] == "unknown", record
        assert "must not be repeated blindly" in record["error"]
        assert record["result"]["suggestion"].startswith("The call may or may not have taken")
        if cut == "restarted":  # the server answers again: the session was reopened
            assert await toolset.call("remote", "add", {"a": 1, "b": 1}) == 2
        else:  # a write that cannot reach the server never left: a plain failure
            with pytest.raises(MCPTransportError) as raised:
                await toolset.call("remote", "append", {"path": str(target), "line": "y"})
            assert raised.value.sent is False
    assert target.read_text(encoding="utf-8").splitlines() == ["x"]  # it ran once
