"""Service: whole runs against a simulated model service with provider-like latency.

The model (`bench.simulated.SimulatedChatModel`) waits a time to first token plus
prefill before its first chunk and streams the rest at an output rate; the tools sleep
1.5 s (web search) or 0.3 s. Our loop (`create_tool_loop` with its defaults, one model
for plans and answers) and `langchain.agents.create_agent` get the same decisions on
five tasks: chat (no tool), fanout (4 independent calls, one slow), chain (3 dependent
calls, one round each), chainref (the chain as one plan of ours whose later commands
reference earlier results) and long (12 rounds of 1.5 kB results). Each task reports
wall time, the time spent waiting on the model and on tools, model calls, input and
output tokens, and how much of each plan prompt repeats the previous one's prefix.

The runs of one repetition run at the same time on one event loop, started 0.2 s apart:
they mostly wait, and the framework's CPU time is a small share of every figure.
"""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from langchain.agents import create_agent
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver

from agentloop import PlanningOptions, create_tool_loop
from bench.contenders import Graph
from bench.harness import Figure, Settings, Target, median
from bench.service_tasks import TASKS, Task, ToolCallLog, service_tools
from bench.simulated import (
    Decisions,
    ModelRequest,
    RequestLog,
    ServiceProfile,
    SimulatedChatModel,
    prefix_share,
)

__all__ = ["NAME", "RunMeasure", "profile_workload", "run", "run_agent", "run_ours"]

NAME = "service"
QUICK_SCALE = 0.25
"""The time scale of `--quick` when none is given."""
WARM_UP_SCALE = 0.01
STAGGER_S = 0.2
"""Seconds between the starts of concurrent runs, so that their first steps (the busiest:
building and rendering the first prompt) do not compete for the CPU."""
MAX_ROUNDS = 16
KEEP_TOOL_RESULTS = 5
"""Above every task's need (the default, 5, is too few for the long task): each run ends
when the planner chooses `response`, as it would with a real model."""
TARGETS = {
    "chat": Target(1.0),
    "fanout": Target(1.05),
    "chain": Target(1.0),
    "chainref": Target(0.9),
    "long": Target(0.9),
}
RECOMMENDED = PlanningOptions(speculative_answer=True, keep_tool_results=KEEP_TOOL_RESULTS)
"""The settings recommended for latency: the answer requested alongside every plan
(streaming dispatch is on by default)."""
PREFIX_TARGET = Target(80, at_most=False, on="ours")
"""From the second plan prompt on, at least 80 % of each repeats the previous one's prefix."""

Side = Literal["ours", "create_agent"]


@dataclass(frozen=True)
class RunMeasure:
    """One run of one side: its wall time, the model requests and the tool calls."""

    wall_s: float
    """From the call to `ainvoke` to its return."""
    requests: Sequence[ModelRequest]
    """Every model request, in order."""
    tools: ToolCallLog
    """Every tool call."""
    plan_kind: Literal["plan", "agent"]
    """The kind of the requests that decide the rounds."""
    records: Sequence[dict[str, Any]] = ()
    """Our loop's execution records (`tool_logs`); empty for `create_agent`."""

    @property
    def model_s(self) -> float:
        """Seconds waiting on the model (its requests never overlap)."""
        return sum(request.duration_s for request in self.requests)

    @property
    def split_s(self) -> tuple[float, float, float]:
        """The model wait as (time to first token, prefill, output) seconds."""
        return (
            sum(request.fixed_s for request in self.requests),
            sum(request.prefill_s for request in self.requests),
            sum(request.output_s for request in self.requests),
        )

    @property
    def tools_s(self) -> float:
        """Seconds during which a tool was running."""
        return self.tools.busy_s()

    @property
    def input_tokens(self) -> int:
        """Input tokens of all requests."""
        return sum(request.input_tokens for request in self.requests)

    @property
    def output_tokens(self) -> int:
        """Output tokens sent (a stream closed early counts what was sent)."""
        return sum(request.output_tokens for request in self.requests)

    def prefix_shares(self) -> list[float]:
        """Return the share of each plan prompt, from the 2nd, repeating the previous prefix."""
        prompts = [request.prompt for request in self.requests if request.kind == self.plan_kind]
        return [prefix_share(earlier, later) for earlier, later in itertools.pairwise(prompts)]

    def breakdown(self) -> str:
        """Describe where the wall time went."""
        fixed, prefill, output = self.split_s
        rest = self.wall_s - self.model_s - self.tools_s
        return (
            f"model {self.model_s:.2f} s (TTFT {fixed:.2f}, prefill {prefill:.2f}, "
            f"output {output:.2f}), tools {self.tools_s:.2f} s, rest {rest:.2f} s"
        )


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


async def run_ours(task: Task, time_scale: float) -> RunMeasure:
    """Run our loop on a task; return what it waited for."""
    log, tools = RequestLog(), ToolCallLog()
    decisions = Decisions(plans=task.plan_texts(), answer=task.answer)
    model = SimulatedChatModel(_profile(time_scale), decisions, log)
    graph = create_tool_loop(
        model,
        service_tools(tools, time_scale),
        max_rounds=MAX_ROUNDS,
        planning=RECOMMENDED,
        checkpointer=InMemorySaver(),
    )
    started = time.perf_counter()
    out = await graph.ainvoke({"user_input": task.request}, _thread())
    wall = time.perf_counter() - started
    _check_answer(task, "ours", out["answer"])
    if not task.plans:  # a plan with references is judged by the suite, not refused
        _check_calls(task, "ours", tools)
    return RunMeasure(wall, log.requests, tools, "plan", out.get("tool_logs") or [])


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
    return RunMeasure(wall, log.requests, tools, "agent")


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


async def _after(delay_s: float, job: Callable[[], Awaitable[RunMeasure]]) -> RunMeasure:
    await asyncio.sleep(delay_s)
    return await job()


async def _repetition(time_scale: float, *, concurrent: bool) -> Runs:
    """Run every task on both sides once (`create_agent` once per distinct contender).

    Concurrent runs start `STAGGER_S` apart, the longest tasks first.
    """
    jobs: list[tuple[tuple[Side, str], Callable[[], Awaitable[RunMeasure]]]] = []
    for task in reversed(TASKS):
        jobs.append((("ours", task.name), partial(run_ours, task, time_scale)))
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
    task: Task, ours: list[RunMeasure], agent: list[RunMeasure], time_scale: float
) -> list[Figure]:
    name = f"Service {task.name}"
    versus = "create_agent" if not task.agent_task else f"create_agent, {task.agent_task}"
    missing = references_verdict(task, ours[0]) if task.plans else ""

    def figure(
        label: str,
        unit: str,
        value: Any,
        target: Target | None = None,
        notes: str = "",
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
    figures = [
        figure(
            "wall time",
            "s",
            lambda m: m.wall_s,
            TARGETS[task.name],
            notes,
            scaled=True,
            why_no_ratio=missing,
        ),
        figure(
            "waiting on the model",
            "s",
            lambda m: m.model_s,
            notes="information: time to first token + prefill + output of every request",
            scaled=True,
        ),
    ]
    if task.rounds:
        figures.append(
            figure("waiting on tools", "s", lambda m: m.tools_s, notes="information", scaled=True)
        )
    figures += [
        figure("model calls", "calls", lambda m: len(m.requests), notes="information"),
        figure(
            "input tokens",
            "tokens",
            lambda m: m.input_tokens,
            notes="information: 4 characters per token",
        ),
        figure(
            "output tokens", "tokens", lambda m: m.output_tokens, notes="information: tokens sent"
        ),
    ]
    shares = ours[0].prefix_shares()
    if shares:
        agent_shares = agent[0].prefix_shares()
        figures.append(
            Figure(
                f"{name}: plan prompt prefix reused (lowest, from the 2nd)",
                100 * min(shares),
                100 * min(agent_shares) if agent_shares else float("nan"),
                "%",
                versus,
                PREFIX_TARGET,
                {
                    "ours": [100 * share for share in shares],
                    "contender": [100 * share for share in agent_shares],
                },
                "each plan prompt's longest common prefix with the previous plan prompt, over "
                "its length (create_agent: each request against the previous one); samples: "
                "every prompt of the first repetition",
            )
        )
    return figures


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
        ours = [runs["ours", task.name] for runs in repetitions]
        agent = [runs["create_agent", task.agent_task or task.name] for runs in repetitions]
        figures.extend(_task_figures(task, ours, agent, time_scale))
    return figures


async def profile_workload(settings: Settings) -> None:
    """Run our side of every task once, one after the other (for `--profile service`)."""
    time_scale = time_scale_of(settings)
    for task in TASKS:
        await run_ours(task, time_scale)
