"""MCP servers as tools of a loop: config, sessions, client features, results.

- `sdk`: the one module that knows the installed `mcp` SDK's major (1.x or 2.x); the
  others take the SDK's names from it and read what servers send as wire data;
- `config`: reading `mcpServers` configs (`load_mcp_config`, `MCPServerSpec`);
- `auth`: an HTTP server's authorization (`MCPAuth`: OAuth flows of the `mcp` SDK);
- `connection`: one server's session held open by a background task;
- `cancel`: cancelling a request on the server (`notifications/cancelled`);
- `output`: a server's stderr and stray stdout, quoted by failure reasons;
- `session`: `MCPSessionPool`, one persistent session per server;
- `client`: what a server may ask of the client (progress, sampling, elicitation, roots);
- `bridge`: progress, log events and elicitation interrupts of one tool call;
- `decode`: tool results as data, media kept aside as attachments;
- `tools`: MCP tools as LangChain tools;
- `listing`: what each server offers now (tools, resources), kept current;
- `resources`: reading resources, the `read_resource` tool;
- `prompts`: prompts as LangChain messages, argument completion;
- `toolset`: `MCPToolset`, the servers' tools on sessions shared by every run.

May import: `agentloop.governance` and every part below it (never `nodes` or the graph).
"""

from agentloop.errors import MCPToolError, MCPTransportError
from agentloop.mcp.auth import AuthFlow, MCPAuth
from agentloop.mcp.bridge import ELICITATION_INTERRUPT, elicit_result
from agentloop.mcp.config import INHERITED_ENV, MCPServerSpec, SessionScope, load_mcp_config
from agentloop.mcp.session import MCPSessionPool
from agentloop.mcp.tools import MCP_HINTS, mcp_tool_annotations
from agentloop.mcp.toolset import READ_RESOURCE_TOOL, McpServersConfig, MCPToolset

__all__ = [
    "ELICITATION_INTERRUPT",
    "INHERITED_ENV",
    "MCP_HINTS",
    "READ_RESOURCE_TOOL",
    "AuthFlow",
    "MCPAuth",
    "MCPServerSpec",
    "MCPSessionPool",
    "MCPToolError",
    "MCPToolset",
    "MCPTransportError",
    "McpServersConfig",
    "SessionScope",
    "elicit_result",
    "load_mcp_config",
    "mcp_tool_annotations",
]
