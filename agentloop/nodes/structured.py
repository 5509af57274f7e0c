"""`response_format=`: the typed result the answer node produces beside the text answer.

Accepted as `create_agent` accepts it: a pydantic model, a dataclass, a TypedDict or a
JSON schema (the strategy is then chosen per model, as `create_agent` does: the
provider's native structured output where the model's profile says it has one, a tool
call otherwise), or LangChain's `ToolStrategy` / `ProviderStrategy` to choose. Once the
text answer is written, the answer model is asked once more, for the result only (tagged
`nostream`, so a chat UI never shows its JSON). A reply that does not validate is sent
back once with the error; if the second one fails too, the run ends with status
`structured_response_failed` and the text answer stands.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from langchain.agents.factory import _supports_provider_strategy
from langchain.agents.structured_output import (
    AutoStrategy,
    OutputToolBinding,
    ProviderStrategy,
    ProviderStrategyBinding,
    ToolStrategy,
)
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import Runnable
from langgraph.constants import TAG_NOSTREAM
from langgraph.runtime import Runtime

from agentloop.base.sync import by_mode
from agentloop.errors import ConfigurationError, ModelBehaviorError

if TYPE_CHECKING:
    from agentloop.middleware.stack import Compose, LoopMiddleware

__all__ = [
    "STRUCTURED_ASK",
    "STRUCTURED_RETRY",
    "STRUCTURED_TAGS",
    "StructuredOutput",
    "StructuredResult",
]

STRUCTURED_TAGS = ["agentloop:structured_response", TAG_NOSTREAM]
"""Tags of the structured-result calls (kept off LangGraph's `messages` stream)."""
STRUCTURED_ASK = (
    "Now give that answer as the structured result `{name}`, using only what the answer says."
)
"""The request that follows the text answer."""
STRUCTURED_RETRY = "That result is not valid: {error}\nGive the structured result again, fixed."
"""What a reply that did not validate is answered with (once)."""

Strategy = ToolStrategy[Any] | ProviderStrategy[Any]
Wrapped = tuple["LoopMiddleware", Mapping[str, Any], Runtime[Any]]
"""The app's middleware, the loop's state and the node's runtime."""


def _reply_of(result: tuple[Strategy, Any]) -> AIMessage:
    reply = result[1]
    return reply if isinstance(reply, AIMessage) else AIMessage(str(reply))


@dataclass
class StructuredResult:
    """The outcome of asking for the structured result."""

    value: Any = None
    """The validated result (None when it failed)."""
    error: str = ""
    """Why there is no result ("" when there is one)."""
    replies: list[AIMessage] = field(default_factory=list)
    """Every reply the model gave (for usage)."""


class StructuredOutput:
    """A loop's `response_format`, compiled once.

    Args:
        response_format: A schema (pydantic model, dataclass, TypedDict, JSON schema) or
            a `ToolStrategy` / `ProviderStrategy` / `AutoStrategy`.

    Raises:
        ConfigurationError: The schema cannot be used.
    """

    def __init__(self, response_format: Any) -> None:
        try:
            if isinstance(response_format, ToolStrategy | ProviderStrategy | AutoStrategy):
                chosen: Any = response_format
            elif isinstance(response_format, dict | type):
                chosen = AutoStrategy(response_format)
            else:
                msg = f"response_format must be a schema or a strategy, got {response_format!r}"
                raise ConfigurationError(msg)
            self.format: Strategy | AutoStrategy[Any] = chosen
            self.tools = ToolStrategy(chosen.schema) if isinstance(chosen, AutoStrategy) else None
            strategy = self.tools or chosen
            if isinstance(strategy, ToolStrategy):
                self.bindings = {
                    spec.name: OutputToolBinding.from_schema_spec(spec)
                    for spec in strategy.schema_specs
                }
            else:
                self.bindings = {}
                ProviderStrategyBinding.from_schema_spec(strategy.schema_spec)
        except ConfigurationError:
            raise
        except Exception as error:
            msg = f"response_format cannot be used: {error}"
            raise ConfigurationError(msg) from error

    @property
    def name(self) -> str:
        """The result's name (the schema's)."""
        schema = self.format.schema
        if isinstance(schema, dict):
            return str(schema.get("title") or schema.get("name") or "response_format")
        return getattr(schema, "__name__", "response_format")

    def strategy(self, model: BaseChatModel) -> Strategy:
        """The strategy for a model: native where it has structured output, else a tool."""
        if not isinstance(self.format, AutoStrategy):
            return self.format
        if _supports_provider_strategy(model):
            return ProviderStrategy(self.format.schema)
        assert self.tools is not None
        return self.tools

    def _bound(
        self, model: BaseChatModel, strategy: Strategy, options: dict[str, Any] | None = None
    ) -> Runnable[Any, Any]:
        if isinstance(strategy, ProviderStrategy):
            bound: Runnable[Any, Any] = model.bind(**strategy.to_model_kwargs())
        else:
            tools = [binding.tool for binding in self.bindings.values()]
            bound = model.bind_tools(tools, tool_choice="any")
        configured = bound.with_config(tags=STRUCTURED_TAGS, run_name="structured_response")
        return configured.bind(**options) if options else configured

    def _parse(self, reply: AIMessage, strategy: Strategy) -> Any:
        """The validated result of a reply.

        Raises:
            ValueError: The reply holds no valid result.
        """
        if isinstance(strategy, ProviderStrategy):
            return ProviderStrategyBinding.from_schema_spec(strategy.schema_spec).parse(reply)
        calls = [call for call in reply.tool_calls if call["name"] in self.bindings]
        if len(calls) != 1:
            names = ", ".join(self.bindings)
            msg = f"expected exactly one call of {names}, got {len(calls)}"
            raise ValueError(msg)
        return self.bindings[calls[0]["name"]].parse(calls[0]["args"])

    def _asked(self, answer: str) -> list[BaseMessage]:
        """What follows the answer's request: the answer, then the ask for the typed result."""
        return [AIMessage(answer), HumanMessage(STRUCTURED_ASK.format(name=self.name))]

    @staticmethod
    def _retry(reply: AIMessage, error: str) -> list[BaseMessage]:
        text = STRUCTURED_RETRY.format(error=error)
        if reply.tool_calls:
            answers = [
                ToolMessage(text, tool_call_id=call["id"] or "", name=call["name"])
                for call in reply.tool_calls
            ]
            return [reply, *answers]
        return [reply, HumanMessage(text)]

    async def ask(
        self,
        model: BaseChatModel,
        transcript: Sequence[BaseMessage],
        compose: Compose,
        answer: str,
        through: Wrapped,
    ) -> StructuredResult:
        """Ask for the result after the text answer (re-asked once with the error).

        Args:
            model: The answer model.
            transcript: The transcript the answer's request carried.
            compose: What the answer's request sent: this request sends the same, then
                the answer and the ask.
            answer: The text answer.
            through: The loop's model-call stack (`LoopMiddleware`: the app's middleware,
                the loop's retry and fallback), with the state and runtime.
        """
        result, after = StructuredResult(), self._asked(answer)
        middleware, state, runtime = through

        def asked(
            system: SystemMessage | None, messages: list[BaseMessage], tools: list[Any]
        ) -> list[BaseMessage]:
            return [*compose(system, messages, tools), *after]

        async def call(
            model: BaseChatModel,
            sent: list[BaseMessage],
            options: dict[str, Any],
            tools: Sequence[Any] = (),
        ) -> tuple[Strategy, Any]:
            strategy = self.strategy(model)
            bound = self._bound(model, strategy, options)
            reply = await by_mode(partial(bound.invoke, sent), partial(bound.ainvoke, sent))
            return strategy, reply

        for _ in range(2):
            try:
                strategy, reply = await middleware.call_model(
                    "structured_response",
                    model,
                    transcript,
                    asked,
                    call,
                    _reply_of,
                    self._written,
                    state=state,
                    runtime=runtime,
                )
            except ModelBehaviorError as error:
                result.error = str(error)
                return result
            if self._settle(result, reply, strategy):
                return result
            after = [*after, *self._retry(reply, result.error)]
        return result

    def _written(self, reply: AIMessage, model: BaseChatModel) -> tuple[Strategy, Any]:
        """A reply a middleware wrote itself, read with the first model's strategy."""
        return self.strategy(model), reply

    def _settle(self, result: StructuredResult, reply: Any, strategy: Strategy) -> bool:
        """Record a reply; True when it holds a valid result."""
        if not isinstance(reply, AIMessage):
            result.error = f"the model replied with {type(reply).__name__}, not a message"
            return False
        result.replies.append(reply)
        try:
            result.value, result.error = self._parse(reply, strategy), ""
        except Exception as error:
            result.error = str(error) or type(error).__name__
            return False
        return True
