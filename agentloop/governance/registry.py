"""The tools a loop may call: lookup by name, effective policies, schemas, descriptions."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from typing import Any

from langchain_core.tools import BaseTool
from langchain_core.tools import tool as as_langchain_tool

from agentloop.errors import ConfigurationError
from agentloop.governance.policy import (
    DEFAULT_TIMEOUT_S,
    ResolvedPolicy,
    ToolPolicy,
    ToolRetry,
    resolve_policy,
)
from agentloop.governance.spec import ToolSpec
from agentloop.planning.templates import tool_list_json

__all__ = ["POLICY_LOGGER", "DictTool", "ToolLike", "ToolRegistry", "dict_tool_name", "to_tool"]

POLICY_LOGGER = logging.getLogger("agentloop.policy")
"""Says, at INFO, which tools a build classified by default (the CLI's `--verbose` shows it)."""

ToolLike = BaseTool | Callable[..., Any]

DictTool = dict[str, Any]
"""A tool as `create_agent` takes a dict: OpenAI format (`{"type": "function", "function":
{...}}`) or a provider's own (`{"type": "web_search_preview"}`). It is bound to the model
as it is and never run by the loop (see `ToolCatalog`)."""


def dict_tool_name(tool: DictTool) -> str:
    """The name a dict tool is called by: its function's name, or its provider type."""
    function = tool.get("function")
    if isinstance(function, dict) and isinstance(function.get("name"), str):
        return str(function["name"])
    for key in ("name", "type"):
        if isinstance(tool.get(key), str):
            return str(tool[key])
    return repr(tool)


def to_tool(candidate: ToolLike) -> BaseTool:
    """Return a LangChain tool for a tool or a plain (sync or async) function.

    Raises:
        ConfigurationError: `candidate` is neither.
    """
    if isinstance(candidate, BaseTool):
        return candidate
    if callable(candidate):
        try:
            return as_langchain_tool(candidate)
        except Exception as error:
            msg = f"cannot turn {candidate!r} into a tool: {error}"
            raise ConfigurationError(msg) from error
    msg = f"tools must be LangChain tools or functions, got {type(candidate).__name__}"
    raise ConfigurationError(msg)


class ToolRegistry:
    """The registered tools of one loop and their effective policies.

    Args:
        tools: LangChain tools or functions; names must be unique.
        policies: Declared policies by tool name.
        default_timeout_s: Timeout of tools that declare none.
        timeout_by_prefix: Name-prefix timeouts (e.g. `{"search_": 10}`).
        default_retry: Retry policy of idempotent tools that declare none.
        strict_policies: A policy for a tool that is not registered is an error (False:
            it is kept for a tool that may be registered later).
        redact: Applied to each tool's output and errors inside its run, before callbacks.

    Raises:
        ConfigurationError: Duplicate names, or (strict) a policy for a tool that is not
            registered.
    """

    def __init__(
        self,
        tools: Sequence[ToolLike],
        policies: Mapping[str, ToolPolicy] | None = None,
        *,
        default_timeout_s: float = DEFAULT_TIMEOUT_S,
        timeout_by_prefix: Mapping[str, float] | None = None,
        default_retry: ToolRetry | None = None,
        strict_policies: bool = True,
        redact: Callable[[str], str] | None = None,
    ) -> None:
        self._tools: dict[str, BaseTool] = {}
        for candidate in tools:
            converted = to_tool(candidate)
            if converted.name in self._tools:
                msg = f"two tools are named {converted.name!r}; tool names must be unique"
                raise ConfigurationError(msg)
            self._tools[converted.name] = converted
        policies = dict(policies or {})
        unknown = sorted(set(policies) - set(self._tools))
        if unknown and strict_policies:
            msg = f"policies given for unknown tools {unknown}; registered: {self.names}"
            raise ConfigurationError(msg)
        for name, policy in policies.items():
            if not isinstance(policy, ToolPolicy):
                msg = f"policy of {name!r} must be a ToolPolicy, got {type(policy).__name__}"
                raise ConfigurationError(msg)
        self._specs: dict[str, ToolSpec] = {
            name: ToolSpec.compile(
                tool,
                resolve_policy(
                    tool,
                    policies.get(name),
                    default_timeout_s=default_timeout_s,
                    timeout_by_prefix=timeout_by_prefix,
                    default_retry=default_retry,
                ),
                redact,
            )
            for name, tool in self._tools.items()
        }
        by_default = [
            name for name, spec in self._specs.items() if spec.policy.classified_by_default
        ]
        if by_default:
            POLICY_LOGGER.info(
                "tools classified as writes by default (run alone, never retried, cached or "
                "started early; claimed through the ledger): %s. Declare read_only=True "
                "(a ToolPolicy or metadata['agentloop']) for those that only read.",
                ", ".join(by_default),
            )

    @property
    def names(self) -> list[str]:
        """The registered tool names, in registration order."""
        return list(self._tools)

    @property
    def tools(self) -> list[BaseTool]:
        """The registered tools."""
        return list(self._tools.values())

    def get(self, name: str) -> BaseTool | None:
        """Return the tool called `name`, or None."""
        return self._tools.get(name)

    def spec(self, name: str) -> ToolSpec | None:
        """Return the compiled spec of the tool called `name`, or None."""
        return self._specs.get(name)

    def policy(self, name: str) -> ResolvedPolicy:
        """Return the effective policy of a registered tool."""
        return self._specs[name].policy

    def policy_or_none(self, name: str) -> ResolvedPolicy | None:
        """Return the effective policy of the tool called `name`, or None."""
        spec = self._specs.get(name)
        return None if spec is None else spec.policy

    def schema(self, name: str) -> dict[str, Any]:
        """Return the JSON schema of a registered tool's arguments."""
        return self._specs[name].schema

    @cached_property
    def has_side_effects(self) -> bool:
        """Whether any tool is not idempotent."""
        return any(not spec.policy.idempotent for spec in self._specs.values())

    @cached_property
    def descriptions_json(self) -> str:
        """`descriptions` as the planner's compact tool list (`tool_list_json`)."""
        return tool_list_json(self.descriptions)

    @cached_property
    def descriptions(self) -> list[dict[str, Any]]:
        """What the planner is told about each tool: name, description, argument schema."""
        return [spec.description() for spec in self._specs.values()]

    @cached_property
    def tool_schemas(self) -> list[dict[str, Any]]:
        """The tools as the planner model binds them in `plan_mode="native"`."""
        return [spec.tool_schema() for spec in self._specs.values()]
