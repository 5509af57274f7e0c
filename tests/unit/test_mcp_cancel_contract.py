"""The one private part of the mcp SDK the client reads: the id of the next request.

Cancelling a request on the server (`notifications/cancelled`) needs the id the SDK's
`send_request` gave it; `next_request_id` reads it from the session's counter. This
pins that reading to what the SDK really sends.
"""

from __future__ import annotations

import anyio

from agentloop.mcp.cancel import next_request_id, send_cancelled
from agentloop.mcp.sdk import ClientSession, SessionMessage, message_root, types


async def test_next_request_id_is_the_id_the_sdk_sends() -> None:
    to_client, client_reads = anyio.create_memory_object_stream[SessionMessage | Exception](8)
    client_writes, to_server = anyio.create_memory_object_stream[SessionMessage](8)
    async with ClientSession(client_reads, client_writes) as session:
        seen: list[int] = []
        async with anyio.create_task_group() as group:

            async def ping() -> None:
                seen.append(next_request_id(session))
                await session.send_ping()

            for _ in range(3):
                group.start_soon(ping)
            sent = [await to_server.receive() for _ in range(3)]
            ids = [message_root(message).id for message in sent]
            assert all(isinstance(message_root(message), types.JSONRPCRequest) for message in sent)
            assert sorted(ids) == sorted(seen) and len(set(ids)) == 3
            group.cancel_scope.cancel()
        assert await send_cancelled(session, ids[0], "timed out")
        cancelled = message_root(await to_server.receive())
        while cancelled.params.get("reason") != "timed out":  # mcp 2.x told its own first
            cancelled = message_root(await to_server.receive())
        assert isinstance(cancelled, types.JSONRPCNotification)
        assert cancelled.method == "notifications/cancelled"
        assert cancelled.params == {"requestId": ids[0], "reason": "timed out"}
    for stream in (to_client, to_server):
        await stream.aclose()
