"""Prompts and argument completion of MCP servers (`prompts/*`, `completion/complete`).

A prompt comes back as LangChain messages, as langchain-mcp-adapters' `load_mcp_prompt`
returns them (text through the adapter's own conversion); images and audio become
content blocks, embedded resources their text, resource links their URI.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_mcp_adapters.prompts import convert_mcp_prompt_message_to_langchain_message
from mcp.types import (
    AudioContent,
    EmbeddedResource,
    GetPromptResult,
    ImageContent,
    Prompt,
    PromptMessage,
    PromptReference,
    ResourceLink,
    ResourceTemplateReference,
    TextResourceContents,
)

from agentloop.mcp.session import MCPSessionPool, every_page

__all__ = ["completion_reference", "list_prompts", "prompt_messages"]


async def list_prompts(pool: MCPSessionPool, server: str) -> list[Prompt]:
    """Every prompt of a server (all pages); none if it offers no prompts."""
    capabilities = await pool.capabilities(server)
    if capabilities is None or capabilities.prompts is None:
        return []
    return await pool.request(
        server, lambda session: every_page(session.list_prompts, "prompts"), what="listing prompts"
    )


def completion_reference(
    prompt: str | None, resource_template: str | None
) -> PromptReference | ResourceTemplateReference:
    """What a completion is asked for: a prompt's name or a template's URI (one of them).

    Raises:
        ValueError: Neither or both are given.
    """
    if (prompt is None) == (resource_template is None):
        msg = "give either `prompt` or `resource_template`"
        raise ValueError(msg)
    if prompt is not None:
        return PromptReference(type="ref/prompt", name=prompt)
    return ResourceTemplateReference(type="ref/resource", uri=str(resource_template))


def prompt_messages(result: GetPromptResult) -> list[BaseMessage]:
    """A prompt's messages as LangChain messages (user: human, assistant: AI)."""
    return [_message(message) for message in result.messages]


def _message(message: PromptMessage) -> BaseMessage:
    content = message.content
    if content.type == "text":
        return convert_mcp_prompt_message_to_langchain_message(message)
    block: dict[str, Any]
    if isinstance(content, ImageContent | AudioContent):
        block = {"type": content.type, "base64": content.data, "mime_type": content.mimeType}
    elif isinstance(content, EmbeddedResource):
        resource = content.resource
        text = resource.text if isinstance(resource, TextResourceContents) else None
        kind = resource.mimeType or "binary"
        block = {"type": "text", "text": text if text is not None else f"[{resource.uri} {kind}]"}
    elif isinstance(content, ResourceLink):
        block = {"type": "text", "text": f"[resource {content.uri}: {content.name}]"}
    else:  # pragma: no cover - every content type of the spec is handled above
        block = {"type": "text", "text": str(content)}
    if message.role == "assistant":
        return AIMessage(content=[block])
    return HumanMessage(content=[block])
