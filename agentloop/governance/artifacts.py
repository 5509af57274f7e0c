"""What a tool may hand the loop beside its content (`response_format="content_and_artifact"`).

A LangChain tool's content is text; its artifact is any value. The loop reads these keys
of a dict artifact:

- `agentloop_result`: the result as data, kept instead of the text content (an MCP
  tool's structured content);
- `agentloop_attachments`: media kept beside the result, for a multimodal answer model
  (never put in a text prompt; see `agentloop.state.Attachment`);
- `agentloop_usage`: token usage of the sub-agents the call ran, per agent.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import ToolMessage

__all__ = ["AGENT_USAGE_ARTIFACT", "ATTACHMENTS_ARTIFACT", "RESULT_ARTIFACT", "unpack_output"]

RESULT_ARTIFACT = "agentloop_result"
ATTACHMENTS_ARTIFACT = "agentloop_attachments"
AGENT_USAGE_ARTIFACT = "agentloop_usage"


def unpack_output(output: Any) -> tuple[Any, Any]:
    """Split what a content-and-artifact tool returned into its result and its artifact.

    Returns:
        The `agentloop_result` of a dict artifact, else the message's content; and the
        artifact. Any other output comes back as it is, with no artifact.
    """
    if not isinstance(output, ToolMessage):
        return output, None
    artifact = output.artifact
    if isinstance(artifact, dict) and RESULT_ARTIFACT in artifact:
        return artifact[RESULT_ARTIFACT], artifact
    return output.content, artifact
