"""`langgraph dev` (the in-memory LangGraph server) serves the exported graphs.

The server runs on a loopback port as a real subprocess and is driven with
`langgraph-sdk`, as LangGraph Studio drives it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_until_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    import httpx

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"langgraph dev exited early:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(f"{url}/ok", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    pytest.fail(f"langgraph dev did not start in time:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    langgraph = shutil.which("langgraph", path=str(Path(sys.executable).parent))
    assert langgraph, "langgraph-cli is a dev dependency"
    port = free_port()
    log = tmp_path_factory.mktemp("studio") / "server.log"
    env = {
        **os.environ,
        "LANGSMITH_TRACING": "false",
        "LANGCHAIN_TRACING_V2": "false",
        "LANGGRAPH_NO_VERSION_CHECK": "true",
    }
    env.pop("AGENTLOOP_MODEL", None)
    with log.open("wb") as output:
        process = subprocess.Popen(
            [
                langgraph,
                "dev",
                "--port",
                str(port),
                "--host",
                "127.0.0.1",
                "--no-browser",
                "--no-reload",
            ],
            cwd=ROOT,
            stdout=output,
            stderr=subprocess.STDOUT,
            env=env,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(url, process, log)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    assert "Traceback" not in log.read_text(), log.read_text()[-3000:]


async def test_studio_runs_the_loop(server: str) -> None:
    from langgraph_sdk import get_client

    client = get_client(url=server)
    assistants = await client.assistants.search(graph_id="tool_loop")
    assert assistants, "tool_loop is exported"
    assistant = assistants[0]
    schemas = await client.assistants.get_schemas(assistant["assistant_id"])
    context = schemas["context_schema"]["properties"]
    assert {"model", "max_rounds", "concurrency", "plan_mode", "keep_tool_results"} <= set(context)
    assert context["max_rounds"].get("description")
    graph = await client.assistants.get_graph(assistant["assistant_id"])
    assert {"plan", "execute", "answer"} <= {node["id"] for node in graph["nodes"]}

    thread = await client.threads.create()
    events: list[dict[str, Any]] = []
    async for part in client.runs.stream(
        thread["thread_id"],
        assistant["assistant_id"],
        input={"user_input": "How long is the Lumen Bay tram network, and how many km per line?"},
        stream_mode=["custom", "values"],
    ):
        if part.event == "custom":
            events.append(part.data)
    types = {event["type"] for event in events}
    assert {"plan_decided", "tool_started", "tool_completed", "round_completed"} <= types
    state = await client.threads.get_state(thread["thread_id"])
    values = state["values"]
    assert values["round_state"]["round_index"] == 2
    assert "10.5" in values["answer"]
    assert all(record["success"] for record in values["tool_logs"])


async def test_studio_interrupt_before_execute(server: str) -> None:
    from langgraph_sdk import get_client

    client = get_client(url=server)
    thread = await client.threads.create()
    await client.runs.wait(
        thread["thread_id"],
        "tool_loop",
        input={"user_input": "trams?"},
        interrupt_before=["execute"],
    )
    state = await client.threads.get_state(thread["thread_id"])
    assert state["next"] == ["execute"]
    commands = state["values"]["decision"]["execution_commands"]
    assert commands[0]["tool_name"] == "search_documents"
    final = await client.runs.wait(thread["thread_id"], "tool_loop", input=None)
    assert isinstance(final, dict)
    assert final["round_state"]["round_index"] == 2


async def test_studio_per_run_context(server: str) -> None:
    from langgraph_sdk import get_client

    client = get_client(url=server)
    thread = await client.threads.create()
    final = await client.runs.wait(
        thread["thread_id"],
        "tool_loop",
        input={"user_input": "trams?"},
        context={"max_rounds": 1},
    )
    assert isinstance(final, dict)
    assert final["round_state"]["round_index"] == 1


async def test_studio_runs_the_loop_in_native_plan_mode(server: str) -> None:
    from langgraph_sdk import get_client

    client = get_client(url=server)
    thread = await client.threads.create()
    final = await client.runs.wait(
        thread["thread_id"],
        "tool_loop",
        input={"user_input": "How long is the Lumen Bay tram network, and how many km per line?"},
        context={"plan_mode": "native"},  # the context form's plan_mode field
    )
    assert isinstance(final, dict)
    assert final["decision"]["next_action"] == "response"
    assert final["round_state"]["round_index"] == 2
    assert [record["tool_name"] for record in final["tool_logs"]] == [
        "search_documents",
        "calculate",
    ]
    assert all(record["success"] for record in final["tool_logs"])
    assert "10.5" in final["answer"]


async def test_studio_follow_up_takes_its_city_from_the_conversation(server: str) -> None:
    from langgraph_sdk import get_client

    client = get_client(url=server)
    thread = await client.threads.create()
    question = "How long is the Lumen Bay tram network, and how many km per line?"
    for text in (question, "And what is the weather there?"):
        final = await client.runs.wait(
            thread["thread_id"],
            "tool_loop",
            input={"messages": [{"role": "human", "content": text}]},
        )
    assert isinstance(final, dict)
    assert [(r["tool_name"], r["kwargs"]) for r in final["tool_logs"]] == [
        ("get_weather", {"city": "Lumen Bay"})
    ]
    assert "clear, 18 °C in Lumen Bay" in final["answer"]
    assert final["messages"][-1]["content"] == final["answer"]


async def test_studio_sub_agent_graph(server: str) -> None:
    from langgraph_sdk import get_client

    client = get_client(url=server)
    thread = await client.threads.create()
    agent_events: list[str] = []
    async for part in client.runs.stream(
        thread["thread_id"],
        "subagent",
        input={"user_input": "How long is the Lumen Bay tram network, and how many km per line?"},
        stream_mode="custom",
    ):
        if part.event == "custom" and part.data.get("agent") == "ask_researcher":
            agent_events.append(part.data["type"])
    assert agent_events[0] == "agent_started" and agent_events[-1] == "agent_completed"
    state = await client.threads.get_state(thread["thread_id"])
    values = state["values"]
    # the coordinator's answer is the researcher's answer, word for word
    [researched] = values["action_results"].values()
    assert values["answer"] == researched
    assert values["answer"].startswith("Here is what the tools found:")
    assert "10.5" in values["answer"]
    assert set(values["usage"]) == {"coordinator", "researcher"}


async def test_studio_messages_stream_shows_the_answer_not_the_plan(server: str) -> None:
    from langgraph_sdk import get_client

    client = get_client(url=server)
    thread = await client.threads.create()
    texts: list[str] = []
    nodes: set[str] = set()
    async for part in client.runs.stream(
        thread["thread_id"],
        "tool_loop",
        input={"user_input": "How long is the Lumen Bay tram network, and how many km per line?"},
        stream_mode="messages-tuple",
    ):
        if part.event == "messages":
            message, metadata = part.data
            nodes.add(metadata.get("langgraph_node", ""))
            texts.append(str(message.get("content", "")))
    streamed = "".join(texts)
    assert "10.5" in streamed
    assert "next_action" not in streamed and "execution_commands" not in streamed
    assert "plan" not in nodes
