"""`agentloop run` against a real OpenAI-compatible endpoint on loopback that fails.

The endpoint is a small HTTP server in this process; the command is a subprocess using
`langchain-openai` as a user would (`--model openai:...`, `OPENAI_BASE_URL`).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

ERROR_PREFIX = "agentloop: error: "


class FailingEndpoint:
    """Answers every chat completion with one HTTP error, and counts the requests."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        self.message = message
        self.requests = 0
        self.plan_requests = 0
        """Requests of the planner (the answer may be asked beside the first plan)."""
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                endpoint.requests += 1
                endpoint.plan_requests += b"next_action" in body
                body = json.dumps(
                    {"error": {"message": endpoint.message, "type": "error", "code": None}}
                ).encode()
                self.send_response(endpoint.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.send_header("retry-after", "0")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def endpoint() -> Iterator[Any]:
    opened: list[FailingEndpoint] = []

    def start(status: int, message: str) -> FailingEndpoint:
        opened.append(FailingEndpoint(status, message))
        return opened[-1]

    yield start
    for server in opened:
        server.close()


def refused_url() -> str:
    """The URL of a loopback port nobody listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def run(url: str, tmp_path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    forced_terminal = ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")
    environment = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("OPENAI_") and k not in forced_terminal
    }
    environment.pop("AGENTLOOP_MODEL", None)
    environment.update(OPENAI_BASE_URL=url, OPENAI_API_KEY="sk-test-not-a-real-key")
    # the timeout only bounds a hang: the CLI gives up on its own long before
    return subprocess.run(
        [sys.executable, "-m", "agentloop.cli", "run", "--model", "openai:gpt-test",
         *flags, "How long is the tram network?"],
        capture_output=True, text=True, timeout=240, cwd=tmp_path, env=environment,
        check=False,
    )  # fmt: skip


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(ERROR_PREFIX)]


def test_rejected_credentials_fail_fast_with_exit_2(endpoint: Any, tmp_path: Path) -> None:
    server = endpoint(401, "Incorrect API key provided: sk-test-***")
    done = run(server.url, tmp_path, "--quiet")
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(ERROR_PREFIX + "planner model failed: ")
    assert "rejected the credentials" in lines[0]
    assert lines[0].count("Incorrect API key provided") == 1
    assert "Traceback" not in done.stderr
    # no retry can fix a rejected key: the planner is asked once (and the answer, started
    # beside it for a question that names no tool, once)
    assert server.plan_requests == 1
    assert server.requests <= 2


def test_rejected_credentials_with_progress_say_the_cause_once(
    endpoint: Any, tmp_path: Path
) -> None:
    server = endpoint(401, "Incorrect API key provided: sk-test-***")
    done = run(server.url, tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert len(error_lines(done.stderr)) == 1, done.stderr
    assert done.stderr.count("Incorrect API key provided") == 1, done.stderr
    assert "Traceback" not in done.stderr


def test_unknown_model_fails_fast_with_exit_2(endpoint: Any, tmp_path: Path) -> None:
    server = endpoint(404, "The model `gpt-test` does not exist")
    done = run(server.url, tmp_path, "--quiet")
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert "no such model" in line and "does not exist" in line
    assert server.plan_requests == 1
    assert server.requests <= 2


def test_rate_limit_exits_4_after_the_retries(endpoint: Any, tmp_path: Path) -> None:
    server = endpoint(429, "Rate limit reached for requests")
    done = run(server.url, tmp_path, "--quiet")
    assert done.returncode == 4, done.stderr
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith(ERROR_PREFIX + "planner model failed after ")
    assert "rate limited" in line and line.count("Rate limit reached") == 1
    assert server.requests > 1  # retried before giving up


def test_unreachable_endpoint_exits_4(tmp_path: Path) -> None:
    done = run(refused_url(), tmp_path, "--quiet")
    assert done.returncode == 4, done.stderr
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert "cannot be reached" in line


def test_json_holds_the_error_and_verbose_shows_the_traceback(
    endpoint: Any, tmp_path: Path
) -> None:
    server = endpoint(401, "Incorrect API key provided: sk-test-***")
    done = run(server.url, tmp_path, "--quiet", "--json")
    assert done.returncode == 2, done.stderr
    document = json.loads(done.stdout)
    assert document["status"] == "planner_failed"
    assert "rejected the credentials" in document["error"]
    assert len(done.stderr.splitlines()) == 1
    done = run(server.url, tmp_path, "--quiet", "--verbose")
    assert done.returncode == 2
    assert "Traceback (most recent call last)" in done.stderr
    assert done.stderr.splitlines()[-1].startswith(ERROR_PREFIX)
