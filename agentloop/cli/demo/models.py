"""The demo's two local models: the planner and the answer model.

The planner is a deterministic local chat model that picks tools by simple rules; the
answer model quotes the tool results, and says plainly when they hold nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from agentloop.base.messages import message_text
from agentloop.cli.demo.questions import (
    _STOPWORDS,
    _best_sentences,
    _Figure,
    _figure,
    _json_section,
    _names,
    _passages,
    _promising,
    _Question,
    _read_question,
    _relevant,
    _Text,
)
from agentloop.planning.prompt import shown_result
from agentloop.testing import ScriptedChatModel, plan_reply

__all__ = ["answer_text", "demo_answer_model", "demo_planner"]

# -- the answer -----------------------------------------------------------------------------

_NO_TOOL = (
    "No tool was called for this, so I have no results to answer it from. Ask me about "
    "Lumen Bay (its trams, harbor or lantern festival), the weather there, or some arithmetic."
)


def _number(value: Any) -> str:
    """A number as a reader wants it: 42 for 42.0, "about 1.4142" for sqrt(2)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, float) and round(value, 4) != value:
        return f"about {round(value, 4)}"
    return str(value)


def _describe(question: _Question, value: Any, purpose: str) -> tuple[bool, str]:
    """Say what one result holds: (whether it found something, the text)."""
    if isinstance(value, dict) and "error" in value:
        if "stale_result" in value:
            found, text = _describe(question, value["stale_result"], purpose)
            return found, f"{text} (stale: {value['error']})"
        return False, f"the call failed: {value['error']}"
    if isinstance(value, dict) and "fallback" in value:
        found, text = _describe(question, value.get("result"), purpose)
        return found, f"{text} (fallback data: {value['fallback']})"
    if isinstance(value, bool) or value is None:
        return False, "no result"
    if isinstance(value, int | float):
        return True, _number(value)
    if isinstance(value, dict) and {"expression", "result"} <= value.keys():
        result = _number(value["result"])
        if str(value["expression"]) in purpose:
            return True, result
        return True, f"{value['expression']} = {result}"
    if isinstance(value, dict) and "sky" in value:
        if value["sky"] == "unknown":
            return False, f"no weather data for {value.get('city', 'that city')}"
        temperature = value.get("temperature_c")
        degrees = f", {_number(temperature)} °C" if temperature is not None else ""
        return True, f"{value['sky']}{degrees} in {value.get('city', 'the city')}"
    if isinstance(value, dict) and {"id", "title", "body"} <= value.keys():
        return True, f'saved as note "{value["title"]}" ({value["id"]})'
    passages = _passages(value)
    if passages or value == [] or isinstance(value, str):
        return _describe_passages(question, passages)
    return True, json.dumps(value, ensure_ascii=False, default=str)[:300]


def _describe_passages(question: _Question, passages: list[_Text]) -> tuple[bool, str]:
    topic = f"'{question.query}'" if question.query else "this"
    if not passages:
        return False, f"nothing found about {topic}"
    relevant = [p for p in passages if _relevant(question, f"{p.source} {p.text}")]
    if not relevant:
        closest = passages[0].source
        return False, f"nothing about {topic}" + (f" (closest: '{closest}')" if closest else "")
    for passage in relevant:
        quotes = _best_sentences(question, passage)
        if quotes:
            source = f" ({passage.source})" if passage.source else ""
            return True, " ".join(f'"{quote}"' for quote in quotes) + source
    return True, f"see '{relevant[0].source}'"


def _answer(messages: list[BaseMessage]) -> str:
    """Answer by quoting the tool results found in the request, or say none were found."""
    results = _json_section(message_text(messages[-1]), "action_results", {})
    return answer_text(_user_messages(messages)[-1], results)


def _user_messages(messages: list[BaseMessage]) -> list[str]:
    """The user's messages in a request, oldest first (not the loop's tagged sections)."""
    texts = [message_text(m) for m in messages if m.type == "human"]
    return [text for text in texts if not text.startswith(("<", "The tools' results"))] or [""]


def answer_text(request: str, results: Any) -> str:
    """The demo's answer to a request from its tool results (by purpose), or without any."""
    question = _read_question(request)
    if not isinstance(results, dict) or not results:
        greeting = re.match(r"\W*(hi|hello|hey|good \w+)\b", question.text, re.IGNORECASE)
        if re.search(r"\bthank", question.text, re.IGNORECASE):
            return "You're welcome!"
        if re.match(r"\W*(?:good)?bye\b", question.text, re.IGNORECASE):
            return "Goodbye!"
        if greeting or question.chit_chat:
            hello = f"{greeting.group(1).capitalize()}! " if greeting else ""
            return (
                f"{hello}I am the agentloop demo: I answer from a few local tools (documents "
                "about the city of Lumen Bay, its weather, a calculator and notes). Ask me "
                "about its trams, harbor or lantern festival, the weather, or some arithmetic."
            )
        return _NO_TOOL
    read_docs = {
        str(value["doc_id"])
        for value in results.values()
        if isinstance(value, dict) and {"doc_id", "text"} <= value.keys()
    }
    lines: list[str] = []
    found_any = False
    for purpose, value in results.items():
        read = [
            hit for hit in (value if isinstance(value, list) else [])
            if isinstance(hit, dict) and hit.get("doc_id") in read_docs
        ]  # fmt: skip
        if read:
            found, line = True, f"best match '{read[0].get('title', read[0]['doc_id'])}'"
        else:
            found, line = _describe(question, value, purpose)
        found_any = found_any or found
        lines.append(f"- {purpose}: {line}")
    head = "Here is what the tools found:" if found_any else "I found nothing to answer this:"
    return head + "\n" + "\n".join(lines)


def demo_answer_model() -> ScriptedChatModel:
    """The demo's answer model: quotes the tool results, and says when they hold nothing."""
    return ScriptedChatModel(responder=_answer, chunk_size=16, keep_requests=False)


# -- the planner ----------------------------------------------------------------------------


def _command(purpose: str, tool_name: str, todo: str, **kwargs: Any) -> dict[str, Any]:
    return {
        "purpose": purpose,
        "tool_name": tool_name,
        "tool_kwargs": kwargs,
        "todo_suggestion": todo,
    }


@dataclass(frozen=True)
class _Round:
    """What the planner sees in one request: the question, its tools and the calls so far."""

    question: _Question
    tools: set[str]
    records: list[dict[str, Any]]

    def calls(self, tool_name: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("tool_name") == tool_name]

    def passages(self) -> list[_Text]:
        """Passages of successful calls worth reading, whole documents first."""
        ok = [r for r in self.records if r.get("success", True) and "error" not in r]
        found = [p for r in ok for p in _passages(r.get("result"))]
        found = [p for p in found if _promising(self.question, f"{p.source} {p.text}")]
        return sorted(found, key=lambda p: not p.whole)


def _fact_commands(state: _Round) -> list[dict[str, Any]]:
    question = state.question
    searches = [name for name in ("search_documents", "search_facts") if name in state.tools]
    search = searches[0] if searches else ""
    if not search:
        return []
    if not state.calls(search):
        todo = "Read the best match, then respond."
        if question.per:
            todo = f"Read the figures, then compute {question.per[0]} per {question.per[1]}."
        if search == "search_facts":
            return [_command(f"Look up '{question.query}'", search, todo, query=question.query)]
        purpose = f"Search the documents for '{question.query}'"
        return [_command(purpose, search, todo, query=question.query)]
    passages = state.passages()
    if question.per:
        if any(
            r["kwargs"].get("expression") != question.expression for r in state.calls("calculate")
        ):
            return []  # computed already (with these figures or with corrected ones)
        texts = [p.text for p in passages]
        amount, count = _figure(question.per[0], texts), _figure(question.per[1], texts)
        if amount is not None and count is not None:
            return _per_commands(state, question.per, amount, count)
    read = {r["kwargs"].get("doc_id") for r in state.calls("read_document")}
    best = next((p for p in passages if p.doc_id), None)
    if "read_document" in state.tools and best is not None and not read and best.doc_id:
        purpose = f"Read '{best.source or best.doc_id}'"
        return [_command(purpose, "read_document", "Respond from it.", doc_id=best.doc_id)]
    return []


def _per_commands(
    state: _Round, per: tuple[str, str], amount: _Figure, count: _Figure
) -> list[dict[str, Any]]:
    """Compute "amount per count", and keep a note of the figures when the question asks."""
    commands = [
        _command(f"Compute {per[0]} per {per[1]}", "calculate", "Respond with the figures.",
                 expression=f"{amount.value} / {count.value}")
    ]  # fmt: skip
    if state.question.wants_note and "save_note" in state.tools and not state.calls("save_note"):
        commands[0]["todo_suggestion"] = "Save the figures, then respond."
        title = _note_title(state.question) or f"{per[0]} per {per[1]}"
        commands.append(
            _command("Keep a note of the figures", "save_note", "Respond with the figures.",
                     title=title, body=f"{amount.phrase}, {count.phrase}")
        )  # fmt: skip
    return commands


def _note_title(question: _Question) -> str:
    """Title a note: "Lumen Bay trams" for "the Lumen Bay tram network" ("" if no name)."""
    city = question.trip_city or next(iter(_names(question.text)), "")
    after = re.search(rf"{re.escape(city)}\s+([a-z][\w-]*)", question.text) if city else None
    if after is None or after.group(1) in _STOPWORDS:
        return city
    subject = after.group(1)
    return f"{city} {subject if subject.endswith('s') else subject + 's'}"


def _plan_commands(
    question: _Question, tools: set[str], records: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The calls the rules make next for a question, given the calls made so far."""
    state = _Round(question, tools, records)
    commands: list[dict[str, Any]] = []
    if question.topic:
        commands += _fact_commands(state)
    weather = state.calls("get_weather")
    if "get_weather" in tools and not weather and question.weather_city:
        commands.append(
            _command("Check today's weather", "get_weather",
                     "Respond with it.", city=question.weather_city)
        )  # fmt: skip
    if question.expression and "calculate" in tools:
        done = [r for r in state.calls("calculate")
                if r["kwargs"].get("expression") == question.expression]  # fmt: skip
        if not done:
            commands.append(
                _command(f"Compute {question.expression}", "calculate", "Respond with it.",
                         expression=question.expression)
            )  # fmt: skip
    return commands


def _run_records(messages: list[BaseMessage]) -> list[list[dict[str, Any]]]:
    """The calls of this request's run so far, a list per round, with their results.

    A native planner's request holds each round as an `AIMessage` with tool calls and
    its `ToolMessage`s; a JSON planner's as the plan's JSON and a `<tool_results>`
    message (a line per call, by its number in the plan).
    """
    start = max(i for i, m in enumerate(messages) if m.type == "human" and not
                message_text(m).startswith("<"))  # fmt: skip
    rounds: list[list[dict[str, Any]]] = []
    for message in messages[start + 1 :]:
        text = message_text(message)
        if isinstance(message, AIMessage) and message.tool_calls:
            rounds.append([
                {"tool_name": c["name"], "kwargs": c["args"], "id": c["id"]}
                for c in message.tool_calls
            ])  # fmt: skip
        elif isinstance(message, AIMessage) and text.startswith("{"):
            commands = json.loads(text).get("execution_commands") or []
            rounds.append([
                {"tool_name": c["tool_name"], "kwargs": c["tool_kwargs"]} for c in commands
            ])  # fmt: skip
        elif isinstance(message, ToolMessage) and rounds:
            for record in rounds[-1]:
                if record.get("id") == message.tool_call_id:
                    record["result"] = shown_result(message.content)
                    record["success"] = message.status != "error"
        elif text.startswith("<tool_results>") and rounds:
            for line in text.splitlines()[1:-1]:
                item = json.loads(line)
                record = rounds[-1][int(item["call"]) - 1]
                record["success"] = "error" not in item
                record["result"] = item.get("result", item.get("error"))
    return rounds


def _plan(
    messages: list[BaseMessage], bound_tools: Callable[[], list[dict[str, Any]]]
) -> str | AIMessage:
    """Plan one round from the planner's request (a follow-up reads the conversation).

    The tools are those the request's system message lists, or, in
    `plan_mode="native"` (no list), those bound to the planner.
    """
    system = message_text(messages[0])
    users = _user_messages(messages)
    question = _read_question(users[-1], users[:-1])
    if "<available_tools>" in system:
        tools = {t.get("name", "") for t in _json_section(system, "available_tools", []) if t}
    else:
        tools = {tool["function"]["name"] for tool in bound_tools()}
    if "<planner_note>" in message_text(messages[-1]):  # the last plan was rolled back
        return plan_reply("response")
    rounds = _run_records(messages)
    records = [record for calls in rounds for record in calls]
    commands = _plan_commands(question, tools, records)
    if commands:
        return plan_reply("execute", commands)
    if "<available_tools>" not in system:  # native: the planner's text reply may be the answer
        return answer_text(question.text, _by_purpose(question, tools, rounds))
    return plan_reply("response")


def _by_purpose(
    question: _Question, tools: set[str], rounds: list[list[dict[str, Any]]]
) -> dict[str, Any]:
    """Each call's result keyed by the purpose the rules gave it (planned again, round by round)."""
    results: dict[str, Any] = {}
    before: list[dict[str, Any]] = []
    for calls in rounds:
        planned = _plan_commands(question, tools, before)
        for record in calls:
            purpose = next(
                (c["purpose"] for c in planned
                 if c["tool_name"] == record["tool_name"] and c["tool_kwargs"] == record["kwargs"]),
                f"Use {record['tool_name']}",
            )  # fmt: skip
            results[purpose] = record.get("result")
        before += calls
    return results


def demo_planner() -> ScriptedChatModel:
    """The demo's planner: a local chat model that plans by rules and streams its JSON.

    In `plan_mode="native"` its plans come back as tool calls (see `ScriptedChatModel`).
    """
    model = ScriptedChatModel(chunk_size=16, keep_requests=False)
    model.responder = partial(_plan, bound_tools=lambda: model.bound_tools)
    return model
