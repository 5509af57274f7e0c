"""An MCP server written against the wire alone (no SDK), to hold the client to the spec.

    python contract.py [--modern]

Its tools: `weather` (a `title`, an `outputSchema`, structured content that conforms),
`forecast` (a title in its annotations only), `broken_weather` (structured content that
breaks the schema), `unstructured_weather` (an `outputSchema`, no structured content),
`bare` (no `resultType` in a 2026-07-28 result), `malformed` (content that is not a
list), `declared` (the capabilities the client declared, as JSON text) and `confirm`.

With `--modern` it speaks protocol 2026-07-28 only: it answers `server/discover` (not
`initialize`), reads the client's capabilities from each request's `_meta`, and `confirm`
asks for input the 2026-07-28 way, answering "input required" with an elicitation and a
`requestState` the client must send back with its answer (multi-round requests).
Without it, it answers `initialize` (2025-11-25) and refuses `server/discover`.
"""

from __future__ import annotations

import json
import sys
from typing import Any

MODERN = "--modern" in sys.argv[1:]
VERSION = "2026-07-28" if MODERN else "2025-11-25"
CAPABILITIES_META = "io.modelcontextprotocol/clientCapabilities"
STATE = "opaque-state-1"

WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"temperature": {"type": "number"}, "sky": {"type": "string"}},
    "required": ["temperature"],
}
TOOLS = [
    {
        "name": "weather",
        "title": "Weather Report",
        "description": "Today's weather.",
        "inputSchema": {"type": "object", "properties": {}},
        "outputSchema": WEATHER_SCHEMA,
        "annotations": {"title": "Weather (annotation)", "readOnlyHint": True},
    },
    {
        "name": "forecast",
        "description": "Tomorrow's weather.",
        "inputSchema": {"type": "object", "properties": {}},
        "annotations": {"title": "Forecast Desk", "readOnlyHint": True},
    },
    {
        "name": "broken_weather",
        "description": "Today's weather, as a broken server sends it.",
        "inputSchema": {"type": "object", "properties": {}},
        "outputSchema": WEATHER_SCHEMA,
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "unstructured_weather",
        "description": "Today's weather, as text only.",
        "inputSchema": {"type": "object", "properties": {}},
        "outputSchema": WEATHER_SCHEMA,
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "declared",
        "description": "The capabilities the client declared.",
        "inputSchema": {"type": "object", "properties": {}},
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "bare",
        "description": "A result that names no resultType (2026-07-28: it is complete).",
        "inputSchema": {"type": "object", "properties": {}},
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "malformed",
        "description": "A result the protocol does not allow.",
        "inputSchema": {"type": "object", "properties": {}},
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "confirm",
        "description": "Ask the person to confirm, then answer.",
        "inputSchema": {"type": "object", "properties": {}},
    },
]
QUESTION = {
    "method": "elicitation/create",
    "params": {
        "mode": "form",
        "message": "Go ahead?",
        "requestedSchema": {
            "type": "object",
            "properties": {"sure": {"type": "boolean", "default": True}},
        },
    },
}

declared: dict[str, Any] = {}


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}]}


def call(params: dict[str, Any]) -> dict[str, Any]:
    name = params.get("name")
    if name == "weather":
        structured = {"temperature": 21.5, "sky": "clear"}
        return {**text(json.dumps(structured)), "structuredContent": structured}
    if name == "forecast":
        return text("rain")
    if name == "broken_weather":
        structured = {"temperature": "warm"}
        return {**text(json.dumps(structured)), "structuredContent": structured}
    if name == "unstructured_weather":
        return text("21.5 degrees")
    if name == "bare":
        return {**text("bare"), "_bare": True}
    if name == "malformed":
        return {"content": "not a list of blocks"}
    if name == "declared":
        seen = (params.get("_meta") or {}).get(CAPABILITIES_META) if MODERN else declared
        return text(json.dumps(seen, sort_keys=True))
    if name == "confirm":
        answers = params.get("inputResponses")
        if not answers:
            questions = {"go": QUESTION}
            return {
                "resultType": "input_required",
                "inputRequests": questions,
                "requestState": STATE,
            }
        if params.get("requestState") != STATE:
            return {**text("the request state did not come back"), "isError": True}
        answer = answers.get("go") or {}
        return text(f"confirmed: {answer.get('action')} {json.dumps(answer.get('content'))}")
    return {**text(f"unknown tool {name!r}"), "isError": True}


def answer(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
    """The result of a request, or None when the method is unknown."""
    if method == "initialize" and not MODERN:
        declared.update(params.get("capabilities") or {})
        return {
            "protocolVersion": VERSION,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "contract", "version": "1"},
        }
    if method == "server/discover" and MODERN:
        return {
            "resultType": "complete",
            "supportedVersions": [VERSION],
            "capabilities": {"tools": {}},
            "ttlMs": 0,
            "cacheScope": "private",
        }
    if method == "ping":
        return {}
    if method == "tools/list":  # a cacheable result on 2026-07-28: how long it holds, for whom
        return {"tools": TOOLS, **({"ttlMs": 0, "cacheScope": "private"} if MODERN else {})}
    if method == "tools/call":
        return call(params)
    return None


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        if "id" not in message or "method" not in message:
            continue  # a notification, or an answer
        result = answer(message["method"], message.get("params") or {})
        if result is None:
            error = {"code": -32601, "message": f"Method not found: {message['method']}"}
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"], "error": error}
        else:
            if MODERN and "resultType" not in result and not result.pop("_bare", False):
                result["resultType"] = "complete"
            reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
