"""A question of an MCP server that waits for its answer holds up nothing else.

The mcp SDK 1.x's `ClientSession` answers each request of the server inside the loop that
reads the session; `AnsweringSession` answers elicitation and sampling requests apart
from it (the one part of the SDK it overrides, pinned here): a second question, and a
cancellation of the first, arrive while the first still waits. (mcp 2.x answers each
request apart itself, and a request the server cancelled is not answered at all.)
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp.shared.message import SessionMessage
from mcp.types import (
    ElicitResult,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
)

from agentloop.mcp.sdk import MCP_MAJOR, AnsweringSession

pytestmark = pytest.mark.skipif(MCP_MAJOR >= 2, reason="the mcp 1.x session's part")


def question(request_id: int, text: str) -> SessionMessage:
    params = {"message": text, "requestedSchema": {"type": "object", "properties": {}}}
    request = JSONRPCRequest(
        jsonrpc="2.0", id=request_id, method="elicitation/create", params=params
    )
    return SessionMessage(JSONRPCMessage(request))


async def test_a_question_waiting_for_its_answer_holds_up_nothing_else() -> None:
    to_client, client_reads = anyio.create_memory_object_stream[SessionMessage | Exception](8)
    client_writes, to_server = anyio.create_memory_object_stream[SessionMessage](8)
    asked: list[str] = []
    release = anyio.Event()

    async def elicit(context: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        if params.message != "second":
            await release.wait()  # a person takes their time
        return ElicitResult(action="accept", content={"said": params.message})

    with anyio.fail_after(10):
        async with AnsweringSession(client_reads, client_writes, elicitation_callback=elicit):
            for request_id, text in ((1, "first"), (2, "second"), (3, "dropped")):
                await to_client.send(question(request_id, text))
            second = (await to_server.receive()).message.root  # while the first waits
            assert isinstance(second, JSONRPCResponse) and second.id == 2
            assert second.result == {"action": "accept", "content": {"said": "second"}}

            cancel = {"requestId": 3, "reason": "the tool stopped"}
            notification = JSONRPCNotification(
                jsonrpc="2.0", method="notifications/cancelled", params=cancel
            )
            await to_client.send(SessionMessage(JSONRPCMessage(notification)))
            dropped = (await to_server.receive()).message.root
            assert isinstance(dropped, JSONRPCError) and dropped.id == 3

            release.set()
            first = (await to_server.receive()).message.root
            assert isinstance(first, JSONRPCResponse) and first.id == 1
            assert first.result == {"action": "accept", "content": {"said": "first"}}
    assert asked == ["first", "second", "dropped"]
    for stream in (to_client, to_server):
        await stream.aclose()
