"""What each server of a toolset offers now: its tools, resources and resource templates.

Listed once per toolset (the first time the tools are needed), fetched again when a
server announces `tools/list_changed` or `resources/list_changed`, and for a server that
failed to start, tried again in the background with a growing interval. `version`
moves only when something the planner sees changed, so its prompt stays cacheable.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.tools import BaseTool

from agentloop.errors import ConfigurationError, MCPToolError, MCPTransportError
from agentloop.mcp.config import MCPServerSpec
from agentloop.mcp.pools import SessionPools
from agentloop.mcp.sdk import ClientSession, wire
from agentloop.mcp.session import MCPSessionPool, check_unique_names

__all__ = [
    "MAX_LISTED_RESOURCES",
    "MAX_LISTED_TEMPLATES",
    "Listings",
    "ServerListing",
    "resource_catalog",
]

logger = logging.getLogger(__name__)

MAX_RETRY_INTERVAL_S = 300.0
"""The longest wait between two tries of a server that failed to start."""
MAX_LISTED_RESOURCES = 20
"""At most this many resources of a server are listed to the planner."""
MAX_LISTED_TEMPLATES = 10
"""At most this many resource templates of a server are listed to the planner."""
MAX_ENTRY_CHARS = 160
"""A listed resource's line is cut to this many characters."""


@dataclass(frozen=True)
class ServerListing:
    """What one server offers (its resources bounded to what the planner is shown).

    Each entry is as the server listed it, as wire data (`sdk.wire`).
    """

    tools: list[dict[str, Any]]
    resources: list[dict[str, Any]] = field(default_factory=list)
    templates: list[dict[str, Any]] = field(default_factory=list)
    more_resources: bool = False
    """The server has more resources (or templates) than are listed."""


class Listings:
    """The servers' current offers, kept up to date.

    Args:
        specs: The servers, in config order.
        pools: Where the sessions live.
        make_pool: Builds a short-lived pool, to list a `"scope": "run"` server.
        route: Makes the loop's tool of a server's MCP tool.
        retry_interval_s: First wait before a failed server is tried again.
    """

    def __init__(
        self,
        specs: Sequence[MCPServerSpec],
        pools: SessionPools,
        make_pool: Callable[[Sequence[MCPServerSpec]], MCPSessionPool],
        route: Callable[[str, dict[str, Any]], BaseTool],
        retry_interval_s: float,
    ) -> None:
        self.specs = list(specs)
        self._specs = {spec.name: spec for spec in self.specs}
        self._pools = pools
        self._make_pool = make_pool
        self._route = route
        self._retry_interval_s = retry_interval_s
        self.server_tools: dict[str, list[BaseTool]] = {}
        self.offers: dict[str, ServerListing] = {}
        self.resource_servers: set[str] = set()
        self.unavailable: dict[str, str] = {}
        self.version = 0
        self.discovered = False
        self._listed: dict[str, list[str]] = {}
        self._refreshing: dict[str, bool] = {}
        self._settled = threading.Condition()
        self._pending_refreshes = 0
        self._pending_since = 0.0

    # -- the first listing ---------------------------------------------------------------

    async def discover(self) -> None:
        """List every server; a failure stops every server it started.

        Raises:
            MCPTransportError: A `required` server could not be started.
            ConfigurationError: An allow list names a missing tool, or two servers
                offer a tool of the same name.
        """
        if self.discovered:
            return
        try:
            await self._discover_all()
        except BaseException:
            await self.forget()
            raise

    async def forget(self) -> None:
        """Stop every server the listing started and forget what it listed.

        The servers start, and are listed, again on next use.
        """
        await self._pools.close_started()
        for state in (self.server_tools, self.offers, self._listed, self.unavailable):
            state.clear()
        self.resource_servers.clear()
        self.discovered = False

    async def _discover_all(self) -> None:
        results = await asyncio.gather(
            *(self._list(spec.name) for spec in self.specs), return_exceptions=True
        )
        fatal: list[BaseException] = []
        for spec, result in zip(self.specs, results, strict=True):
            if isinstance(result, ConfigurationError) or (
                isinstance(result, BaseException) and spec.required
            ):
                fatal.append(result)
            elif isinstance(result, BaseException):
                self._mark_unavailable(spec.name, result)
            else:
                self._accept(spec.name, result)
        if fatal:
            raise fatal[0]
        check_unique_names(
            (spec.name, [tool.name for tool in self.server_tools.get(spec.name, [])])
            for spec in self.specs
        )
        self.discovered = True

    async def _list(self, server: str) -> ServerListing:
        spec = self._specs[server]
        if spec.scope == "toolset":
            return await _offers(self._pools.pool_of(server, ""), server)
        async with self._make_pool([spec]) as pool:
            return await _offers(pool, server)

    def _accept(self, server: str, listing: ServerListing) -> None:
        """Use a server's listing; the version moves only when it changed."""
        tools = listing.tools
        listed = [
            json.dumps(item, sort_keys=True)
            for item in [*tools, *listing.resources, *listing.templates]
        ]
        if self._listed.get(server) == listed and server in self.server_tools:
            return
        taken = {
            tool.name
            for name, others in self.server_tools.items()
            if name != server
            for tool in others
        }
        clashes = sorted(tool["name"] for tool in tools if tool["name"] in taken)
        if clashes and self.discovered:
            logger.error(
                "MCP server %r: tools %s are left out: another server offers tools of the "
                "same name",
                server,
                ", ".join(clashes),
            )
            tools = [tool for tool in tools if tool["name"] not in taken]
        self._listed[server] = listed
        self.offers[server] = listing
        if listing.resources or listing.templates:
            self.resource_servers.add(server)
        self.server_tools[server] = [self._route(server, tool) for tool in tools]
        self.version += 1

    def note_resource_server(self, server: str) -> None:
        """A result of `server` mentioned a resource: `read_resource` joins the next plan."""
        if server not in self.resource_servers:
            self.resource_servers.add(server)
            self.version += 1

    # -- servers that failed to start --------------------------------------------------------

    def _mark_unavailable(self, server: str, error: BaseException) -> None:
        reason = str(error) or type(error).__name__
        first = server not in self.unavailable
        self.unavailable[server] = reason
        if first:
            logger.warning(
                "MCP server %r is unavailable, its tools are left out for now: %s",
                server,
                reason,
            )
            self._pools.spawn(self._retry(server))

    async def _retry(self, server: str) -> None:
        """Try a server that failed to start again, with a growing interval."""
        delay = self._retry_interval_s
        while not self._pools.closed and server in self.unavailable:
            await asyncio.sleep(delay)
            try:
                listing = await self._list(server)
            except Exception as error:
                self.unavailable[server] = str(error) or type(error).__name__
                delay = min(delay * 2, MAX_RETRY_INTERVAL_S)
                continue
            del self.unavailable[server]
            self._accept(server, listing)
            logger.info("MCP server %r is available again: %d tools", server, len(listing.tools))

    # -- list_changed ----------------------------------------------------------------------

    def changed(self, server: str) -> None:
        """A `*/list_changed` notification: list the server again (once per burst)."""
        if self._refreshing.get(server) is not None:
            self._refreshing[server] = True
            return
        self._refreshing[server] = False
        with self._settled:
            if self._pending_refreshes == 0:
                self._pending_since = time.monotonic()
            self._pending_refreshes += 1
        self._pools.spawn(self._refresh(server))

    async def _refresh(self, server: str) -> None:
        try:
            while True:
                self._refreshing[server] = False
                try:
                    self._accept(server, await self._list(server))
                except Exception as error:
                    logger.warning("MCP server %r: cannot list its tools: %s", server, error)
                if not self._refreshing[server]:
                    return
        finally:
            self._refreshing.pop(server, None)
            with self._settled:
                self._pending_refreshes -= 1
                self._settled.notify_all()

    def settle(self, timeout_s: float) -> bool:
        """Wait until the lists servers announced as changed were fetched again.

        Bounded: at most until `timeout_s` after the pending refreshes began.

        Returns:
            Whether no refresh is pending anymore (False: the wait timed out).
        """
        with self._settled:
            # bounded from when the refreshes began: a server that never answers costs
            # the loop one wait, not one per plan
            left = self._pending_since + timeout_s - time.monotonic()
            return self._settled.wait_for(lambda: self._pending_refreshes == 0, max(left, 0))


async def _offers(pool: MCPSessionPool, server: str) -> ServerListing:
    """A server's tools, and its first resources and templates when it has resources."""
    tools = await pool.list_server_tools(server)
    capabilities = await pool.capabilities(server)
    if capabilities is None or capabilities.resources is None:
        return ServerListing(tools)

    async def first_pages(session: ClientSession) -> ServerListing:
        resources = wire(await session.list_resources())
        templates = wire(await session.list_resource_templates())
        listed, shapes = resources.get("resources", []), templates.get("resourceTemplates", [])
        more = (
            bool(resources.get("nextCursor") or templates.get("nextCursor"))
            or len(listed) > MAX_LISTED_RESOURCES
            or len(shapes) > MAX_LISTED_TEMPLATES
        )
        return ServerListing(
            tools,
            listed[:MAX_LISTED_RESOURCES],
            shapes[:MAX_LISTED_TEMPLATES],
            more_resources=more,
        )

    try:
        return await pool.request(server, first_pages, what="listing resources")
    except (MCPToolError, MCPTransportError) as error:
        logger.debug("MCP server %r: cannot list its resources: %s", server, error)
        return ServerListing(tools)


def resource_catalog(listed: Sequence[tuple[str, ServerListing]]) -> str:
    """The servers' resources and templates as lines for the planner (bounded, stable)."""
    lines: list[str] = []
    for server, listing in listed:
        for resource in listing.resources:
            about = resource.get("title") or resource.get("name", "")
            description = resource.get("description")
            if description and description != about:
                about = f"{about}: {description}"
            lines.append(_entry(f"{resource.get('uri')} ({server}) {about}"))
        for template in listing.templates:
            about = template.get("title") or template.get("name", "")
            if template.get("description"):
                about = f"{about}: {template['description']}"
            lines.append(_entry(f"{template.get('uriTemplate')} ({server}, template) {about}"))
        if listing.more_resources:
            lines.append(f"- ({server} has more resources than are listed here)")
    return "Resources:\n" + "\n".join(lines) if lines else ""


def _entry(text: str) -> str:
    text = " ".join(text.split())
    return "- " + (text if len(text) <= MAX_ENTRY_CHARS else text[: MAX_ENTRY_CHARS - 3] + "...")
