"""Turning an MCP tool result into what the loop keeps: data for prompts, media aside.

`structuredContent` is used where present. Text blocks become text (JSON text becomes
data). Images and audio never enter a text prompt: each becomes an *attachment* (its
base64 data, MIME type and size, kept for a multimodal answer model) and the result
holds a short placeholder naming its handle. Embedded resources and resource links are
summarized (URI, type, size; the text of a small text resource) and can be read with
the toolset's `read_resource` tool.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ReadResourceResult,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from agentloop.errors import MCPToolError
from agentloop.state import Attachment

__all__ = [
    "DecodedResult",
    "MAX_ATTACHMENT_BYTES",
    "decode_resource",
    "decode_result",
    "error_text",
]

MAX_ATTACHMENT_BYTES = 4 * 1024 * 1024
"""Media larger than this are described but not kept."""
INLINE_RESOURCE_CHARS = 4_000
"""The text of an embedded text resource up to this size is put in the result."""


@dataclass
class DecodedResult:
    """A tool result as the loop keeps it."""

    value: Any
    """Data for records and prompts: structured content, JSON data or text."""
    attachments: list[Attachment] = field(default_factory=list)
    resource_uris: list[str] = field(default_factory=list)
    """URIs the result mentions (embedded resources and links), readable later."""


def error_text(result: CallToolResult) -> str:
    """The text of an error result."""
    text = "\n".join(b.text for b in result.content if isinstance(b, TextContent))
    return text or "the tool reported an error without a message"


def _size_text(size: int) -> str:
    return f"{size} bytes" if size < 1024 else f"{size / 1024:.1f} kB"


def _decoded_size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data) * 3 // 4


class _Decoder:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.attachments: list[Attachment] = []
        self.resource_uris: list[str] = []

    def attach(
        self, kind: Literal["image", "audio", "blob"], mime: str, data: str, uri: str = ""
    ) -> str:
        handle = f"{self.prefix}#{len(self.attachments) + 1}"
        size = _decoded_size(data)
        attachment: Attachment = {
            "handle": handle,
            "kind": kind,
            "mime_type": mime,
            "size_bytes": size,
        }
        if size <= MAX_ATTACHMENT_BYTES:
            attachment["data"] = data
        if uri:
            attachment["uri"] = uri
        self.attachments.append(attachment)
        where = f" from {uri}" if uri else ""
        return f"[{kind} {mime}, {_size_text(size)}{where}: attachment {handle}]"

    def block(self, block: Any) -> str:
        if isinstance(block, TextContent):
            return block.text
        if isinstance(block, ImageContent):
            return self.attach("image", block.mimeType, block.data)
        if isinstance(block, AudioContent):
            return self.attach("audio", block.mimeType, block.data)
        if isinstance(block, EmbeddedResource):
            return self.resource(block.resource, inline=INLINE_RESOURCE_CHARS)
        if isinstance(block, ResourceLink):
            uri = str(block.uri)
            self.resource_uris.append(uri)
            about = f": {block.description}" if block.description else ""
            mime = f" ({block.mimeType})" if block.mimeType else ""
            return f"[resource link {block.name!r}{mime} {uri}{about}; read it with read_resource]"
        return f"[{getattr(block, 'type', type(block).__name__)} content]"

    def resource(
        self, resource: TextResourceContents | BlobResourceContents, *, inline: int | None = None
    ) -> str:
        uri = str(resource.uri)
        self.resource_uris.append(uri)
        mime = resource.mimeType or "application/octet-stream"
        if isinstance(resource, TextResourceContents):
            text = resource.text
            if inline is None or len(text) <= inline:
                return f"[resource {uri} ({mime})]\n{text}"
            return f"[resource {uri} ({mime}), {len(text)} characters; read it with read_resource]"
        kind: Literal["image", "audio", "blob"] = "blob"
        if mime.startswith(("image/", "audio/")):
            kind = "image" if mime.startswith("image/") else "audio"
        return self.attach(kind, mime, resource.blob, uri)


def _as_data(text: str) -> Any:
    stripped = text.strip()
    if stripped[:1] in ("{", "[") or stripped in ("true", "false", "null"):
        try:
            return json.loads(stripped)
        except ValueError:
            return text
    return text


def decode_result(result: CallToolResult, *, server: str, tool: str, prefix: str) -> DecodedResult:
    """Turn a tool result into data, attachments and the URIs it mentions.

    Args:
        result: What the server returned.
        server: The server's name (for errors).
        tool: The tool's MCP name (for errors).
        prefix: Starts every attachment handle (the call's id).

    Raises:
        MCPToolError: The result is an error (`isError`).
    """
    if result.isError:
        raise MCPToolError(error_text(result), server=server, tool=tool)
    decoder = _Decoder(prefix)
    parts = [decoder.block(block) for block in result.content]
    structured = result.structuredContent
    value: Any
    if structured is not None:
        value = structured["result"] if set(structured) == {"result"} else structured
    elif len(parts) == 1 and isinstance(result.content[0], TextContent):
        value = _as_data(parts[0])
    else:
        value = "\n".join(parts)
    return DecodedResult(value, decoder.attachments, decoder.resource_uris)


def decode_resource(result: ReadResourceResult, *, prefix: str) -> DecodedResult:
    """Turn what `resources/read` returned into text (whole) and attachments (binary)."""
    decoder = _Decoder(prefix)
    parts = [decoder.resource(contents) for contents in result.contents]
    if len(parts) == 1 and isinstance(result.contents[0], TextResourceContents):
        value: Any = result.contents[0].text
    else:
        value = "\n\n".join(parts)
    return DecodedResult(value, decoder.attachments, decoder.resource_uris)
