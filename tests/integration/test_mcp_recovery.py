"""Streamable HTTP sessions that recover: a restarted server, a dropped response stream.

A real server process on 127.0.0.1 (`servers/http_streams.py`): restarted under steady
calls, the next call reopens the session at once and succeeds (a 404 for the old
session id means the request was never processed, so even a write is sent again);
a response stream dropped mid-call is resumed with `Last-Event-ID` when the server
keeps its events, and fails at once, not after the call's timeout, when the server
is gone.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from third_party import OWN_SERVERS

from agentloop.errors import MCPTransportError
from agentloop.mcp import MCPToolset

pytestmark = pytest.mark.integration


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class HttpServer:
    """`servers/http_streams.py` on one port, started again on the same port at will."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(OWN_SERVERS / "http_streams.py"), str(self.port)],
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


async def test_a_stream_dropped_for_good_fails_at_once(server: HttpServer) -> None:
    with MCPToolset({"remote": {"url": server.url}}) as toolset:
        assert await toolset.call("remote", "add", {"a": 1, "b": 1}) == 2
        call = asyncio.ensure_future(toolset.call("remote", "stall", {"seconds": 120}))
        await asyncio.sleep(1.0)
        started = time.monotonic()
        await asyncio.to_thread(server.stop, signal.SIGKILL)  # the stream ends unanswered
        with pytest.raises(MCPTransportError, match="closed the connection"):
            await asyncio.wait_for(call, 60)
        assert time.monotonic() - started < 10  # not the stream's 300 s read timeout
