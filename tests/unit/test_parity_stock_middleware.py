"""Stock middleware not covered elsewhere: the same effect as under `create_agent`.

Each test runs one small app through `create_agent` and through `create_tool_loop` (JSON
and native plan modes, `invoke` and `ainvoke`, an `InMemorySaver`) on one script of
decisions, and compares what a user observes: how often the models and tools were
called, what the tools returned, the state keys the middleware writes, what the
model saw. `ShellToolMiddleware` starts a real shell: tests/integration/test_parity_shell.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain.agents.middleware import (
    AutoModeMiddleware,
    FilesystemFileSearchMiddleware,
    LLMToolEmulator,
    ModelCallLimitMiddleware,
    ModelChoice,
    ModelFallbackMiddleware,
    ModelRetryMiddleware,
    ModelRouterMiddleware,
    ProviderToolSearchMiddleware,
    TodoListMiddleware,
    ToolCallRequest,
    ToolErrorMiddleware,
)
from langchain_core.decisions import BaseDecisionModel, ClassifierResponse, Question
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.tools import tool
from parity import Call, agent_of, ask, kinds, loop_of, thread, tool_calls, tool_outcomes
from pydantic import Field

from agentloop.testing import ScriptedChatModel, plan_reply, tool_call_turns

ran: list[Call] = []


@tool
def weather(city: str) -> str:
    """Today's weather in a city."""
    ran.append(("weather", {"city": city}))
    return f"sunny in {city}"


@tool
def send_email(to: str, body: str) -> str:
    """Send an email."""
    ran.append(("send_email", {"to": to, "body": body}))
    return f"sent to {to}"


@tool
def parse_date(text: str) -> str:
    """Parse a date."""
    ran.append(("parse_date", {"text": text}))
    msg = f"no date in {text!r}"
    raise ValueError(msg)


@tool
def fetch(url: str) -> str:
    """Fetch a page."""
    msg = f"{url} is down"
    raise RuntimeError(msg)


WEATHER: Call = ("weather", {"city": "Paris"})
EMAIL: Call = ("send_email", {"to": "ann@example.test", "body": "Lunch?"})


def _plans(rounds: list[list[Call]]) -> list[str | AIMessage]:
    """The planner's script for `rounds`, then `response`."""
    return [
        *(
            plan_reply("execute", [{"tool_name": n, "tool_kwargs": a} for n, a in calls])
            for calls in rounds
        ),
        plan_reply("response"),
    ]


def _system(request: list[BaseMessage]) -> str:
    first = request[0]
    return first.text if isinstance(first, SystemMessage) else ""


class Decisions(BaseDecisionModel):
    """A decision model answering every request with the same scripted answers."""

    model: str = "scripted"
    answers: dict[str, Any]
    seen: list[Any] = Field(default_factory=list)

    @property
    def _provider(self) -> str:
        return "scripted"

    def _classify(self, state: Any, questions: dict[str, Question]) -> ClassifierResponse:
        self.seen.append(state)
        return ClassifierResponse.model_validate({"model": self.model, "answers": self.answers})


# -- TodoListMiddleware: its tool, its state key, its system prompt -----------------------


TODOS = [{"content": "look up the weather", "status": "in_progress"}]


async def test_todo_list_writes_todos_and_adds_its_prompt(run_loop: Any, plan_mode: str) -> None:
    rounds = [[("write_todos", {"todos": TODOS})], [WEATHER]]
    agent = agent_of([weather], rounds, [TodoListMiddleware()])
    theirs = await run_loop(agent.graph, ask("Weather in Paris?"), thread("a"))

    loop = loop_of([weather], rounds, [TodoListMiddleware()], plan_mode=plan_mode)
    ours = await run_loop(loop.graph, ask("Weather in Paris?"), thread("b"))
    assert ours["status"] == "ok"
    assert ours["todos"] == theirs["todos"] == TODOS
    assert kinds(ours["messages"]) == kinds(theirs["messages"])
    assert tool_outcomes(ours["messages"]) == tool_outcomes(theirs["messages"])
    assert agent.model.request_count == loop.planner.request_count == 3
    prompt = _system(agent.model.requests[0])
    assert "`write_todos`" in prompt  # the middleware's part of the system prompt
    for request in loop.planner.requests:  # the app's part, then the loop's rules
        assert _system(request).startswith(prompt)


async def test_todo_list_refuses_parallel_writes(run_loop: Any, plan_mode: str) -> None:
    rounds = [[("write_todos", {"todos": TODOS}), ("write_todos", {"todos": TODOS})]]
    agent = agent_of([weather], rounds, [TodoListMiddleware()])
    theirs = await run_loop(agent.graph, ask("Plan it."), thread("a"))

    loop = loop_of([weather], rounds, [TodoListMiddleware()], plan_mode=plan_mode)
    ours = await run_loop(loop.graph, ask("Plan it."), thread("b"))
    assert ours["status"] == "ok"
    assert "todos" not in ours and "todos" not in theirs  # neither call ran
    assert kinds(ours["messages"]) == kinds(theirs["messages"])
    assert tool_outcomes(ours["messages"]) == tool_outcomes(theirs["messages"])
    assert [status for _, status, _ in tool_outcomes(ours["messages"])] == ["error", "error"]
    assert [r["error_type"] for r in ours["tool_logs"]] == ["refused", "refused"]


# -- LLMToolEmulator: the emulating model answers for the tool ----------------------------


async def test_tool_emulator_answers_for_the_tool(run_loop: Any, plan_mode: str) -> None:
    ran.clear()
    emulator = ScriptedChatModel(["rain in Paris (emulated)"] * 2)
    agent = agent_of([weather], [[WEATHER]], [LLMToolEmulator(tools=["weather"], model=emulator)])
    theirs = await run_loop(agent.graph, ask("Weather in Paris?"), thread("a"))
    assert ran == []

    emulator = ScriptedChatModel(["rain in Paris (emulated)"] * 2)
    middleware = [LLMToolEmulator(tools=["weather"], model=emulator)]
    loop = loop_of([weather], [[WEATHER]], middleware, plan_mode=plan_mode)
    ours = await run_loop(loop.graph, ask("Weather in Paris?"), thread("b"))
    assert ran == []  # the tool itself never ran
    assert emulator.request_count == 1
    assert "weather" in emulator.requests[0][-1].text
    assert tool_outcomes(ours["messages"]) == tool_outcomes(theirs["messages"])
    assert tool_outcomes(ours["messages"]) == [("weather", "success", "rain in Paris (emulated)")]
    assert ours["tool_logs"][0]["result"] == "rain in Paris (emulated)"


# -- FilesystemFileSearchMiddleware: its two tools on a real folder -----------------------


async def test_file_search_tools_search_the_folder(
    run_loop: Any, plan_mode: str, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("alpha\nbeta gamma\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.py").write_text("print('beta')\n")
    rounds = [[("glob_search", {"pattern": "**/*.py"}), ("grep_search", {"pattern": "beta"})]]

    def search() -> list[Any]:
        return [FilesystemFileSearchMiddleware(root_path=str(tmp_path), use_ripgrep=False)]

    agent = agent_of([weather], rounds, search())
    theirs = await run_loop(agent.graph, ask("Where is beta?"), thread("a"))
    loop = loop_of([weather], rounds, search(), plan_mode=plan_mode)
    ours = await run_loop(loop.graph, ask("Where is beta?"), thread("b"))
    assert ours["status"] == "ok"
    assert tool_outcomes(ours["messages"]) == tool_outcomes(theirs["messages"])
    assert tool_outcomes(ours["messages"]) == [
        ("glob_search", "success", "/src/main.py"),
        ("grep_search", "success", "/notes.txt\n/src/main.py"),
    ]
    offered = {t["function"]["name"] for t in agent.model.bound_tools}
    assert offered == {"weather", "glob_search", "grep_search"}
    if plan_mode == "native":
        assert {t["function"]["name"] for t in loop.planner.bound_tools} == offered


# -- ToolErrorMiddleware: the tool's own exception, turned into the model's message ------


def _on_error(error: Exception, request: ToolCallRequest) -> str | None:
    if isinstance(error, ValueError):  # the tool's own exception type
        return f"{type(error).__name__} in {request.tool_call['name']}: fix the input"
    return None


async def test_tool_error_middleware_sees_the_tools_own_exception(
    run_loop: Any, plan_mode: str
) -> None:
    ran.clear()
    rounds = [[("parse_date", {"text": "soon"}), WEATHER]]
    agent = agent_of([parse_date, weather], rounds, [ToolErrorMiddleware(_on_error)])
    theirs = await run_loop(agent.graph, ask("When?"), thread("a"))
    assert ran.count(("parse_date", {"text": "soon"})) == 1
    ran.clear()

    loop = loop_of(
        [parse_date, weather], rounds, [ToolErrorMiddleware(_on_error)], plan_mode=plan_mode
    )
    ours = await run_loop(loop.graph, ask("When?"), thread("b"))
    assert ours["status"] == "ok"
    assert ran.count(("parse_date", {"text": "soon"})) == 1  # not retried either
    assert kinds(ours["messages"]) == kinds(theirs["messages"])
    ((_, status, content), weathered) = tool_outcomes(ours["messages"])
    assert status == "error" and "ValueError in parse_date: fix the input" in content
    assert weathered == tool_outcomes(theirs["messages"])[1]
    record = ours["tool_logs"][0]
    assert not record["success"] and record["attempts"] == 1
    assert "ValueError in parse_date: fix the input" in record["error"]
    # the planner's next request quotes the middleware's message, as the model's does
    assert "ValueError in parse_date: fix the input" in "\n".join(
        str(m.content) for m in loop.planner.requests[1]
    )


async def test_an_exception_tool_error_middleware_lets_through_fails_the_call(
    run_loop: Any, plan_mode: str
) -> None:
    rounds = [[("fetch", {"url": "https://example.test"})]]
    agent = agent_of([fetch], rounds, [ToolErrorMiddleware(_on_error)])
    with pytest.raises(RuntimeError, match="is down"):  # create_agent's run raises it
        await run_loop(agent.graph, ask("Fetch it."), thread("a"))

    loop = loop_of([fetch], rounds, [ToolErrorMiddleware(_on_error)], plan_mode=plan_mode)
    ours = await run_loop(loop.graph, ask("Fetch it."), thread("b"))
    assert ours["status"] == "ok"  # the loop's run goes on: the call's record failed
    [record] = ours["tool_logs"]
    assert not record["success"] and "https://example.test is down" in record["error"]


# -- AutoModeMiddleware: a decision model blocks a risky call -----------------------------


async def test_auto_mode_blocks_the_risky_call_only(run_loop: Any, plan_mode: str) -> None:
    def auto() -> tuple[Decisions, list[Any]]:
        decisions = Decisions(answers={"is_risky": {"type": "noul", "noul": 0.9}})
        return decisions, [AutoModeMiddleware(tools=["send_email"], classifier=decisions)]

    ran.clear()
    rounds = [[WEATHER, EMAIL]]
    decisions, middleware = auto()
    agent = agent_of([weather, send_email], rounds, middleware)
    theirs = await run_loop(agent.graph, ask("Weather, then mail Ann"), thread("a"))
    assert ran == [WEATHER] and len(decisions.seen) == 1
    ran.clear()

    decisions, middleware = auto()
    loop = loop_of([weather, send_email], rounds, middleware, plan_mode=plan_mode)
    ours = await run_loop(loop.graph, ask("Weather, then mail Ann"), thread("b"))
    assert ran == [WEATHER]  # the mail was not sent
    assert len(decisions.seen) == 1  # only the listed tool was classified
    seen = decisions.seen[0]
    assert seen["tool_call"]["name"] == "send_email"
    assert seen["tool_call"]["args"] == EMAIL[1]
    assert [type(m).__name__ for m in seen["messages"]] == ["HumanMessage", "AIMessage"]
    (weathered, (name, status, content)) = tool_outcomes(ours["messages"])
    assert weathered == tool_outcomes(theirs["messages"])[0]
    assert (name, status) == ("send_email", "error")
    assert tool_outcomes(theirs["messages"])[1][2] in content  # its blocked message
    assert kinds(ours["messages"]) == kinds(theirs["messages"])


# -- ModelFallbackMiddleware, ModelRetryMiddleware: model calls counted alike -------------


async def test_model_fallback_takes_over_each_failed_call(run_loop: Any, plan_mode: str) -> None:
    down = ScriptedChatModel([ValueError("planner is down")], repeat_last=True)
    backup = ScriptedChatModel([*tool_call_turns([[WEATHER]]), "Done."])
    agent = agent_of([weather], [], [ModelFallbackMiddleware(backup)], model=down)
    theirs = await run_loop(agent.graph, ask("Weather in Paris?"), thread("a"))
    assert (down.request_count, backup.request_count) == (2, 2)

    down = ScriptedChatModel([ValueError("planner is down")], repeat_last=True)
    backup = ScriptedChatModel(_plans([[WEATHER]]))
    middleware = [ModelFallbackMiddleware(backup)]
    loop = loop_of([weather], [], middleware, plan_mode=plan_mode, planner=down)
    ours = await run_loop(loop.graph, ask("Weather in Paris?"), thread("b"))
    assert ours["status"] == "ok" and ours["answer"] == "Done."
    assert (down.request_count, backup.request_count) == (2, 2)  # once each, no loop retry
    assert kinds(ours["messages"]) == kinds(theirs["messages"])
    assert tool_calls(ours["messages"]) == tool_calls(theirs["messages"]) == [WEATHER]


async def test_model_fallback_takes_over_a_transient_failure_at_once(
    run_loop: Any, plan_mode: str
) -> None:
    down = ScriptedChatModel([ConnectionError("reset")], repeat_last=True)
    backup = ScriptedChatModel([*tool_call_turns([[WEATHER]]), "Done."])
    agent = agent_of([weather], [], [ModelFallbackMiddleware(backup)], model=down)
    await run_loop(agent.graph, ask("Weather in Paris?"), thread("a"))
    assert (down.request_count, backup.request_count) == (2, 2)

    down = ScriptedChatModel([ConnectionError("reset")], repeat_last=True)
    backup = ScriptedChatModel(_plans([[WEATHER]]))
    middleware = [ModelFallbackMiddleware(backup)]
    loop = loop_of([weather], [], middleware, plan_mode=plan_mode, planner=down)
    ours = await run_loop(loop.graph, ask("Weather in Paris?"), thread("b"))
    assert ours["status"] == "ok" and ours["answer"] == "Done."
    assert (down.request_count, backup.request_count) == (2, 2)  # the loop retries nothing


def _retrying(*retry_on: type[Exception]) -> ModelRetryMiddleware:
    return ModelRetryMiddleware(
        max_retries=1, retry_on=retry_on or (Exception,), initial_delay=0, jitter=False
    )


async def test_model_retry_retries_each_call_once(run_loop: Any, plan_mode: str) -> None:
    flaky = ScriptedChatModel(
        [ValueError("blip"), *tool_call_turns([[WEATHER]]), ValueError("blip"), "Done."]
    )
    agent = agent_of([weather], [], [_retrying(ValueError)], model=flaky)
    theirs = await run_loop(agent.graph, ask("Weather in Paris?"), thread("a"))
    assert flaky.request_count == 4

    plans = _plans([[WEATHER]])
    flaky = ScriptedChatModel([ValueError("blip"), plans[0], ValueError("blip"), plans[1]])
    loop = loop_of([weather], [], [_retrying(ValueError)], plan_mode=plan_mode, planner=flaky)
    ours = await run_loop(loop.graph, ask("Weather in Paris?"), thread("b"))
    assert ours["status"] == "ok" and ours["answer"] == "Done."
    assert flaky.request_count == 4  # retry_on matched the model's own ValueError
    assert kinds(ours["messages"]) == kinds(theirs["messages"])


async def test_model_retry_replaces_the_loops_own_retry(run_loop: Any, plan_mode: str) -> None:
    down = ScriptedChatModel([ConnectionError("reset")], repeat_last=True)
    agent = agent_of([weather], [], [_retrying()], model=down)
    theirs = await run_loop(agent.graph, ask("Weather in Paris?"), thread("a"))
    message = theirs["messages"][-1].content
    assert message == "Model call failed after 2 attempts with ConnectionError: reset"
    assert down.request_count == 2

    down = ScriptedChatModel([ConnectionError("reset")], repeat_last=True)
    loop = loop_of([weather], [], [_retrying()], plan_mode=plan_mode, planner=down)
    ours = await run_loop(loop.graph, ask("Weather in Paris?"), thread("b"))
    # its message, written without the model, is no plan: the run ends with it
    assert down.request_count == 2  # a transient error, not retried by the loop too
    assert ours["status"] == "ok" and ours["answer"] == message
    assert kinds(ours["messages"]) == kinds(theirs["messages"]) == ["Human", "AI"]
    assert loop.answerer.request_count == 0


async def test_model_retry_gives_up_after_a_round_as_create_agent_does(
    run_loop: Any, plan_mode: str
) -> None:
    script = [*tool_call_turns([[WEATHER]]), ConnectionError("reset")]
    flaky = ScriptedChatModel(script, repeat_last=True)
    agent = agent_of([weather], [], [_retrying()], model=flaky)
    theirs = await run_loop(agent.graph, ask("Weather in Paris?"), thread("a"))
    message = theirs["messages"][-1].content
    assert message == "Model call failed after 2 attempts with ConnectionError: reset"

    plans = _plans([[WEATHER]])
    flaky = ScriptedChatModel([plans[0], ConnectionError("reset")], repeat_last=True)
    loop = loop_of([weather], [], [_retrying()], plan_mode=plan_mode, planner=flaky)
    ours = await run_loop(loop.graph, ask("Weather in Paris?"), thread("b"))
    assert flaky.request_count == 3 and loop.answerer.request_count == 0
    assert ours["status"] == "ok" and ours["answer"] == message
    assert kinds(ours["messages"]) == kinds(theirs["messages"])
    assert tool_calls(ours["messages"]) == tool_calls(theirs["messages"]) == [WEATHER]


# -- ModelCallLimitMiddleware: the loop asks one model call more --------------------------


async def test_model_call_limit_counts_the_loops_answer_call(run_loop: Any, plan_mode: str) -> None:
    agent = agent_of([weather], [[WEATHER]], [ModelCallLimitMiddleware(run_limit=2)])
    theirs = await run_loop(agent.graph, ask("Weather in Paris?"), thread("a"))
    assert agent.model.request_count == 2 and theirs["messages"][-1].content == "Done."

    # the same limit: two planner calls, and the answer call is over it
    limited = [ModelCallLimitMiddleware(run_limit=2)]
    loop = loop_of([weather], [[WEATHER]], limited, plan_mode=plan_mode)
    ours = await run_loop(loop.graph, ask("Weather in Paris?"), thread("b"))
    assert (loop.planner.request_count, loop.answerer.request_count) == (2, 0)
    assert ours["status"] == "ended"
    assert ours["answer"] == "Model call limits exceeded: run limit (2/2)"
    assert tool_calls(ours["messages"]) == tool_calls(theirs["messages"]) == [WEATHER]

    # one more: the same answer
    loop = loop_of(
        [weather], [[WEATHER]], [ModelCallLimitMiddleware(run_limit=3)], plan_mode=plan_mode
    )
    ours = await run_loop(loop.graph, ask("Weather in Paris?"), thread("c"))
    assert ours["status"] == "ok" and ours["answer"] == "Done."
    assert kinds(ours["messages"]) == kinds(theirs["messages"])


# -- ModelRouterMiddleware: every model call goes to the chosen model ---------------------


def _router(chosen: ScriptedChatModel, other: ScriptedChatModel) -> tuple[Decisions, Any]:
    choice = {"type": "choice", "choice": "big", "probabilities": {"big": 0.8, "small": 0.2}}
    decisions = Decisions(answers={"model_route": {**choice, "confidence": 0.8}})
    router = ModelRouterMiddleware(
        choices={
            "small": ModelChoice(model=other, criteria="easy questions"),
            "big": ModelChoice(model=chosen, criteria="hard questions"),
        },
        instructions="Pick the cheapest model that can answer.",
        classifier=decisions,
    )
    return decisions, router


@pytest.mark.filterwarnings("ignore:The middleware `ModelRouterMiddleware` is in beta")
async def test_model_router_sends_every_call_to_the_chosen_model(
    run_loop: Any, plan_mode: str
) -> None:
    big, small = ScriptedChatModel([*tool_call_turns([[WEATHER]]), "Done."]), ScriptedChatModel()
    decisions, router = _router(big, small)
    agent = agent_of([weather], [[WEATHER]], [router])
    theirs = await run_loop(agent.graph, ask("Weather in Paris?"), thread("a"))
    assert (agent.model.request_count, small.request_count, big.request_count) == (0, 0, 2)

    big, small = ScriptedChatModel([*_plans([[WEATHER]]), "Done."]), ScriptedChatModel()
    decisions, router = _router(big, small)
    loop = loop_of([weather], [[WEATHER]], [router], plan_mode=plan_mode)
    ours = await run_loop(loop.graph, ask("Weather in Paris?"), thread("b"))
    assert ours["status"] == "ok" and ours["answer"] == "Done."
    # the planner's two calls and the answer's: the loop's own models are never asked
    assert (loop.planner.request_count, loop.answerer.request_count) == (0, 0)
    assert (small.request_count, big.request_count) == (0, 3)
    assert len(decisions.seen) == 1 and decisions.seen[0].text == "Weather in Paris?"
    assert ours["model_route"] == theirs["model_route"]
    assert ours["model_route"].choice == "big"
    assert kinds(ours["messages"]) == kinds(theirs["messages"])


# -- ProviderToolSearchMiddleware: deferred tools and the provider's search tool ----------


class OpenAIModel(ScriptedChatModel):
    """A scripted model its provider detection takes for OpenAI's."""

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> Any:
        params = super()._get_ls_params(stop=stop, **kwargs)
        params["ls_provider"] = "openai"
        return params


async def test_provider_tool_search_defers_the_named_tool(run_loop: Any, plan_mode: str) -> None:
    ran.clear()
    rounds = [[WEATHER, EMAIL]]
    searching = [ProviderToolSearchMiddleware(searchable_tools=["send_email"])]
    model = OpenAIModel([*tool_call_turns(rounds), "Done."])
    agent = agent_of([weather, send_email], rounds, searching, model=model)
    theirs = await run_loop(agent.graph, ask("Weather, then mail Ann"), thread("a"))
    assert model.bound_tools[-1] == {"type": "tool_search"}
    ran.clear()

    searching = [ProviderToolSearchMiddleware(searchable_tools=["send_email"])]
    planner = OpenAIModel(_plans(rounds))
    loop = loop_of([weather, send_email], rounds, searching, plan_mode=plan_mode, planner=planner)
    ours = await run_loop(loop.graph, ask("Weather, then mail Ann"), thread("b"))
    assert ours["status"] == "ok" and ours["answer"] == "Done."  # the answer call too
    assert ran == [WEATHER, EMAIL]
    assert tool_outcomes(ours["messages"]) == tool_outcomes(theirs["messages"])
    if plan_mode == "native":  # bound as create_agent binds them
        bound = planner.bound_tools
        assert bound[-1] == {"type": "tool_search"}
        deferred = {t["function"]["name"] for t in bound if t.get("defer_loading")}
        assert deferred == {"send_email"}
