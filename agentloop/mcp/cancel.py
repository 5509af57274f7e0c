"""Cancelling a request on the server (`notifications/cancelled`, MCP spec 2025-06-18).

The mcp SDK cancels a request only locally: it stops waiting, and the server goes on
running it. The spec's way to stop it there is a `notifications/cancelled` naming the
request's id, which the SDK's `send_request` takes from its session without saying.
`next_request_id` reads it (the one place that touches the SDK's private counter,
pinned by a contract test).
"""

from __future__ import annotations

import asyncio
import logging

from mcp import ClientSession
from mcp.types import CancelledNotification, CancelledNotificationParams, ClientNotification

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


def next_request_id(session: ClientSession) -> int:
    """The id the session's next request will take.

    Read it in the same step as the request is sent (no `await` in between), so that no
    other request takes it first.
    """
    return int(session._request_id)  # the SDK's own counter: see the module docstring


async def send_cancelled(session: ClientSession, request_id: int, reason: str) -> bool:
    """Tell the server to stop a request; returns whether the notification was sent."""
    notification = ClientNotification(
        CancelledNotification(
            params=CancelledNotificationParams(requestId=request_id, reason=reason)
        )
    )
    try:
        await asyncio.wait_for(session.send_notification(notification), NOTIFY_TIMEOUT_S)
    except Exception as error:  # the link is gone: the server cannot be running it for long
        logger.debug("could not send the cancellation of request %s: %s", request_id, error)
        return False
    return True
