"""The tools of one loop as they are now: its own tools, plus those of sources that change.

An MCP toolset's tools change while a loop is compiled: a server that was down at build
time comes back, a server announces `tools/list_changed`. The catalog rebuilds the
registry (policies, schemas, the planner's tool list) when a source's version moves,
so a run sees the tools of the moment it plans.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from langchain_core.tools import BaseTool

from agentloop.errors import ConfigurationError
from agentloop.governance.policy import ToolPolicy
from agentloop.governance.registry import DictTool, ToolLike, ToolRegistry, dict_tool_name, to_tool
from agentloop.planning.templates import tool_list_json

__all__ = ["ToolCatalog", "ToolSource"]

logger = logging.getLogger(__name__)


class ToolSource(Protocol):
    """Tools that may change after the loop is built (an `MCPToolset`)."""

    @property
    def version(self) -> int:
        """Changes whenever `tools` does."""
        ...

    @property
    def tools(self) -> list[BaseTool]:
        """The tools now."""
        ...

    @property
    def unavailable(self) -> Mapping[str, str]:
        """The parts (servers) whose tools are missing now, with the reason."""
        ...

    def settle(self) -> object:
        """Wait (bounded) until announced changes of the tools have arrived."""
        ...


@dataclass(frozen=True)
class _Snapshot:
    version: tuple[int, ...]
    registry: ToolRegistry
    tool_list: str
    tool_schemas: list[dict[str, Any]]


class ToolCatalog:
    """The registry of a loop's tools, rebuilt when its tool source changes.

    Args:
        tools: The loop's own tools (fixed).
        sources: Tools that may change (MCP toolsets), in order.
        policies: Declared policies by tool name. A policy naming no tool is an error,
            unless a source has unavailable parts (their tools may come later).
        redact: Applied to the planner's tool list, and to each tool's output and errors
            before its callbacks see them.
        bound_only: Dict tools bound to the planner after the loop's tools, as they are
            (`create_agent` binds them and its `ToolNode` never runs them: a provider
            runs its own tools; a call to one of them is refused as an unknown tool).
        registry_options: Passed to `ToolRegistry`.

    Raises:
        ConfigurationError: A dict tool is not a dict, or has the name of another tool.
    """

    def __init__(
        self,
        tools: Sequence[ToolLike],
        sources: Sequence[ToolSource] = (),
        policies: Mapping[str, ToolPolicy] | None = None,
        *,
        redact: Callable[[str], str] | None = None,
        bound_only: Sequence[DictTool] = (),
        **registry_options: Any,
    ) -> None:
        self._fixed = [to_tool(tool) for tool in tools]
        self._sources = list(sources)
        self._policies = dict(policies or {})
        self._redact = redact
        self._options = registry_options
        self._lock = threading.Lock()
        self._snapshot = self._build(strict=not self.unavailable)
        self._bound_only = _checked_dict_tools(bound_only, self._snapshot.registry.names)

    def _version(self) -> tuple[int, ...]:
        return tuple(source.version for source in self._sources)

    def _build(self, *, strict: bool) -> _Snapshot:
        version = self._version()
        dynamic = [tool for source in self._sources for tool in source.tools]
        registry = ToolRegistry(
            [*self._fixed, *dynamic],
            self._policies,
            strict_policies=strict,
            redact=self._redact,
            **self._options,
        )
        text = registry.descriptions_json
        schemas = registry.tool_schemas
        if self._redact is not None:
            text = self._redact(text)
            schemas = [_redacted(schema, self._redact) for schema in schemas]
        return _Snapshot(version, registry, text, schemas)

    def _current(self) -> _Snapshot:
        snapshot = self._snapshot
        if not self._sources:  # fixed tools only: the snapshot never changes
            return snapshot
        for source in self._sources:
            source.settle()
        if self._version() == snapshot.version:
            return snapshot
        with self._lock:
            if self._version() != self._snapshot.version:
                try:
                    self._snapshot = self._build(strict=False)
                except Exception as error:  # keep the last good tools rather than fail a run
                    logger.error("the tool list changed but could not be used: %s", error)
                    self._snapshot = _Snapshot(
                        self._version(),
                        self._snapshot.registry,
                        self._snapshot.tool_list,
                        self._snapshot.tool_schemas,
                    )
            return self._snapshot

    @property
    def registry(self) -> ToolRegistry:
        """The registry now."""
        # fixed tools only (the snapshot never changes): read without a call, several
        # times for every tool call
        return (self._current() if self._sources else self._snapshot).registry

    @property
    def tool_list(self) -> str:
        """The tools as the planner sees them now (prompt JSON, redacted)."""
        return (self._current() if self._sources else self._snapshot).tool_list

    @property
    def tool_schemas(self) -> list[dict[str, Any]]:
        """The tools as the planner model binds them now (`plan_mode="native"`, redacted).

        The loop's tools, then the dict tools (`bound_only`) as they were given.
        """
        schemas = self._current().tool_schemas
        return [*schemas, *self._bound_only] if self._bound_only else schemas

    @property
    def offered(self) -> list[BaseTool | DictTool]:
        """The tools a `ModelRequest` carries: the loop's tools, then the dict tools."""
        return [*self._current().registry.tools, *self._bound_only]

    def narrowed(self, names: Collection[str]) -> tuple[str, list[dict[str, Any]]]:
        """The planner's tool list and bound schemas of the named tools only (redacted).

        For a `wrap_model_call` middleware that narrows `ModelRequest.tools`
        (`LLMToolSelectorMiddleware`): the planner is offered only those.
        """
        registry = self._current().registry
        descriptions = [item for item in registry.descriptions if item["name"] in names]
        text = tool_list_json(descriptions)
        schemas = [schema for schema in self.tool_schemas if dict_tool_name(schema) in names]
        return (self._redact(text) if self._redact is not None else text), schemas

    @property
    def unavailable(self) -> Mapping[str, str]:
        """Sources of tools that are missing now, with the reason."""
        return {part: why for source in self._sources for part, why in source.unavailable.items()}


def _checked_dict_tools(tools: Sequence[DictTool], names: Sequence[str]) -> list[DictTool]:
    """The dict tools, once each is known to be a dict with a name of its own.

    Raises:
        ConfigurationError: One is not a dict, or two tools share a name.
    """
    taken = set(names)
    for tool in tools:
        if not isinstance(tool, dict):
            msg = f"a dict tool must be a dict, got {type(tool).__name__}"
            raise ConfigurationError(msg)
        name = dict_tool_name(tool)
        if name in taken:
            msg = f"two tools are named {name!r}; tool names must be unique"
            raise ConfigurationError(msg)
        taken.add(name)
    return list(tools)


def _redacted(schema: dict[str, Any], redact: Callable[[str], str]) -> dict[str, Any]:
    """A bound tool's schema with its description redacted."""
    function = schema["function"]
    return {**schema, "function": {**function, "description": redact(function["description"])}}
