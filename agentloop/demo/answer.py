"""The demo's answer model: quotes the tool results, says plainly when they hold nothing."""

from __future__ import annotations

import json
import re
from typing import Any

from langchain_core.messages import BaseMessage

from agentloop.demo.questions import (
    _best_sentences,
    _json_section,
    _passages,
    _Question,
    _read_question,
    _relevant,
    _Text,
)
from agentloop.messages import message_text
from agentloop.testing import ScriptedChatModel

__all__ = ["answer_text", "demo_answer_model"]

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
    text = message_text(messages[-1])
    results = _json_section(text, "action_results", {})
    return answer_text(str(_json_section(text, "user_request", "")), results)


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
