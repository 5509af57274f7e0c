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

__all__ = ["AGENT_USAGE_ARTIFACT", "ATTACHMENTS_ARTIFACT", "RESULT_ARTIFACT"]

RESULT_ARTIFACT = "agentloop_result"
ATTACHMENTS_ARTIFACT = "agentloop_attachments"
AGENT_USAGE_ARTIFACT = "agentloop_usage"
