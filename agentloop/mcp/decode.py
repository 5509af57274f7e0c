"""Turning an MCP tool result into what the loop keeps: data for prompts, media aside.

Results are read as wire data (`sdk.wire`: the spec's names, on either SDK major).
`structuredContent` is used where present; a tool with an `outputSchema` must send
it, conforming (`output_check`: else the call fails with the schema error, as the SDK's
own client reports it). Text blocks become text (JSON text becomes
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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from jsonschema import SchemaError  # type: ignore[import-untyped]
from jsonschema.exceptions import best_match  # type: ignore[import-untyped]
from jsonschema.validators import validator_for  # type: ignore[import-untyped]
from referencing import Registry
from referencing.exceptions import Unresolvable

from agentloop.errors import MCPToolError
from agentloop.state import Attachment

__all__ = [
    "DecodedResult",
    "MAX_ATTACHMENT_BYTES",
    "OutputCheck",
    "decode_resource",
    "decode_result",
    "error_text",
    "output_check",
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


OutputCheck = Callable[[dict[str, Any]], None]
"""Checks a tool's result (wire data) against its `outputSchema`; raises `MCPToolError`."""


def output_check(tool: dict[str, Any]) -> OutputCheck | None:
    """The check of a tool's results against its `outputSchema` (None: it declares none).

    The schema is compiled once. A result that is not an error must carry
    `structuredContent` that conforms; the failure reads as the SDK's own client words
    it ("Invalid structured content returned by tool ...: ...").

    Args:
        tool: The tool as the server listed it (wire data).
    """
    schema = tool.get("outputSchema")
    if not isinstance(schema, dict):
        return None
    name = tool["name"]
    try:
        kind = validator_for(schema)
        kind.check_schema(schema)
    except SchemaError as error:
        problem = f"Invalid schema for tool {name}: {error.message}"

        def broken(result: dict[str, Any]) -> None:
            raise MCPToolError(problem, tool=name)

        return broken
    validator = kind(schema, registry=Registry())

    def check(result: dict[str, Any]) -> None:
        if result.get("isError"):
            return
        if "structuredContent" not in result:
            msg = f"Tool {name} has an output schema but did not return structured content"
            raise MCPToolError(msg, tool=name)
        try:
            error = best_match(validator.iter_errors(result["structuredContent"]))
        except Unresolvable as unresolved:
            msg = f"Invalid schema for tool {name}: {unresolved}"
            raise MCPToolError(msg, tool=name) from None
        if error is not None:
            msg = f"Invalid structured content returned by tool {name}: {error.message}"
            raise MCPToolError(msg, tool=name)

    return check


def error_text(result: dict[str, Any]) -> str:
    """The text of an error result (wire data)."""
    blocks = result.get("content") or []
    text = "\n".join(b["text"] for b in blocks if b.get("type") == "text" and "text" in b)
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

    def block(self, block: dict[str, Any]) -> str:
        kind = block.get("type")
        if kind == "text":
            return str(block.get("text", ""))
        if kind in ("image", "audio"):
            media: Literal["image", "audio"] = "image" if kind == "image" else "audio"
            return self.attach(media, block.get("mimeType", ""), block.get("data", ""))
        if kind == "resource" and isinstance(block.get("resource"), dict):
            return self.resource(block["resource"], inline=INLINE_RESOURCE_CHARS)
        if kind == "resource_link":
            uri = str(block.get("uri", ""))
            self.resource_uris.append(uri)
            about = f": {block['description']}" if block.get("description") else ""
            mime = f" ({block['mimeType']})" if block.get("mimeType") else ""
            name = block.get("name", "")
            return f"[resource link {name!r}{mime} {uri}{about}; read it with read_resource]"
        return f"[{kind or 'unknown'} content]"

    def resource(self, resource: dict[str, Any], *, inline: int | None = None) -> str:
        uri = str(resource.get("uri", ""))
        self.resource_uris.append(uri)
        mime = resource.get("mimeType") or "application/octet-stream"
        if "text" in resource:
            text = str(resource["text"])
            if inline is None or len(text) <= inline:
                return f"[resource {uri} ({mime})]\n{text}"
            return f"[resource {uri} ({mime}), {len(text)} characters; read it with read_resource]"
        kind: Literal["image", "audio", "blob"] = "blob"
        if mime.startswith(("image/", "audio/")):
            kind = "image" if mime.startswith("image/") else "audio"
        return self.attach(kind, mime, str(resource.get("blob", "")), uri)


def _as_data(text: str) -> Any:
    stripped = text.strip()
    if stripped[:1] in ("{", "[") or stripped in ("true", "false", "null"):
        try:
            return json.loads(stripped)
        except ValueError:
            return text
    return text


def decode_result(
    result: dict[str, Any],
    *,
    server: str,
    tool: str,
    prefix: str,
    check: OutputCheck | None = None,
) -> DecodedResult:
    """Turn a tool result into data, attachments and the URIs it mentions.

    Args:
        result: What the server returned (wire data).
        server: The server's name (for errors).
        tool: The tool's MCP name (for errors).
        prefix: Starts every attachment handle (the call's id).
        check: Checks the result against the tool's `outputSchema`.

    Raises:
        MCPToolError: The result is an error (`isError`), or breaks the `outputSchema`.
    """
    if result.get("isError"):
        raise MCPToolError(error_text(result), server=server, tool=tool)
    if check is not None:
        try:
            check(result)
        except MCPToolError as error:
            raise MCPToolError(str(error), server=server, tool=tool) from None
    decoder = _Decoder(prefix)
    content = [block for block in result.get("content") or [] if isinstance(block, dict)]
    parts = [decoder.block(block) for block in content]
    structured = result.get("structuredContent")
    value: Any
    if structured is not None:
        unwrap = isinstance(structured, dict) and set(structured) == {"result"}
        value = structured["result"] if unwrap else structured
    elif len(parts) == 1 and content[0].get("type") == "text":
        value = _as_data(parts[0])
    else:
        value = "\n".join(parts)
    return DecodedResult(value, decoder.attachments, decoder.resource_uris)


def decode_resource(result: dict[str, Any], *, prefix: str) -> DecodedResult:
    """Turn what `resources/read` returned (wire data) into text (whole) and attachments."""
    decoder = _Decoder(prefix)
    contents = [item for item in result.get("contents") or [] if isinstance(item, dict)]
    parts = [decoder.resource(item) for item in contents]
    if len(parts) == 1 and "text" in contents[0]:
        value: Any = contents[0]["text"]
    else:
        value = "\n\n".join(parts)
    return DecodedResult(value, decoder.attachments, decoder.resource_uris)
