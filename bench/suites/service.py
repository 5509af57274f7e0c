"""Service: whole runs against a simulated model service with provider-like latency.

The model (`bench.simulated.SimulatedChatModel`) waits a time to first token plus
prefill before its first chunk and streams the rest at an output rate; the tools sleep
1.5 s (web search) or 0.3 s. Our loop (`create_tool_loop` with its defaults, one model
for plans and answers, a checkpointer; once with `plan_mode="json"`, the default, and
once with `plan_mode="native"`) and `langchain.agents.create_agent` (a checkpointer) get
the same decisions on five tasks: chat (no tool), fanout (4 independent calls, one
slow), chain (3 dependent calls, one round each), chainref (the chain as one plan of
ours whose later commands reference earlier results) and long (12 rounds of 1.5 kB
results). Each task reports, per plan mode, wall time, the critical-path floor, model
calls, input tokens, the input tokens a prefix cache would not reuse, and output tokens.

The runs of one repetition run at the same time on one event loop, started 0.2 s apart:
they mostly wait, and the framework's CPU time is a small share of every figure.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Literal

from langchain.agents import create_agent
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver

from agentloop import create_tool_loop
from bench.contenders import Graph
from bench.harness import Figure, Settings, Target, median
from bench.service_measure import RunMeasure
from bench.service_tasks import TASKS, Task, ToolCallLog, service_tools
from bench.simulated import Decisions, RequestLog, ServiceProfile, SimulatedChatModel

__all__ = ["NAME", "PLAN_MODES", "profile_workload", "run", "run_agent", "run_ours"]

NAME = "service"
QUICK_SCALE = 0.25
"""The time scale of `--quick` when none is given."""
WARM_UP_SCALE = 0.01
STAGGER_S = 0.2
"""Seconds between the starts of concurrent runs, so that their first steps (the busiest:
building and rendering the first prompt) do not compete for the CPU."""
MAX_ROUNDS = 16
"""Above every task's need (the default, 5, is too few for the long task): each run ends
when the planner chooses `response`, as it would with a real model."""
PlanMode = Literal["json", "native"]
PLAN_MODES: tuple[PlanMode, ...] = ("json", "native")
"""Our side's plan modes, each measured against the same `create_agent` runs."""
WALL_TARGETS: dict[PlanMode, dict[str, float]] = {
    "json": {"chat": 1.0, "fanout": 1.05, "chain": 1.15, "chainref": 0.9, "long": 0.95},
    "native": {"chat": 1.0, "fanout": 1.0, "chain": 1.0, "chainref": 0.9, "long": 0.9},
}
"""Wall time, ours / create_agent, by plan mode and task."""
TOKEN_TARGETS: dict[PlanMode, dict[str, float]] = {
    "json": {"chat": 8.0, "fanout": 3.0, "chain": 3.0, "chainref": 3.0, "long": 2.0},
    "native": {"chat": 1.5, "fanout": 1.5, "chain": 1.5, "chainref": 1.5, "long": 1.5},
}
"""Input tokens, ours / create_agent, by plan mode and task."""

Side = Literal["json", "native", "create_agent"]


def _profile(time_scale: float) -> ServiceProfile:
    return ServiceProfile(time_scale=time_scale)


def _check_answer(task: Task, side: Side, answer: str) -> None:
    if answer != task.answer:
        msg = f"{side} ended the {task.name} task with an unexpected answer: {answer[:200]!r}"
        raise RuntimeError(msg)


def _check_calls(task: Task, side: Side, tools: ToolCallLog) -> None:
    received = sorted(map(repr, tools.received()))
    if received != sorted(map(repr, task.expected_calls())):
        msg = f"{side} made unexpected tool calls in the {task.name} task: {received}"
        raise RuntimeError(msg)


def _thread() -> RunnableConfig:
    """A thread of its own for one run, as Studio, the server and production give each run."""
    return {"configurable": {"thread_id": uuid.uuid4().hex}}


async def run_ours(task: Task, time_scale: float, plan_mode: PlanMode = "json") -> RunMeasure:
    """Run our loop, with its defaults but the plan mode, on a task; return what it waited for."""
    log, tools = RequestLog(), ToolCallLog()
    plans = task.native_plans() if plan_mode == "native" else task.plan_texts()
    decisions = Decisions(plans=plans, answer=task.answer)
    model = SimulatedChatModel(_profile(time_scale), decisions, log)
    graph = create_tool_loop(
        model,
        service_tools(tools, time_scale),
        max_rounds=MAX_ROUNDS,
        plan_mode=plan_mode,
        checkpointer=InMemorySaver(),
    )
    started = time.perf_counter()
    out = await graph.ainvoke({"user_input": task.request}, _thread())
    wall = time.perf_counter() - started
    _check_answer(task, plan_mode, out["answer"])
    if not task.plans:  # a plan with references is judged by the suite, not refused
        _check_calls(task, plan_mode, tools)
    return RunMeasure(wall, log.requests, tools, out.get("tool_logs") or [])


async def run_agent(task: Task, time_scale: float) -> RunMeasure:
    """Run `create_agent` on a task (the same decisions); return what it waited for."""
    log, tools = RequestLog(), ToolCallLog()
    decisions = Decisions(agent_turns=task.agent_turns(), answer=task.answer)
    model = SimulatedChatModel(_profile(time_scale), decisions, log)
    graph: Graph = create_agent(
        model, service_tools(tools, time_scale), checkpointer=InMemorySaver()
    )
    started = time.perf_counter()
    out = await graph.ainvoke({"messages": [("user", task.request)]}, _thread())
    wall = time.perf_counter() - started
    _check_answer(task, "create_agent", out["messages"][-1].text)
    _check_calls(task, "create_agent", tools)
    return RunMeasure(wall, log.requests, tools)


def references_verdict(task: Task, measure: RunMeasure) -> str:
    """Return "" when every reference reached the tools and the records resolved, else why not.

    Args:
        task: A task whose plans reference earlier results (`$N`, `${N}`).
        measure: Our run of it.

    Returns:
        "", "references not supported" (the tools received the references as written)
        or "references resolved wrongly".
    """
    expected = task.expected_calls()
    received = measure.tools.received()
    recorded = [(record["tool_name"], dict(record["kwargs"])) for record in measure.records]
    if received == expected and recorded == expected:
        return ""
    if any("$" in str(args) for _, args in received):
        return "references not supported"
    return "references resolved wrongly"


Runs = dict[tuple[Side, str], RunMeasure]
"""One repetition's runs, by side and task."""


async def _after(delay_s: float, job: Callable[[], Awaitable[RunMeasure]]) -> RunMeasure:
    await asyncio.sleep(delay_s)
    return await job()


async def _repetition(time_scale: float, *, concurrent: bool) -> Runs:
    """Run every task on both sides once (`create_agent` once per distinct contender).

    Concurrent runs start `STAGGER_S` apart, the longest tasks first.
    """
    jobs: list[tuple[tuple[Side, str], Callable[[], Awaitable[RunMeasure]]]] = []
    for task in reversed(TASKS):
        for mode in PLAN_MODES:
            jobs.append(((mode, task.name), partial(run_ours, task, time_scale, mode)))
        if not task.agent_task:
            jobs.append((("create_agent", task.name), partial(run_agent, task, time_scale)))
    if concurrent:
        starts = (_after(index * STAGGER_S, job) for index, (_, job) in enumerate(jobs))
        results = await asyncio.gather(*starts)
    else:
        results = [await job() for _, job in jobs]
    return {key: result for (key, _), result in zip(jobs, results, strict=True)}


def _scaled(label: str, time_scale: float) -> str:
    return label if time_scale == 1 else f"{label} (time x{time_scale:g})"


def _task_figures(
    task: Task,
    mode: PlanMode,
    ours: list[RunMeasure],
    agent: list[RunMeasure],
    time_scale: float,
) -> list[Figure]:
    name = f"Service {task.name}, {mode}"
    versus = "create_agent" if not task.agent_task else f"create_agent, {task.agent_task}"
    missing = references_verdict(task, ours[0]) if task.plans else ""

    def figure(
        label: str,
        unit: str,
        value: Callable[[RunMeasure], float],
        target: Target | None = None,
        notes: str = "information",
        *,
        scaled: bool = False,
        why_no_ratio: str = "",
    ) -> Figure:
        mine, theirs = [float(value(m)) for m in ours], [float(value(m)) for m in agent]
        return Figure(
            _scaled(f"{name}: {label}", time_scale) if scaled else f"{name}: {label}",
            median(mine),
            median(theirs),
            unit,
            versus,
            target,
            {"ours": mine, "contender": theirs},
            notes,
            why_no_ratio,
        )

    middle_ours = sorted(ours, key=lambda m: m.wall_s)[len(ours) // 2]
    middle_agent = sorted(agent, key=lambda m: m.wall_s)[len(agent) // 2]
    notes = f"ours: {middle_ours.breakdown()}; create_agent: {middle_agent.breakdown()}"
    if missing:
        notes += f"; {missing}: the tools received {middle_ours.tools.received()}"
    return [
        figure(
            "wall time",
            "s",
            lambda m: m.wall_s,
            Target(WALL_TARGETS[mode][task.name]),
            notes,
            scaled=True,
            why_no_ratio=missing,
        ),
        figure(
            "critical-path floor",
            "s",
            lambda m: m.floor_s,
            notes="information: model time to first token + prefill + output and tool time "
            "of the steps on the critical path, no framework cost",
            scaled=True,
        ),
        figure("model calls", "calls", lambda m: len(m.requests)),
        figure(
            "input tokens",
            "tokens",
            lambda m: m.input_tokens,
            Target(TOKEN_TARGETS[mode][task.name]),
            "4 characters per token",
        ),
        figure(
            "uncached input tokens",
            "tokens",
            lambda m: m.uncached_tokens,
            notes="information: each request's input tokens minus its longest common prefix "
            "with an earlier request of the same run",
        ),
        figure("output tokens", "tokens", lambda m: m.output_tokens, notes="information: sent"),
    ]


def time_scale_of(settings: Settings) -> float:
    """Return the time scale of a run of the suite."""
    if settings.time_scale is not None:
        return settings.time_scale
    return QUICK_SCALE if settings.quick else 1.0


async def run(settings: Settings) -> list[Figure]:
    """Run every task on both sides, `settings.repeats` times; report the medians."""
    time_scale = time_scale_of(settings)
    await _repetition(WARM_UP_SCALE, concurrent=False)
    repetitions = [await _repetition(time_scale, concurrent=True) for _ in range(settings.repeats)]
    figures: list[Figure] = []
    for task in TASKS:
        agent = [runs["create_agent", task.agent_task or task.name] for runs in repetitions]
        for mode in PLAN_MODES:
            ours = [runs[mode, task.name] for runs in repetitions]
            figures.extend(_task_figures(task, mode, ours, agent, time_scale))
    return figures


async def profile_workload(settings: Settings) -> None:
    """Run our side of every task once in each plan mode, one after the other (`--profile`)."""
    time_scale = time_scale_of(settings)
    for mode in PLAN_MODES:
        for task in TASKS:
            await run_ours(task, time_scale, mode)
