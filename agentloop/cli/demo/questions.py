"""How the demo reads a question and the tool results it gathered."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from agentloop.planning.prompt import OMITTED

__all__ = []

# -- reading a question ---------------------------------------------------------------------

_STOPWORDS = frozenset((
    "a", "an", "and", "are", "as", "at", "be", "by", "do", "does", "did", "for", "from",
    "has", "have", "had", "how", "in", "is", "it", "its", "of", "on", "or", "the", "to",
    "was", "were", "what", "whats", "when", "where", "which", "who", "whom", "why", "with",
    "many", "much", "long", "tell", "me", "about", "please", "can", "could", "would", "you",
    "your", "know", "give", "show", "find", "i", "we", "my", "our", "this", "that", "these",
    "those", "there", "then", "today", "now", "like", "some", "any", "also", "per", "each",
    "every", "get", "s", "will", "should", "if", "so", "than", "all", "into", "out", "up",
    "hi", "hello", "hey", "thanks", "thank", "bye", "goodbye", "good", "morning",
    "afternoon", "evening", "cheers", "ok", "okay", "yes", "no", "not", "been", "lot",
    "very", "really",
))  # fmt: skip
_CHIT_CHAT = re.compile(
    r"^\W*(?:hi|hello|hey|good (?:morning|afternoon|evening)|thanks|thank you|cheers|"
    r"bye|goodbye|ok(?:ay)?)\b|\bhow are you\b|\b(?:who|what) are you\b|"
    r"\bwhat can you do\b|\byour name\b|\bhelp me\b",
    re.IGNORECASE,
)
_WEATHER = re.compile(
    r"\b(?:weather|temperature|forecast|rain(?:ing|y)?|sunny|cloudy|snow(?:ing)?)\b"
    r"|\bhow (?:warm|cold|hot)\b",
    re.IGNORECASE,
)
_WEATHER_WORDS = frozenset((
    "weather", "temperature", "forecast", "rain", "raining", "rainy", "sunny", "cloudy", "snow",
    "snowing", "warm", "cold", "hot",
))  # fmt: skip
_TRAVEL = re.compile(
    r"\b(?:trams?|bus(?:es)?|ferr(?:y|ies)|metro|trains?|airport|trip|travel|visit(?:ing)?)\b",
    re.IGNORECASE,
)
_NAME = r"[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)*"
_CITY_AFTER = re.compile(rf"\b(?:in|at|for|to|visit|visiting)\s+(?:the\s+)?({_NAME})")
_CITY_BEFORE = re.compile(rf"({_NAME})\s+(?:trams?|bus(?:es)?|ferr(?:y|ies)|metro|airport)\b")
_CITY_LOWER = re.compile(r"\b(?:in|at|for)\s+([a-z][\w'-]*(?:\s+[a-z][\w'-]*)?)\s*[?.!,]?\s*$")
_NOTE = re.compile(
    r"\b(?:(?:keep|take|make|write|save)\s+(?:a\s+)?notes?|notes?|save|remember|"
    r"write (?:it )?down|jot(?: it)? down)\b",
    re.IGNORECASE,
)
_PER = re.compile(r"\b([a-z][\w-]*)\s+(?:per|for each|for every)\s+([a-z][\w-]*)\b")
_HOW_MANY_PER = re.compile(
    r"\bhow (?:many|much) ([a-z][\w-]*)\b.*?\b(?:per|for each|for every)\s+([a-z][\w-]*)\b"
)
_TOKEN = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?|[A-Za-z][\w'-]*")
_EXPRESSION = re.compile(r"(?:sqrt\(|[\d(])(?:sqrt\(|[\d\s.+\-*/()])*[\d)]")
_OPERATION = re.compile(r"[\d)]\s*(?:\*\*|[-+*/])\s*(?:sqrt\(|[\d(])|sqrt\(")
_ARITHMETIC_WORDS = [
    (r"\bsquare root of\s+(\d+(?:\.\d+)?)", r"sqrt(\1)"),
    (r"(\d+(?:\.\d+)?)\s*(?:%|percent)\s+of\s+", r"\1 / 100 * "),
    (r"\bmultiplied by\b|\btimes\b|(?<=\d)\s*[x\u00d7]\s*(?=\d)", " * "),
    (r"\bdivided by\b|\u00f7", " / "),
    (r"\bplus\b", " + "),
    (r"\bminus\b", " - "),
    (r"\bto the power of\b|\^", " ** "),
    (r"(?<=\d),(?=\d{3}\b)", ""),
]
_UNITS = [
    {"km", "kilometer", "kilometre"},
    {"m", "meter", "metre"},
    {"min", "minute"},
    {"h", "hr", "hour"},
    {"eur", "euro"},
    {"person", "people"},
]
_SCALES = {"thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000}


def _stem(word: str) -> str:
    """Fold a word to a crude stem, so "lines" matches "line" and "opened" "open"."""
    word = word.lower().removesuffix("'s")
    if len(word) > 4 and word.endswith("ies"):
        word = word[:-3] + "y"
    elif len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    if len(word) > 5 and word.endswith("ed"):
        word = word[:-2]
    elif len(word) > 6 and word.endswith("ing"):
        word = word[:-3]
    return word.removesuffix("e") if len(word) > 3 else word


def _words(text: str) -> list[str]:
    """The content words of a text, as written, in order, without repeats."""
    seen: set[str] = set()
    words: list[str] = []
    for word in _TOKEN.findall(text):
        key = _stem(word)
        if word.lower().replace("'", "") not in _STOPWORDS and key not in seen:
            seen.add(key)
            words.append(word)
    return words


def _terms(text: str) -> set[str]:
    return {_stem(word) for word in _words(text)}


def _expression(question: str) -> str:
    """The arithmetic a question asks for ("" for none)."""
    text = question
    for pattern, replacement in _ARITHMETIC_WORDS:
        text = re.sub(pattern, replacement, text, flags=re.IGNORECASE)
    spans = [m.group().strip() for m in _EXPRESSION.finditer(text)]
    spans = [s for s in spans if _OPERATION.search(s) and s.count("(") == s.count(")")]
    return " ".join(max(spans, key=len).split()) if spans else ""


def _names(question: str) -> list[str]:
    """Capitalized names in a question ("Lumen Bay"), without leading question words."""
    names = []
    for match in re.finditer(_NAME, question):
        words = match.group().split()
        while words and words[0].lower().replace("'", "") in _STOPWORDS:
            words.pop(0)
        if words:
            names.append(" ".join(words))
    return names


def _city(question: str, pattern: re.Pattern[str]) -> str:
    for match in pattern.finditer(question):
        names = _names(match.group(1))
        if names:
            return names[0]
    return ""


@dataclass(frozen=True)
class _Question:
    """What the rules read in a question."""

    text: str
    chit_chat: bool = False
    weather_city: str = ""
    trip_city: str = ""
    expression: str = ""
    per: tuple[str, str] | None = None
    """("km", "line") for "how many km per line"."""
    topic: list[str] = field(default_factory=list)
    """The words left to look up in documents, as written."""
    names: set[str] = field(default_factory=set)
    """Stems of the capitalized names, which a relevant text must mention."""
    wants_note: bool = False
    """Whether the question asks to keep a note ("... and save a note")."""

    @property
    def terms(self) -> set[str]:
        return {_stem(word) for word in self.topic}

    @property
    def query(self) -> str:
        return " ".join(self.topic)


def _context_city(earlier: list[str]) -> str:
    """The city the conversation was last about ("" when none is named)."""
    for turn in reversed(earlier):
        city = _city(turn, _CITY_AFTER) or _city(turn, _CITY_BEFORE) or next(iter(_names(turn)), "")
        if city:
            return city
    return ""


def _read_question(text: str, earlier: list[str] | None = None) -> _Question:
    """Read what a question asks for: weather, arithmetic, facts, or nothing a tool does.

    Args:
        text: The question.
        earlier: The earlier turns of the conversation, oldest first: a follow-up such
            as "And what is the weather there?" takes its city from them.
    """
    weather_city = ""
    rest = text
    if _WEATHER.search(text):
        weather_city = (
            _city(text, _CITY_AFTER)
            or (_names(text) or [""])[0]
            or next((m.group(1) for m in _CITY_LOWER.finditer(text)), "")
            or _context_city(earlier or [])
        )
        city_terms = _terms(weather_city)
        rest = " ".join(
            w for w in _TOKEN.findall(text)
            if w.lower() not in _WEATHER_WORDS and _stem(w) not in city_terms
        )  # fmt: skip
    trip_city = ""
    if _TRAVEL.search(text):
        trip_city = _city(text, _CITY_BEFORE) or _city(text, _CITY_AFTER)
    expression = _expression(text)
    if expression:
        rest = " ".join(w for w in _TOKEN.findall(rest) if not w[0].isdigit())
        rest = re.sub(r"\b(?:times|plus|minus|divided|multiplied|percent|square|root|power)\b",
                      " ", rest, flags=re.IGNORECASE)  # fmt: skip
    found_per = _HOW_MANY_PER.search(text.lower()) or _PER.search(text.lower())
    per = (found_per.group(1), found_per.group(2)) if found_per else None
    if per is not None and per[0] in _STOPWORDS:
        per = None
    wants_note = bool(_NOTE.search(text))
    if wants_note:
        rest = _NOTE.sub(" ", rest)
    topic = _words(_CHIT_CHAT.sub(" ", rest))
    names = {_stem(word) for name in _names(rest) for word in name.split()}
    return _Question(
        text=text,
        chit_chat=bool(_CHIT_CHAT.search(text)) and not topic,
        weather_city=weather_city,
        trip_city=trip_city,
        expression=expression,
        per=per,
        topic=topic,
        names=names & {_stem(word) for word in topic},
        wants_note=wants_note,
    )


def _relevant(question: _Question, text: str) -> bool:
    """Whether a text is about the question: all its names, half its other words."""
    found = _terms(text)
    if not question.names <= found:
        return False
    others = question.terms - question.names
    return len(others & found) >= math.ceil(len(others) / 2)


def _promising(question: _Question, text: str) -> bool:
    """Whether a search hit is worth reading: all the names, and one other word if any."""
    found = _terms(text)
    others = question.terms - question.names
    return question.names <= found and (not others or bool(others & found))


# -- reading tool results -------------------------------------------------------------------


@dataclass(frozen=True)
class _Text:
    """A passage a tool returned: its text, where it comes from, and whether it is whole."""

    text: str
    source: str = ""
    doc_id: str = ""
    whole: bool = False


def _passages(value: Any) -> list[_Text]:
    """The passages in a search result, a document or a fact ([] for anything else)."""
    if isinstance(value, str):
        if value in (OMITTED, "No matching fact."):
            return []
        return [_Text(value, whole=True)]
    if isinstance(value, dict) and {"doc_id", "text"} <= value.keys():
        return [_Text(str(value["text"]), str(value.get("title", "")), str(value["doc_id"]), True)]
    if isinstance(value, list):
        return [
            _Text(str(hit["snippet"]), str(hit.get("title", "")), str(hit.get("doc_id", "")))
            for hit in value
            if isinstance(hit, dict) and "snippet" in hit
        ]
    return []


def _sentences(passage: _Text) -> list[str]:
    """Whole sentences of a passage (a snippet's cut first and last ones are dropped)."""
    lines = [line for line in passage.text.splitlines() if not line.startswith("#")]
    body = " ".join(" ".join(lines).split())
    sentences = re.split(r"(?<=[.!?])\s+(?=[A-Z0-9\"(])", body)
    if not passage.whole:
        if body.startswith("..."):
            sentences = sentences[1:]
        if body.endswith("...") or not body.endswith((".", "!", "?")):
            sentences = sentences[:-1]
    return [s for s in sentences if s]


def _best_sentences(question: _Question, passage: _Text, limit: int = 2) -> list[str]:
    """The sentences that hold the figures an "X per Y" question needs, else the best matches.

    The best matches are the sentence with most of the question's words, then the one
    with most of the words still missing, in the passage's order.
    """
    sentences = _sentences(passage)
    if question.per:
        holding = [
            next((s for s in sentences if _figure(unit, [s]) is not None), "")
            for unit in question.per
        ]
        if all(holding):
            return list(dict.fromkeys(holding))
    missing = question.terms | ({_stem(w) for w in question.per} if question.per else set())
    chosen: list[int] = []
    for _ in range(limit):  # the best sentence, then the one with most words still missing
        covered = [len(missing & _terms(s)) for s in sentences]
        best = max(range(len(sentences)), key=lambda i: covered[i], default=-1)
        if best < 0 or not covered[best]:
            break
        chosen.append(best)
        missing -= _terms(sentences[best])
    return [sentences[i] for i in sorted(chosen)]


@dataclass(frozen=True)
class _Figure:
    """A number found in a text with its unit: "42 kilometers of track"."""

    value: str
    phrase: str


def _figure(unit: str, texts: Iterable[str]) -> _Figure | None:
    """The first "<number> [scale] [word] <unit>" in the texts."""
    forms = next((group for group in _UNITS if _stem(unit) in {_stem(u) for u in group}), {unit})
    stems = {_stem(form) for form in forms}
    for text in texts:
        tokens = re.findall(r"\d+(?:,\d{3})*(?:\.\d+)?|[A-Za-z][\w-]*|[^\s\w]", text)
        for start, token in enumerate(tokens):
            if not token[0].isdigit():
                continue
            amount, position = Decimal(token.replace(",", "")), start + 1
            if position < len(tokens) and tokens[position].lower() in _SCALES:
                amount *= _SCALES[tokens[position].lower()]
                position += 1
            for end in (position, position + 1):
                if end > position and tokens[position].lower() in _STOPWORDS:
                    break
                if end < len(tokens) and _stem(tokens[end]) in stems:
                    words = tokens[start : end + 1]
                    if end + 2 < len(tokens) and tokens[end + 1] == "of":
                        words += tokens[end + 1 : end + 3]
                    return _Figure(format(amount.normalize(), "f"), " ".join(words))
    return None


# -- reading a prompt -----------------------------------------------------------------------


def _section(text: str, tag: str) -> str:
    """The text of a prompt section (data never holds a closing tag: "</" is escaped)."""
    end = text.find(f"</{tag}>")
    start = text.rfind(f"<{tag}>", 0, end)
    return text[start + len(tag) + 2 : end].strip() if 0 <= start < end else ""


def _json_section(text: str, tag: str, default: Any) -> Any:
    """The JSON of a prompt section (its last line when a heading comes first)."""
    section = _section(text, tag)
    for candidate in (section, section.rsplit("\n", 1)[-1]):
        try:
            return json.loads(candidate)
        except json.JSONDecodeError:
            continue
    return default
