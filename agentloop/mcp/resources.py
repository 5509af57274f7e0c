"""Reading the servers' resources: who has a URI, and the `read_resource` tool.

A URI is read on the server that listed it or whose tool result mentioned it, else on
each server that has resources, in config order. The `read_resource` tool lists the
servers' resources and templates in its description (bounded); it is rebuilt only when
a listing changed, so the planner's prompt stays the same between changes.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.tools import BaseTool

from agentloop.errors import MCPToolError, MCPTransportError
from agentloop.mcp.config import MCPServerSpec
from agentloop.mcp.decode import DecodedResult, decode_resource
from agentloop.mcp.listing import Listings, resource_catalog
from agentloop.mcp.pools import SessionPools
from agentloop.mcp.tools import READ_RESOURCE_TOOL, ResourceRead, read_resource_tool

__all__ = ["Resources"]


class Resources:
    """The resources of a toolset's servers.

    Args:
        specs: The servers, in config order.
        pools: Where the sessions live.
        listings: What the servers offer now.
    """

    def __init__(
        self, specs: Sequence[MCPServerSpec], pools: SessionPools, listings: Listings
    ) -> None:
        self._specs = list(specs)
        self._names = [spec.name for spec in self._specs]
        self._pools = pools
        self._listings = listings
        self._owner: dict[str, str] = {}
        self._tool: tuple[int, BaseTool] | None = None

    def mentioned(self, server: str, uris: Sequence[str]) -> None:
        """A result of `server` mentioned these URIs (they are read there)."""
        for uri in uris:
            self._owner[uri] = server
        if uris:
            self._listings.note_resource_server(server)

    async def read(
        self, uri: str, *, server: str | None, run_id: str, prefix: str
    ) -> DecodedResult:
        """Read a resource (on the background loop).

        Raises:
            MCPToolError: No server could read it.
        """
        if server is not None and server not in self._names:
            msg = f"unknown MCP server {server!r}; configured: {', '.join(self._names)}"
            raise MCPToolError(msg, tool=READ_RESOURCE_TOOL)
        owner = server or self._owner.get(uri)
        resource_servers = self._listings.resource_servers
        candidates = [owner] if owner else [n for n in self._names if n in resource_servers]
        failures: list[str] = []
        for candidate in candidates:
            try:
                pool = self._pools.pool_of(candidate, run_id)
                result = await pool.read_resource(candidate, uri)
            except (MCPToolError, MCPTransportError) as error:
                failures.append(f"{candidate}: {error}")
                continue
            return decode_resource(result, prefix=prefix)
        msg = f"cannot read {uri}: " + ("; ".join(failures) or "no server has resources")
        raise MCPToolError(msg, tool=READ_RESOURCE_TOOL)

    def tool(self, read: ResourceRead) -> BaseTool:
        """The `read_resource` tool with the servers' resources listed (rebuilt on change)."""
        version = self._listings.version
        if self._tool is None or self._tool[0] != version:
            offers = self._listings.offers
            for name, listing in offers.items():
                for resource in listing.resources:
                    self._owner.setdefault(str(resource.get("uri")), name)
            listed = [(name, offers[name]) for name in self._names if name in offers]
            self._tool = (version, read_resource_tool(read, resource_catalog(listed)))
        return self._tool[1]
