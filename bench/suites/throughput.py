"""Throughput: 200 concurrent short runs on one event loop.

Each run makes one round of one zero-time tool call, then answers. The runs share one
compiled graph and one scripted model whose replies are computed from each request
(`responder`), so concurrent runs never share a position in a script. The figure is
runs per second of `asyncio.gather` over all runs. Each side is held against the
contender of its own shape: ours in `plan_mode="native"` (one model, two model calls,
the planner's last reply is the answer) against plain `create_agent`; ours in JSON mode
(a plan, a plan that says `response`, an answer: three model calls, four steps)
against `create_agent` with an answer step.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.messages import ToolMessage

from agentloop import ModelOptions, create_tool_loop
from bench.contenders import (
    ONE_CHUNK,
    BenchChatModel,
    Graph,
    agent_input,
    agent_responder,
    build_create_agent,
    build_create_agent_answering,
    loop_input,
    loop_responder,
    sleeping_tool,
)
from bench.harness import Figure, Settings, Target, median, timed

__all__ = ["NAME", "profile_workload", "run"]

NAME = "throughput"
RUNS = 200
QUICK_RUNS = 100
COMMAND = {"tool_name": "get_item", "tool_kwargs": {"n": 1}}
TARGET = Target(1.0, at_most=False)


def _ours() -> Graph:
    planner = BenchChatModel([], responder=loop_responder(COMMAND), chunk_size=ONE_CHUNK)
    answerer = BenchChatModel([], responder=lambda _: "All done.", chunk_size=ONE_CHUNK)
    return create_tool_loop(
        planner,
        [sleeping_tool("get_item", 0)],
        models=ModelOptions(answer_model=answerer),
        max_rounds=5,
    )


def _ours_native() -> Graph:
    """Ours as a tool-calling agent: one model plans with tool calls and its reply answers.

    With its defaults a run makes create_agent's two model calls: the tool call, then
    the reply after its result, which the answer node adopts (no answer is started
    beside a plan whose own reply is the answer).
    """
    planner = BenchChatModel(
        [], responder=loop_responder(COMMAND, native=True), chunk_size=ONE_CHUNK
    )
    return create_tool_loop(
        planner, [sleeping_tool("get_item", 0)], plan_mode="native", max_rounds=5
    )


def _agent() -> Graph:
    return build_create_agent(agent_responder(COMMAND), [sleeping_tool("get_item", 0)])


def _agent_answering() -> Graph:
    return build_create_agent_answering(agent_responder(COMMAND), [sleeping_tool("get_item", 0)])


async def _runs_per_second(graph: Graph, payload: dict[str, Any], runs: int) -> tuple[float, float]:
    """Run `runs` runs at once; return runs per wall second and per CPU second."""
    timing = await timed(lambda: asyncio.gather(*(graph.ainvoke(payload) for _ in range(runs))))
    _check(timing.result)
    return runs / timing.wall_s, runs / max(timing.cpu_s, 1e-9)


def _check(outputs: list[dict[str, Any]]) -> None:
    """Every run made its one tool call and gave the scripted answer."""
    for output in outputs:
        answer = output.get("answer") or output["messages"][-1].content
        if answer != "All done.":
            msg = f"a run ended with an unexpected answer: {answer!r}"
            raise RuntimeError(msg)
        calls = output.get("tool_logs")
        if calls is None:  # create_agent: its calls are the transcript's tool messages
            calls = [m for m in output["messages"] if isinstance(m, ToolMessage)]
        if len(calls) != 1:
            msg = f"a run made {len(calls)} tool calls, not the 1 it was scripted to make"
            raise RuntimeError(msg)


async def run(settings: Settings) -> list[Figure]:
    """Measure runs per second of each side (interleaved, median of repeats)."""
    runs = QUICK_RUNS if settings.quick else RUNS
    ours_graph, agent_graph, answering_graph = _ours(), _agent(), _agent_answering()
    native_graph = _ours_native()
    await _runs_per_second(ours_graph, loop_input(), 10)  # warm-up
    await _runs_per_second(agent_graph, agent_input(), 10)
    await _runs_per_second(answering_graph, agent_input(), 10)
    await _runs_per_second(native_graph, loop_input(), 10)
    ours: list[float] = []
    agent: list[float] = []
    answering: list[float] = []
    native: list[float] = []
    ours_cpu: list[float] = []
    agent_cpu: list[float] = []
    for _ in range(settings.repeats):
        wall, cpu = await _runs_per_second(ours_graph, loop_input(), runs)
        ours.append(wall)
        ours_cpu.append(cpu)
        wall, cpu = await _runs_per_second(agent_graph, agent_input(), runs)
        agent.append(wall)
        agent_cpu.append(cpu)
        answering.append((await _runs_per_second(answering_graph, agent_input(), runs))[0])
        native.append((await _runs_per_second(native_graph, loop_input(), runs))[0])
    return [
        Figure(
            f"Throughput, {runs} concurrent runs, ours in plan_mode='native' (2 model calls)",
            median(native),
            median(agent),
            "runs/s",
            "create_agent",
            TARGET,
            {"ours": native, "contender": agent},
            "the same shape: one model plans by tool calls and its last reply is the answer",
        ),
        Figure(
            f"Throughput, {runs} concurrent runs, ours in JSON mode (3 model calls)",
            median(ours),
            median(answering),
            "runs/s",
            "create_agent + after_agent answer call",
            TARGET,
            {"ours": ours, "contender": answering},
            "the same shape: a plan, a plan that answers, the answer (4 steps)",
        ),
        Figure(
            f"Throughput, {runs} concurrent runs, JSON mode against plain create_agent",
            median(ours),
            median(agent),
            "runs/s",
            "create_agent",
            None,
            {"ours": ours, "contender": agent},
            "information: one model call and one step more than create_agent makes",
        ),
        Figure(
            f"Throughput, {runs} concurrent runs, JSON mode per CPU second",
            median(ours_cpu),
            median(agent_cpu),
            "runs/s",
            "create_agent",
            None,
            {"ours": ours_cpu, "contender": agent_cpu},
            "information: runs per second of process CPU time",
        ),
    ]


async def profile_workload(settings: Settings) -> None:
    """Run our side a few times (for `--profile throughput`)."""
    graph = _ours()
    for _ in range(max(2, settings.repeats)):
        await _runs_per_second(graph, loop_input(), QUICK_RUNS if settings.quick else RUNS)
