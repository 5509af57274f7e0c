"""How a tool learns which call it serves: a key of the config the loop invokes it with.

The loop invokes every tool with the config of its `call_tool` task plus
`configurable["agentloop_call"]` (`run_id`, `call_id`, `place`, `call_key`,
`position_key`, `loop`, `identity`, `owner`, `sampler`).
A tool (or a graph run inside it, such as a sub-agent) reads it with `call_info(config)`.
"""

from __future__ import annotations

import uuid
import weakref
from typing import Any, NotRequired

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from typing_extensions import TypedDict

__all__ = [
    "CALL_CONFIG_KEY",
    "CallInfo",
    "SamplingModel",
    "Samplers",
    "call_info",
    "call_thread",
    "with_call_info",
]

CALL_CONFIG_KEY = "agentloop_call"
"""The `configurable` key under which a tool finds its call."""


class CallInfo(TypedDict):
    """The call a tool serves."""

    run_id: str
    """The loop run (stable across resume, replay and fork)."""
    call_id: str
    """The call's id as records and events show it (`str(CallId)`: `<run>:<round>:<index>`)."""
    place: NotRequired[str]
    """The call's place within its run, `<round>:<index>` (`CallId.in_run`)."""
    call_key: str
    """The call's stable identity (also its `idempotency_key`)."""
    position_key: NotRequired[str]
    """The call's place in its run and the command as planned: the key of its ledger entry,
    the same whatever code resumes the run (a sub-agent names its run after it)."""
    loop: NotRequired[str]
    """The name of the loop that makes the call (for the events a tool emits)."""
    identity: NotRequired[str]
    """Who the run serves, in its thread (`agentloop.governance.cache_scope.run_identity`)."""
    owner: NotRequired[str]
    """Who the run serves, across threads (`run_identity(..., thread=False)`): MCP servers
    configured with `"send_owner": true` receive it as `_meta["agentloop/owner"]`."""
    sampler: NotRequired[str]
    """The key of the loop's `SamplingModel`: its model answers the sampling requests an MCP
    server makes during the call (servers configured with `"sampling": true`)."""


def call_info(config: RunnableConfig | None) -> CallInfo | None:
    """Return the call a config was made for, or None."""
    info: Any = ((config or {}).get("configurable") or {}).get(CALL_CONFIG_KEY)
    if isinstance(info, dict) and isinstance(info.get("call_key"), str):
        return info  # type: ignore[return-value]
    return None


def call_thread(config: RunnableConfig | None) -> str:
    """Return the thread a call belongs to ("" without a checkpointer thread)."""
    thread = ((config or {}).get("configurable") or {}).get("thread_id")
    return str(thread) if thread is not None else ""


def with_call_info(config: RunnableConfig, info: CallInfo) -> RunnableConfig:
    """Return a copy of `config` that tells the tool which call it serves."""
    configurable = {**(config.get("configurable") or {}), CALL_CONFIG_KEY: info}
    return {**config, "configurable": configurable}


class SamplingModel:
    """A loop's model for MCP sampling, found from a call's config by a key.

    The key, not the model, goes in the config: configs are written where a chat model
    cannot go (a sub-agent's checkpoints keep its parent's `configurable`). The loop holds
    its `SamplingModel` and hands it to each toolset it is built with (`Samplers`).
    """

    def __init__(self, model: BaseChatModel) -> None:
        self.model = model
        self.key = uuid.uuid4().hex


class Samplers:
    """The sampling models of the loops a toolset serves, by key (the toolset's own).

    A loop's key stops resolving once the loop is gone.
    """

    def __init__(self) -> None:
        self._by_key: weakref.WeakValueDictionary[str, SamplingModel] = (
            weakref.WeakValueDictionary()
        )

    def add(self, sampling: SamplingModel) -> None:
        """Answer the sampling requests of a loop's calls with its model."""
        self._by_key[sampling.key] = sampling

    def of(self, info: CallInfo | None) -> BaseChatModel | None:
        """The model that answers sampling requests during the call `info` names, if any."""
        found = self._by_key.get(info.get("sampler", "")) if info else None
        return found.model if found is not None else None
