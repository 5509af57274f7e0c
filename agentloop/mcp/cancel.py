"""Cancelling a request on the server (`notifications/cancelled`, MCP spec 2025-06-18).

The mcp SDK 1.x cancels a request only locally: it stops waiting, and the server goes on
running it (2.x sends the notification itself once the caller stops waiting). The spec's
way to stop it there while the answer is still awaited is a `notifications/cancelled`
naming the request's id, which the SDK's `send_request` takes from its session without
saying; `next_request_id` (of `agentloop.mcp.sdk`) reads it.
"""

from __future__ import annotations

import asyncio
import logging

from agentloop.mcp.sdk import ClientSession, cancelled_notification, next_request_id

__all__ = ["CANCEL_GRACE_S", "CANCEL_REASON", "next_request_id", "send_cancelled"]

logger = logging.getLogger(__name__)

CANCEL_GRACE_S = 5.0
"""How long a cancelled request may take to end on the server (its answer, usually an
error, says so) before it is given up locally; the same request sent again (a retry)
waits for this, the caller does not."""
CANCEL_REASON = "cancelled by the client: the call timed out or its run was cancelled"
"""The `reason` sent with a cancellation."""
NOTIFY_TIMEOUT_S = 2.0
"""How long sending the cancellation itself may take."""


async def send_cancelled(session: ClientSession, request_id: int, reason: str) -> bool:
    """Tell the server to stop a request; returns whether the notification was sent."""
    notification = cancelled_notification(request_id, reason)
    try:
        await asyncio.wait_for(session.send_notification(notification), NOTIFY_TIMEOUT_S)
    except Exception as error:  # the link is gone: the server cannot be running it for long
        logger.debug("could not send the cancellation of request %s: %s", request_id, error)
        return False
    return True
