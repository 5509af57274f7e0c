"""MCP tools as LangChain tools: metadata (annotations, server), schema, and which to offer.

A tool is read as the server listed it, as wire data (`sdk.wire`: `inputSchema`,
`annotations.readOnlyHint`, ...), the same on either SDK major.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool

from agentloop.governance.artifacts import ATTACHMENTS_ARTIFACT, RESULT_ARTIFACT
from agentloop.governance.call_config import call_info
from agentloop.governance.policy import MCP_HINTS
from agentloop.mcp.decode import DecodedResult

__all__ = [
    "MCP_HINTS",
    "READ_RESOURCE_TOOL",
    "langchain_tool",
    "mcp_tool_annotations",
    "offered_tools",
    "read_resource_tool",
    "result_text",
    "tool_output",
    "tool_title",
]

logger = logging.getLogger(__name__)

READ_RESOURCE_TOOL = "read_resource"
"""The built-in tool that reads a resource a result mentions (when a server has resources)."""

ResourceRead = Callable[[str, str | None, str, str], Awaitable[DecodedResult]]
"""Reads a resource: `(uri, server, run_id, attachment prefix)`."""


def mcp_tool_annotations(tool: BaseTool) -> dict[str, bool]:
    """Return the MCP hints (`readOnlyHint`, `destructiveHint`, ...) a tool carries.

    Hints a server left out are absent: the loop then applies the MCP spec's defaults
    (not read-only, destructive, not idempotent, open-world).

    Args:
        tool: A tool of an `MCPToolset` or `MCPSessionPool`, or any tool.

    Returns:
        The hints present in `tool.metadata`; empty for a tool without them.
    """
    metadata = tool.metadata or {}
    return {key: metadata[key] for key in MCP_HINTS if isinstance(metadata.get(key), bool)}


def tool_title(tool: dict[str, Any]) -> str | None:
    """A listed tool's display name: its `title`, else `annotations.title` (the spec's order)."""
    annotations = tool.get("annotations") or {}
    title = tool.get("title") or annotations.get("title")
    return title if isinstance(title, str) and title else None


def _metadata(server: str, tool: dict[str, Any]) -> dict[str, Any]:
    metadata: dict[str, Any] = {"mcp_server": server, "mcp_tool": tool["name"]}
    annotations = tool.get("annotations") or {}
    for key in MCP_HINTS:
        value = annotations.get(key)
        if isinstance(value, bool):
            metadata[key] = value
    if title := tool_title(tool):
        metadata["title"] = title
    if tool.get("_meta"):
        metadata["_meta"] = tool["_meta"]
    return metadata


def offered_tools(server: str, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tools the loop can call: a tool that requires task augmentation is left out.

    The loop calls tools with plain `tools/call` requests; a server answers one for a
    task-only tool with an error, so offering it to the planner would only waste a round.
    """
    kept = []
    for tool in tools:
        if (tool.get("execution") or {}).get("taskSupport") == "required":
            logger.info(
                "MCP server %r: tool %r is left out: it can only run as a task, "
                "which this client does not request",
                server,
                tool["name"],
            )
            continue
        kept.append(tool)
    return kept


def result_text(value: Any) -> str:
    """A result as the text content of a LangChain tool message."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def langchain_tool(
    server: str,
    tool: dict[str, Any],
    coroutine: Callable[..., Awaitable[Any]],
    *,
    response_format: Literal["content", "content_and_artifact"] = "content",
    policy: dict[str, Any] | None = None,
) -> StructuredTool:
    """An MCP tool as an async LangChain tool.

    Args:
        server: The server's name (`metadata["mcp_server"]`).
        tool: The tool as the server lists it (wire data).
        coroutine: Called with the tool's arguments (and `config`, if it takes one).
        response_format: As for `StructuredTool`.
        policy: The server config's policy of this tool (`metadata["agentloop"]`).
    """
    metadata = _metadata(server, tool)
    if policy:
        metadata["agentloop"] = dict(policy)
    return StructuredTool(
        name=tool["name"],
        description=tool.get("description") or tool_title(tool) or tool["name"],
        args_schema=tool.get("inputSchema") or {"type": "object", "properties": {}},
        coroutine=coroutine,
        response_format=response_format,
        metadata=metadata,
    )


def tool_output(decoded: DecodedResult) -> tuple[str, dict[str, Any]]:
    """Content (text) and artifact (the data, and the media kept aside) of a result."""
    artifact: dict[str, Any] = {RESULT_ARTIFACT: decoded.value}
    if decoded.attachments:
        artifact[ATTACHMENTS_ARTIFACT] = decoded.attachments
    return result_text(decoded.value), artifact


def read_resource_tool(read: ResourceRead, catalog: str = "") -> BaseTool:
    """The built-in read-only tool that reads a resource by URI.

    Args:
        read: Reads the resource on the toolset's sessions.
        catalog: The servers' resources and templates, appended to its description.
    """

    async def read_resource(
        config: RunnableConfig, uri: str, server: str | None = None
    ) -> tuple[str, dict[str, Any]]:
        info = call_info(config)
        position = info.get("place", "") if info else ""
        prefix = f"{READ_RESOURCE_TOOL}:{position}" if position else READ_RESOURCE_TOOL
        decoded = await read(uri, server, info["run_id"] if info else "", prefix)
        return tool_output(decoded)

    return StructuredTool.from_function(
        coroutine=read_resource,
        name=READ_RESOURCE_TOOL,
        description=(
            "Read a resource of an MCP server by its URI: one listed here, one a tool "
            "result mentioned (such as file:///... or demo://...), or a template's URI "
            "with its {placeholders} filled in. `server` is only needed when several "
            "servers could have it." + (f"\n{catalog}" if catalog else "")
        ),
        response_format="content_and_artifact",
        metadata={"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False},
    )
