"""MCP servers as loop tools, with sessions that outlive runs.

By default each server has one session per toolset (a compiled loop or an `MCPToolset`),
shared by every run and thread: the tool list is fetched once, refreshed when the server
announces `tools/list_changed`, and a second run's first call starts no process. A
server configured with `"scope": "thread"` gets one session per thread, reused by the
thread's runs (closed once idle), and one with `"scope": "run"` one session per run,
closed when the run answers (or once idle). The default shares a server's state (a
login, a working directory) between every user of the loop: a server that holds
per-user state needs `thread` or `run`. The sessions live on one background event loop owned
by the toolset, so they work the same under `invoke` (a fresh event loop per call),
`ainvoke`, Jupyter and LangGraph's server.

A server that cannot start leaves its tools out (a log line, and a
`mcp_server_unavailable` event at the start of each run, both with its last stderr
lines) and is tried again in the background; `"required": true` makes that failure
fatal instead. The servers' resources are listed in `read_resource`'s description;
their prompts and argument completion are methods of the toolset.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import logging
import threading
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Self, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool

from agentloop.durability import resuming
from agentloop.durability.identity import OWNER_META_KEY
from agentloop.errors import ConfigurationError, MCPToolError, UnknownOutcomeError
from agentloop.governance.call_config import CallInfo, Samplers, call_info, call_thread
from agentloop.mcp.auth import MCPAuth, TokenRedactor, build_auth
from agentloop.mcp.bridge import CallBridge, ElicitationHandler, Suspended, Suspensions
from agentloop.mcp.client import CallHooks, ClientHandlers
from agentloop.mcp.config import MCPServerSpec, load_mcp_config
from agentloop.mcp.decode import DecodedResult, OutputCheck, output_check
from agentloop.mcp.listing import Listings
from agentloop.mcp.pools import SessionPools
from agentloop.mcp.prompts import completion_reference, list_prompts, prompt_messages
from agentloop.mcp.resources import Resources
from agentloop.mcp.sdk import ClientSession, http, types
from agentloop.mcp.session import MCPSessionPool
from agentloop.mcp.tools import READ_RESOURCE_TOOL, langchain_tool, tool_output
from agentloop.observability.redaction import redact_data

__all__ = ["READ_RESOURCE_TOOL", "MCPToolset", "McpServersConfig"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

McpServersConfig = str | Mapping[str, Any]
"""A path to a JSON/YAML `mcpServers` file, or the same content as a dict."""

MAX_TOOLS = 128
"""The default cap on the tools a toolset offers the planner per request."""
_LOST_PAUSE = (
    "The call to {tool!r} of MCP server {server!r} was waiting for an answer when its run "
    "paused, and is no longer in flight (the process that held it ended): it may or may "
    "not have taken effect, so it is not sent again."
)

CLOSE_TIMEOUT_S = 30.0
"""How long stopping a start-up, or closing the toolset, waits for its servers to stop."""

REFRESH_WAIT_S = 5.0
"""How long a loop waits for a tool list a server announced as changed before it plans."""


class MCPToolset:
    """The tools of some MCP servers, on sessions shared by every run.

    Use it as `with MCPToolset(config) as toolset:` (or `async with`), or call
    `close()` / `aclose()`; a toolset left open is closed when it is collected or at
    process exit. Log records are redacted with its secrets once the app passes its
    `redact` to `agentloop.install_log_redaction`.

    Args:
        servers: Server specs, a config file path, or an `mcpServers` dict.
        startup_timeout_s: Seconds a server may take to start.
        idle_timeout_s: A run-scoped session closes after this long without a call.
        retry_interval_s: First wait before a server that failed to start is tried again
            (doubling up to 5 minutes).
        model: Answers the servers' sampling requests (servers with `"sampling": true`)
            outside a loop's call; during a loop's call, the loop's model does.
        elicitation_handler: Answers the servers' questions during a call (sync or
            async; given the interrupt's value, returns what a resume would give).
            Without it, a question pauses the run with an interrupt a person answers.
        elicitation_wait_s: How long a call paused for a person's answer waits for its
            run to resume; then its server is answered "cancel".
        max_tools: At most this many of the servers' tools are offered to the planner
            (the first ones, in config order; None: no cap); a toolset with more logs
            a warning once. Choose which with a server's `"tools": {"include": [...],
            "exclude": [...]}` name patterns.
        auth: Per server name, how to authorize with it: an `MCPAuth` whose set fields
            win over the server's `auth` config entry (the code gives what a config
            file cannot: an authorization code flow's `redirect_handler` and
            `callback_handler`, a token `storage`), or any `Auth` of the HTTP library
            the SDK uses (`httpx` for mcp 1.x, `httpx2` for mcp 2.x).

    Raises:
        ConfigurationError: The config is invalid.
    """

    def __init__(
        self,
        servers: Sequence[MCPServerSpec] | McpServersConfig,
        *,
        startup_timeout_s: float = 30.0,
        idle_timeout_s: float = 300.0,
        retry_interval_s: float = 10.0,
        model: BaseChatModel | None = None,
        elicitation_handler: ElicitationHandler | None = None,
        elicitation_wait_s: float = 600.0,
        max_tools: int | None = MAX_TOOLS,
        auth: Mapping[str, MCPAuth | http.Auth] | None = None,
    ) -> None:
        if isinstance(servers, str | Mapping):
            servers = load_mcp_config(servers)
        given = dict(auth or {})
        unknown = sorted(set(given) - {spec.name for spec in servers})
        if unknown:
            msg = f"'auth' names servers not in the config: {', '.join(unknown)}"
            raise ConfigurationError(msg)
        self.specs = [self._authorized(spec, given.get(spec.name)) for spec in servers]
        self._specs = {spec.name: spec for spec in self.specs}
        if len(self._specs) != len(self.specs):
            msg = "two MCP servers share a name"
            raise ConfigurationError(msg)
        self.startup_timeout_s = startup_timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.retry_interval_s = retry_interval_s
        self.model = model
        self.elicitation_handler = elicitation_handler
        self.max_tools = max_tools
        self._warned_cap = False
        self.redact = TokenRedactor(self.secrets)
        """Redacts the configured secrets and every token an OAuth flow obtained since,
        from every result, error, event and question of the servers."""
        self.samplers = Samplers()
        """The models of the loops built with this toolset, for their calls' sampling."""
        self._pools = SessionPools(self.specs, self._pool, idle_timeout_s)
        self._finalizer = weakref.finalize(self, self._pools.close, 10.0)
        """Closes the sessions of a toolset nobody closed (collected, or at exit)."""
        self._discovery_lock = threading.Lock()
        self._listings = Listings(
            self.specs, self._pools, self._pool, self._routed_tool, retry_interval_s
        )
        self._resources = Resources(self.specs, self._pools, self._listings)
        self._suspensions = Suspensions(elicitation_wait_s, self._later)

    def _later(self, delay_s: float, function: Callable[[], None]) -> None:
        """Call `function` on the background loop after `delay_s`."""
        loop = self._pools.ensure_loop()
        loop.call_soon_threadsafe(loop.call_later, delay_s, function)

    @property
    def secrets(self) -> frozenset[str]:
        """The servers' own `env`, `headers`, URL and `auth` secrets (always redacted)."""
        return frozenset().union(*(spec.secrets for spec in self.specs))

    def _authorized(self, spec: MCPServerSpec, given: MCPAuth | http.Auth | None) -> MCPServerSpec:
        """`spec` with its authorization (config and code merged) in its connection."""
        where = f"MCP server {spec.name!r}"
        if given is not None and not isinstance(given, MCPAuth | http.Auth):
            msg = (
                f"{where}: 'auth' must be an MCPAuth or an {http.__name__}.Auth (the HTTP "
                f"library of the installed mcp SDK), got {type(given).__name__}"
            )
            raise ConfigurationError(msg)
        merged = given.over(spec.auth) if isinstance(given, MCPAuth) else spec.auth
        if given is None and merged is None:
            return spec
        url = spec.connection.get("url")
        if not isinstance(url, str):
            msg = f"{where}: 'auth' is for HTTP servers (a stdio server gets its secrets in 'env')"
            raise ConfigurationError(msg)
        if isinstance(given, http.Auth):
            return dataclasses.replace(spec, connection={**spec.connection, "auth": given})
        if merged is None:  # an http.Auth was handled above
            return spec
        built = build_auth(merged, url, where=where, learn=lambda *v: self.redact.learn(*v))
        return dataclasses.replace(
            spec,
            connection={**spec.connection, "auth": built},
            auth=merged,
            secrets=spec.secrets | merged.secrets,
        )

    def _meta(self, server: str, info: CallInfo | None) -> dict[str, Any] | None:
        """The `_meta` of a call: whom it serves, for servers configured to receive it."""
        if info is None or "owner" not in info or not self._specs[server].send_owner:
            return None
        return {OWNER_META_KEY: info["owner"]}

    def _handlers(self, spec: MCPServerSpec) -> ClientHandlers:
        return ClientHandlers(
            spec, lambda: self.model, lambda server: self._listings.changed(server),
            redact=self.redact,
        )  # fmt: skip

    def _pool(self, specs: Sequence[MCPServerSpec]) -> MCPSessionPool:
        return MCPSessionPool(
            specs, startup_timeout=self.startup_timeout_s, handlers=self._handlers
        )

    # -- sessions ------------------------------------------------------------------------

    def sessions_opened(
        self, run_id: str | None = None, *, thread_id: str | None = None
    ) -> dict[str, int]:
        """How many sessions each server has needed: shared ones, a run's or a thread's."""
        return self._pools.sessions_opened(run_id, thread_id=thread_id)

    @property
    def has_run_scope(self) -> bool:
        """Whether a run may open sessions of its own (`run`; `thread` without a thread)."""
        return any(spec.scope in ("run", "thread") for spec in self.specs)

    @property
    def open_runs(self) -> list[str]:
        """Runs whose own sessions are open."""
        return self._pools.open_runs

    @property
    def open_threads(self) -> list[str]:
        """Threads whose own sessions are open (closed once idle)."""
        return self._pools.open_threads

    def release(self, run_id: str) -> concurrent.futures.Future[None] | None:
        """Close a run's own sessions in the background (called when the run answers).

        Returns:
            Done once their processes exited (None when the run has none open): wait
            with `.result()` from sync code, `await asyncio.wrap_future(...)` from async.
        """
        return self._pools.release(run_id)

    def close(self, timeout: float = CLOSE_TIMEOUT_S) -> None:
        """Close every session (each server process exits) and stop the background loop.

        Safe to call twice; the toolset cannot be used afterwards.
        """
        self._finalizer.detach()
        self._pools.close(timeout)

    async def aclose(self) -> None:
        """`close` without blocking the caller's event loop."""
        await asyncio.to_thread(self.close)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- tools ---------------------------------------------------------------------------

    @property
    def version(self) -> int:
        """Changes whenever `tools` does."""
        return self._listings.version

    @property
    def unavailable(self) -> dict[str, str]:
        """Servers whose tools are missing now (they failed to start), with the reason."""
        return dict(self._listings.unavailable)

    @property
    def tools(self) -> list[BaseTool]:
        """The servers' tools now (listed on first access, which starts the servers).

        A start-up the caller stops waiting for (Ctrl-C, or past its time) is stopped
        before the error goes on: the servers it started are stopped with it.

        Raises:
            MCPTransportError: A `required` server could not be started.
            ConfigurationError: An allow list names a missing tool, or two servers
                offer a tool of the same name.
        """
        listings = self._listings
        with self._discovery_lock:
            if not listings.discovered:
                self._discover(self.startup_timeout_s * 2 + 30)
        tools = [tool for spec in self.specs for tool in listings.server_tools.get(spec.name, [])]
        tools = self._bounded(tools)
        if listings.resource_servers and all(tool.name != READ_RESOURCE_TOOL for tool in tools):
            tools.append(self._resources.tool(self._read))
        return tools

    def _discover(self, timeout_s: float) -> None:
        """Start the servers and list their tools, waiting at most `timeout_s`.

        A wait that ends early (Ctrl-C, the timeout) stops the start-up and waits for
        it to end: every server it started is stopped, and the toolset is left as it
        was, to be started again on next use.
        """
        started = self._pools.start(self._listings.discover())
        try:
            started.future.result(timeout_s)
        except BaseException:
            if started.stop():
                # its end: cancelled (or failed, or the wait timed out), nothing to report
                with contextlib.suppress(Exception):
                    started.future.exception(CLOSE_TIMEOUT_S)
            raise

    def _bounded(self, tools: list[BaseTool]) -> list[BaseTool]:
        """The first `max_tools` tools (in config order); a warning, once, when cut."""
        if self.max_tools is None or len(tools) <= self.max_tools:
            return tools
        if not self._warned_cap:
            self._warned_cap = True
            counts = {
                spec.name: len(self._listings.server_tools.get(spec.name, []))
                for spec in self.specs
            }
            logger.warning(
                "the MCP servers offer %d tools (%s); only the first %d, in config order, "
                "are offered to the planner. Choose which per server with "
                '"tools": {"include": ["name_or_glob*"], "exclude": [...]} in its config, '
                "or raise MCPToolset(max_tools=...) (each tool lengthens every plan prompt)",
                len(tools),
                ", ".join(f"{name}: {count}" for name, count in counts.items() if count),
                self.max_tools,
            )
        return tools[: self.max_tools]

    @property
    def started(self) -> bool:
        """Whether the servers were started and their tools listed."""
        return self._listings.discovered

    def stop_started(self, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        """Stop the servers and forget their tools; the toolset stays usable.

        A loop whose build failed leaves a toolset it started as it found it.
        """
        with self._discovery_lock:
            if self._listings.discovered:
                loop = self._pools.ensure_loop()
                asyncio.run_coroutine_threadsafe(self._listings.forget(), loop).result(timeout_s)

    def settle(self, timeout_s: float = REFRESH_WAIT_S) -> bool:
        """Wait until the lists servers announced as changed were fetched again (bounded).

        A loop calls this before it shows the planner its tools, so a tool a server
        added during the run (`tools/list_changed`) is offered in the very next round.

        Returns:
            Whether no refresh is pending anymore (False: the wait timed out).
        """
        return self._listings.settle(timeout_s)

    def _routed_tool(self, server: str, tool: dict[str, Any]) -> BaseTool:
        name = tool["name"]
        read_only = (tool.get("annotations") or {}).get("readOnlyHint") is True
        check = output_check(tool)

        async def call(config: RunnableConfig, **arguments: Any) -> tuple[str, dict[str, Any]]:
            info = call_info(config)
            thread_id = call_thread(config)
            key = (thread_id, info["call_key"]) if info and thread_id else None
            paused = self._suspensions.take(key) if key is not None else None
            if paused is not None:  # resumed: answer the question of the call in flight
                bridge, started = paused.bridge, paused.call
            else:
                if key is not None and not read_only and resuming(config):
                    raise UnknownOutcomeError(_LOST_PAUSE.format(tool=name, server=server))
                bridge = CallBridge(
                    server=server,
                    tool=name,
                    call_id=info["call_id"] if info else "",
                    read_only=read_only,
                    loop_name=info.get("loop", "") if info else "",
                    redact=self.redact,
                    model=self.samplers.of(info),
                    handler=self.elicitation_handler,
                )
                position = info.get("place", "") if info else ""
                started = self._pools.start(
                    self._call_on_loop(
                        server,
                        name,
                        arguments,
                        run_id=info["run_id"] if info else "",
                        thread_id=thread_id,
                        meta=self._meta(server, info),
                        hooks=bridge.hooks,
                        prefix=f"{name}:{position}" if position else name,
                        check=check,
                    )
                )

            def pause() -> None:  # the call stays in flight until the run resumes
                if key is None:
                    started.stop()
                else:
                    self._suspensions.keep(key, Suspended(bridge, started))

            try:
                decoded = await bridge.run(started, on_pause=pause)
            except MCPToolError as error:
                # the servers' secrets never leave, whatever the app's own redact hook
                redacted = self.redact(str(error))
                if redacted == str(error):
                    raise
                raise MCPToolError(redacted, server=error.server, tool=error.tool) from None
            output: tuple[str, dict[str, Any]] = redact_data(tool_output(decoded), self.redact)
            return output

        policy = self._specs[server].policies.get(name)
        return langchain_tool(
            server, tool, call, response_format="content_and_artifact", policy=policy
        )

    # -- calls ---------------------------------------------------------------------------

    async def call(
        self,
        server: str,
        tool: str,
        arguments: dict[str, Any],
        *,
        run_id: str = "",
        thread_id: str = "",
    ) -> Any:
        """Call a tool of `server` and return its result as data.

        Args:
            server: The server's name.
            tool: The tool's MCP name.
            arguments: The tool's arguments.
            run_id: The loop run whose session to use (for `"scope": "run"` servers, and
                `"thread"` ones without a thread).
            thread_id: The thread whose session to use (for `"scope": "thread"` servers).

        A question the server asks during the call is answered by `elicitation_handler`;
        without one it is declined (outside a graph run, nobody can be asked).

        Raises:
            MCPToolError: The tool reported an error (`isError`).
            MCPTransportError: The server died or cannot be reached; the next call
                starts it again.
        """
        bridge = CallBridge(
            server=server, tool=tool, redact=self.redact, handler=self.elicitation_handler
        )
        call = self._call_on_loop(
            server, tool, arguments, run_id=run_id, thread_id=thread_id, hooks=bridge.hooks
        )
        started = self._pools.start(call)
        return (await bridge.run(started, on_pause=started.stop)).value

    async def _call_on_loop(
        self,
        server: str,
        tool: str,
        arguments: dict[str, Any],
        *,
        run_id: str = "",
        thread_id: str = "",
        meta: dict[str, Any] | None = None,
        hooks: CallHooks | None = None,
        prefix: str = "",
        check: OutputCheck | None = None,
    ) -> DecodedResult:
        """One call, on the background loop."""
        pool = self._pools.pool_of(server, run_id, thread_id)
        try:
            decoded = await pool.call_tool_result(
                server, tool, arguments, hooks=hooks, prefix=prefix, meta=meta, check=check
            )
        finally:
            self._pools.touch(run_id, thread_id)
        self._resources.mentioned(server, decoded.resource_uris)
        return decoded

    async def read_resource(self, uri: str, *, server: str | None = None, run_id: str = "") -> Any:
        """Read a resource (as text, or with placeholders for binary contents).

        Args:
            uri: The resource's URI, as a result mentioned it.
            server: The server to ask (default: the one whose result mentioned the URI,
                else each server that has resources, in config order).
            run_id: The loop run whose session to use (for `"scope": "run"` servers).

        Raises:
            MCPToolError: No server could read it.
        """
        return (await self._read(uri, server=server, run_id=run_id, prefix="resource")).value

    async def _read(self, uri: str, server: str | None, run_id: str, prefix: str) -> DecodedResult:
        read = self._resources.read(uri, server=server, run_id=run_id, prefix=prefix)
        return await self._pools.run(read)

    # -- prompts and completion ------------------------------------------------------------

    async def list_prompts(self) -> dict[str, list[types.Prompt]]:
        """The prompts of each server that offers some (starting the servers as needed).

        Raises:
            MCPTransportError: A server could not be started or reached.
        """

        async def on_loop() -> dict[str, list[types.Prompt]]:
            listed = {s.name: await list_prompts(self._pool_of(s.name), s.name) for s in self.specs}
            return {server: prompts for server, prompts in listed.items() if prompts}

        return await self._pools.run(on_loop())

    async def get_prompt(
        self, server: str, name: str, arguments: dict[str, str] | None = None
    ) -> list[BaseMessage]:
        """A prompt of `server`, filled in with `arguments`, as LangChain messages.

        Raises:
            MCPToolError: The server refused (an unknown prompt, a missing argument).
            MCPTransportError: The server could not be started or reached.
        """
        result = await self._request(
            server, lambda session: session.get_prompt(name, arguments), f"getting prompt {name!r}"
        )
        return prompt_messages(result)

    async def complete(
        self,
        server: str,
        argument: str,
        value: str,
        *,
        prompt: str | None = None,
        resource_template: str | None = None,
        context: dict[str, str] | None = None,
    ) -> types.Completion:
        """Suggestions for an argument of a prompt or resource template (`completion/complete`).

        Args:
            server: The server's name.
            argument: The argument's name.
            value: What is typed so far.
            prompt: The prompt's name (or give `resource_template`).
            resource_template: The template's URI.
            context: Arguments already filled in.

        Raises:
            ValueError: Neither or both of `prompt` and `resource_template` are given.
            MCPToolError: The server refused (no completions, an unknown prompt).
            MCPTransportError: The server could not be started or reached.
        """
        reference = completion_reference(prompt, resource_template)
        asked = {"name": argument, "value": value}

        result = await self._request(
            server,
            lambda session: session.complete(reference, asked, context),
            "completing an argument",
        )
        return result.completion

    async def _request(
        self, server: str, send: Callable[[ClientSession], Awaitable[T]], what: str
    ) -> T:
        """Send one request to `server` outside a run (on the background loop)."""

        async def on_loop() -> T:
            return await self._pool_of(server).request(server, send, what=what)

        return await self._pools.run(on_loop())

    def _pool_of(self, server: str) -> MCPSessionPool:
        """The pool of a server outside a run (on the background loop)."""
        if server not in self._specs:
            msg = f"unknown MCP server {server!r}; configured: {', '.join(self._specs)}"
            raise ConfigurationError(msg)
        return self._pools.pool_of(server, "")
