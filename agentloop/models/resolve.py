"""Chat models: objects or `provider:name` strings, chosen per run."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel

from agentloop.errors import ConfigurationError

__all__ = ["ModelLike", "ModelProvider", "model_name", "resolve_model"]

ModelLike = BaseChatModel | str


def resolve_model(model: ModelLike, known: dict[str, BaseChatModel] | None = None) -> BaseChatModel:
    """Return a chat model for an object or an `init_chat_model` string.

    Args:
        model: A `BaseChatModel`, or a string such as `"openai:gpt-4.1-mini"`,
            `"anthropic:claude-sonnet-4-5"` or `"ollama:llama3.1"` (the provider's
            package must be installed: `pip install agentloop[openai]`...).
        known: Models already made from strings, by string: a string found there is
            not made again, and one made is added (a `ModelProvider` keeps its own;
            None: a new model each time).

    Raises:
        ConfigurationError: The string names no known provider or model, or the provider's
            package is missing.
    """
    if isinstance(model, BaseChatModel):
        return model
    if not isinstance(model, str) or not model.strip():
        msg = f"model must be a LangChain chat model or a 'provider:name' string, got {model!r}"
        raise ConfigurationError(msg)
    key = model.strip()
    cached = None if known is None else known.get(key)
    if cached is not None:
        return cached
    from langchain.chat_models import init_chat_model

    try:
        created = init_chat_model(key)
    except ImportError as error:
        msg = f"model {key!r}: the provider's package is not installed ({error})"
        raise ConfigurationError(msg) from error
    except Exception as error:
        msg = f"model {key!r} cannot be created: {error}"
        raise ConfigurationError(msg) from error
    if not isinstance(created, BaseChatModel):
        msg = f"model {key!r} did not resolve to a chat model"
        raise ConfigurationError(msg)
    if known is not None:
        known[key] = created
    return created


def model_name(model: BaseChatModel) -> str:
    """Return a model's name as providers report it (for usage and prices)."""
    for attribute in ("model_name", "model", "model_id"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value
    return model._llm_type


class ModelProvider:
    """The planner and answer models of a loop, and a run's override from its context.

    Args:
        model: The planner model.
        answer_model: The answer model (defaults to `model`).
        fallback_models: Tried in order when a model keeps failing.

    A model named by a string is made once per provider (a loop's), also when a run's
    context names it.
    """

    def __init__(
        self,
        model: ModelLike,
        answer_model: ModelLike | None = None,
        fallback_models: Sequence[ModelLike] = (),
    ) -> None:
        self._known: dict[str, BaseChatModel] = {}
        self._lock = threading.Lock()
        self.model = self.resolve(model)
        self.answer_model = self.model if answer_model is None else self.resolve(answer_model)
        self.fallbacks = [self.resolve(candidate) for candidate in fallback_models]

    def resolve(self, model: ModelLike) -> BaseChatModel:
        """Return a chat model for an object or a string (made once per string here)."""
        with self._lock:  # two runs naming a new model make it once
            return resolve_model(model, self._known)

    def _override(self, context: Any) -> BaseChatModel | None:
        name = getattr(context, "model", None)
        return self.resolve(name) if isinstance(name, str) and name.strip() else None

    def planner(self, context: Any = None) -> BaseChatModel:
        """Return the model that plans a run (its `context.model` overrides the loop's)."""
        return self._override(context) or self.model

    def answerer(self, context: Any = None) -> BaseChatModel:
        """Return the model that answers a run (its `context.model` overrides the loop's)."""
        return self._override(context) or self.answer_model
