"""A tool compiled once for the loop: its policy, argument schema, validator and description.

Everything that depends only on the tool is worked out when the loop is built, not per
call: the effective policy, the JSON schema of its arguments and the validator built
from it (the tool's own pydantic model when it has one), the name index that repairs
argument names, and what the planner is told about it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.tools import BaseTool
from pydantic import BaseModel

from agentloop.durability.identity import IDEMPOTENCY_ARGUMENT
from agentloop.governance.arguments import ArgumentSpec, ValidatedArguments, tool_json_schema
from agentloop.governance.injected import InjectedArguments
from agentloop.governance.invoke import crash_proof
from agentloop.governance.policy import ResolvedPolicy
from agentloop.governance.redacted import redacting
from agentloop.planning.templates import compact_schema

__all__ = ["IDEMPOTENCY_ARGUMENT", "ToolSpec"]


def _pydantic_model(tool: BaseTool, injected: frozenset[str]) -> type[BaseModel] | None:
    """The model that judges a call's arguments: the tool's own, validators and all.

    LangChain's `tool_call_schema` is a copy of the fields without the model's validators
    and aliases; it is used only when the tool's model has injected or aliased fields.
    """
    args_schema = tool.args_schema
    if isinstance(args_schema, dict) or args_schema is None:
        return None
    if isinstance(args_schema, type) and issubclass(args_schema, BaseModel):
        fields = args_schema.model_fields
        aliased = any(
            info.alias not in (None, name) or info.validation_alias not in (None, name)
            for name, info in fields.items()
        )
        if not aliased and not injected & set(fields):
            return args_schema
    try:
        model = tool.tool_call_schema
    except Exception:  # a schema LangChain cannot build: validate on the JSON schema
        return None
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _without(schema: dict[str, Any], names: frozenset[str]) -> dict[str, Any]:
    """The schema without injected arguments (LangChain leaves out all but a bare `runtime`)."""
    declared = schema.get("properties")
    if not names or not isinstance(declared, dict) or not names & set(declared):
        return schema
    trimmed = {**schema, "properties": {k: v for k, v in declared.items() if k not in names}}
    if isinstance(schema.get("required"), list):
        trimmed["required"] = [name for name in schema["required"] if name not in names]
    return trimmed


@dataclass(frozen=True)
class ToolSpec:
    """One registered tool and everything compiled from it."""

    tool: BaseTool
    """The tool as registered."""
    policy: ResolvedPolicy
    schema: dict[str, Any]
    """The JSON schema of the arguments a model may send."""
    arguments: ArgumentSpec = field(repr=False)
    runnable: BaseTool = field(repr=False)
    """What is invoked: the tool, with a coroutine that cannot crash the event loop, whose
    output and errors are redacted before its callbacks see them."""
    accepts_idempotency_key: bool = False
    injected: InjectedArguments = field(default_factory=InjectedArguments)
    """The arguments the loop fills in (`ToolRuntime`, `InjectedState`...), never the planner."""

    @classmethod
    def compile(
        cls,
        tool: BaseTool,
        policy: ResolvedPolicy,
        redact: Callable[[str], str] | None = None,
    ) -> ToolSpec:
        """Compile a tool with its effective policy (and the loop's redaction hook)."""
        injected = InjectedArguments.of(tool)
        schema = _without(tool_json_schema(tool), injected.names)
        declared = schema.get("properties")
        return cls(
            tool=tool,
            policy=policy,
            schema=schema,
            arguments=ArgumentSpec(schema, _pydantic_model(tool, injected.names)),
            runnable=redacting(crash_proof(tool), redact, policy.max_result_chars),
            accepts_idempotency_key=isinstance(declared, dict) and IDEMPOTENCY_ARGUMENT in declared,
            injected=injected,
        )

    @property
    def name(self) -> str:
        """The tool's name."""
        return self.tool.name

    def check(self, kwargs: Any) -> tuple[ValidatedArguments, list[str]]:
        """Repair argument names, coerce and validate.

        Returns:
            The validated arguments, and the notes on renamed arguments.
        """
        planned, ignored = self.injected.strip(kwargs) if self.injected else (kwargs, [])
        repaired, renames = self.arguments.repair(planned, self.policy.arg_aliases)
        return self.arguments.validate(repaired), [*ignored, *renames]

    def description(self) -> dict[str, Any]:
        """What the planner is told about the tool (its display `title` too, when it has one)."""
        title = (self.tool.metadata or {}).get("title")
        return {
            "name": self.name,
            **({"title": title} if isinstance(title, str) and title else {}),
            "description": self.tool.description,
            "args_schema": self.schema,
            "read_only": self.policy.read_only,
            "side_effects": not self.policy.read_only,
            "idempotent": self.policy.repeat_safe,
        }

    def tool_schema(self) -> dict[str, Any]:
        """The tool as a model binds it (OpenAI format), injected arguments hidden.

        A tool with side effects says so in its description (the planner's rules say that
        the others run in parallel); the schema is `compact_schema`'s.
        """
        description = (self.tool.description or self.name).strip()
        title = self.description().get("title")
        if title and title not in description:
            description = f"{title}: {description}"
        if not self.policy.read_only:
            description += "\n(has side effects; runs alone, in the order called, never repeated)"
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": description,
                "parameters": compact_schema(self.schema, self.tool.description),
            },
        }
