"""Prompts and argument completion of MCP servers (`prompts/*`, `completion/complete`).

A prompt comes back as LangChain messages, as langchain-mcp-adapters' `load_mcp_prompt`
returns them (text as the message's text); images and audio become content blocks,
embedded resources their text, resource links their URI.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from agentloop.mcp.sdk import types, wire
from agentloop.mcp.session import MCPSessionPool, every_page

__all__ = ["completion_reference", "list_prompts", "prompt_messages"]


async def list_prompts(pool: MCPSessionPool, server: str) -> list[types.Prompt]:
    """Every prompt of a server (all pages); none if it offers no prompts."""
    capabilities = await pool.capabilities(server)
    if capabilities is None or capabilities.prompts is None:
        return []
    return await pool.request(
        server, lambda session: every_page(session, "prompts"), what="listing prompts"
    )


def completion_reference(prompt: str | None, resource_template: str | None) -> Any:
    """What a completion is asked for: a prompt's name or a template's URI (one of them).

    Raises:
        ValueError: Neither or both are given.
    """
    if (prompt is None) == (resource_template is None):
        msg = "give either `prompt` or `resource_template`"
        raise ValueError(msg)
    if prompt is not None:
        return types.PromptReference(type="ref/prompt", name=prompt)
    return types.ResourceTemplateReference(type="ref/resource", uri=str(resource_template))


def prompt_messages(result: types.GetPromptResult) -> list[BaseMessage]:
    """A prompt's messages as LangChain messages (user: human, assistant: AI)."""
    return [_message(message) for message in wire(result).get("messages", [])]


def _message(message: dict[str, Any]) -> BaseMessage:
    content = message.get("content") or {}
    kind = content.get("type")
    made = AIMessage if message.get("role") == "assistant" else HumanMessage
    if kind == "text":
        return made(content=content.get("text", ""))
    block: dict[str, Any]
    if kind in ("image", "audio"):
        block = {"type": kind, "base64": content.get("data"), "mime_type": content.get("mimeType")}
    elif kind == "resource":
        resource = content.get("resource") or {}
        text = resource.get("text")
        if text is None:
            text = f"[{resource.get('uri')} {resource.get('mimeType') or 'binary'}]"
        block = {"type": "text", "text": text}
    elif kind == "resource_link":
        block = {"type": "text", "text": f"[resource {content.get('uri')}: {content.get('name')}]"}
    else:  # a content type of a later revision
        block = {"type": "text", "text": f"[{kind} content]"}
    return made(content=[block])
