"""Conversations: the turns a chat keeps, capped, and a follow-up made standalone before it is
retrieved for ("And when did she die?" retrieves nothing; "And when did Mary Reed die?" does).

The deterministic rewrite (no model) works on the conversation's entity mentions, each
``(surface, label, offset)`` as an NER gives them (spaCy's labels; ``""`` unlabelled):

1. every third-person pronoun of the question is replaced by the most recent earlier mention
   that can be what it refers to (he/she: a PERSON or an unlabelled mention; it: anything but
   a PERSON; they: an organisation, group or place), else by the most recent mention of any
   kind, possessives as ``X's``;
2. a follow-up (it holds a third-person pronoun, has at most two content words, or opens with
   "and", "what about", "how about") gets the salient words of the earlier question appended (for BM25),
   and, when no pronoun named it, the most recent entity.

A question that stands alone is left as it is. Everything here is linear in the
conversation's (capped) size."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

USER, ASSISTANT = "user", "assistant"
MAX_TURNS = 20                 # questions a session keeps (with their answers): the oldest go first
MAX_SESSION_BYTES = 64 * 1024  # UTF-8 bytes of the kept messages: the oldest go first
SESSION_SECONDS = 24 * 3600    # a session lapses a day after its last turn (Bedrock's 24 hours)
MAX_SALIENT = 8                # words of the earlier question a follow-up gets

Mention = tuple[str, str, int]

NONE, LOCAL, MODEL = "none", "local", "model"


@dataclass(frozen=True)
class Message:
    role: str  # USER or ASSISTANT
    text: str


@dataclass(frozen=True)
class Rewrite:
    """The question retrieval runs on, and how it was made: ``none`` (it stands alone, or
    there is no earlier turn), ``local`` (the rules above) or ``model`` (the generator)."""

    question: str
    how: str = NONE
    resolved: dict[str, str] = field(default_factory=dict)  # pronoun -> the entity it became
    added: tuple[str, ...] = ()                             # words appended from the conversation

    def to_dict(self) -> dict:
        return {"question": self.question, "how": self.how, "resolved": dict(self.resolved),
                "added": list(self.added)}


def capped(messages: Sequence[Message], max_turns: int = MAX_TURNS,
           max_bytes: int = MAX_SESSION_BYTES) -> list[Message]:
    """The latest messages within ``max_turns`` user questions and ``max_bytes`` bytes; the
    oldest are dropped first (a single message larger than the cap is dropped too)."""
    kept: list[Message] = []
    questions = size = 0
    for m in reversed(messages):
        cost = len(m.text.encode("utf-8", errors="surrogatepass"))
        questions += m.role == USER
        if questions > max_turns or size + cost > max_bytes:
            break
        size += cost
        kept.append(m)
    kept.reverse()
    return kept


_PRONOUN = re.compile(r"\b(he|him|his|she|her|hers|it|its|they|them|their|theirs)\b", re.IGNORECASE)
_PERSON = {"he", "him", "his", "she", "her", "hers"}
_GROUP = {"they", "them", "their", "theirs"}
_POSSESSIVE = {"his", "its", "their", "hers", "theirs"}
_GROUP_LABELS = {"ORG", "NORP", "GPE", "LOC", "FAC", ""}
_FOLLOW_UP = re.compile(r"^\s*(and|also|what about|how about|so)\b", re.IGNORECASE)
_WORD = re.compile(r"[\w'’-]+", re.UNICODE)
STOP = frozenset(
    "a an the of in on at to for by with from and or is was are were be been being did does do that this these "
    "those it its as what which who whom whose when where how why has have had not tell me about please can "
    "could would will you your i my we our us he she his her they them their there here some any more most "
    "also so if then than into out up down over after before during know give show explain describe".split())


def content_words(text: str) -> list[str]:
    """The words of ``text`` that are not function words, in order, without repeats."""
    out: list[str] = []
    seen: set[str] = set()
    for w in _WORD.findall(text):
        w = re.sub(r"['’]s$", "", w)  # a possessive is its word
        key = w.casefold().strip("'’-")
        if key and key not in STOP and key not in seen:
            seen.add(key)
            out.append(w.strip("'’-"))
    return out


def _fits(pronoun: str, label: str) -> bool:
    p = pronoun.casefold()
    if p in _PERSON:
        return label in ("PERSON", "")
    if p in _GROUP:
        return label in _GROUP_LABELS
    return label != "PERSON"


def _possessive(pronoun: str, following: str) -> bool:
    p = pronoun.casefold()
    if p in _POSSESSIVE:
        return True
    # "her husband" (possessive) against "married her" / "her?" (object)
    return p == "her" and bool(re.match(r"\s+[A-Za-z]", following)) and not re.match(
        r"\s+(to|in|on|at|for|from|with|by|about|and|or|the|a|an)\b", following, re.IGNORECASE)


def recency(history: Sequence[tuple[str, Sequence[Mention]]]) -> list[tuple[str, str]]:
    """The earlier messages' mentions (``(text, mentions)`` oldest first) as (surface, label),
    most recent first, each surface once."""
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for _text, mentions in reversed(history):
        for surface, label, _ in sorted(mentions, key=lambda m: -m[2]):
            key = surface.casefold()
            if key not in seen:
                seen.add(key)
                out.append((surface, label))
    return out


def local_rewrite(question: str, history: Sequence[tuple[str, Sequence[Mention]]],
                  earlier_question: str = "") -> Rewrite:
    """``question`` made standalone from ``history`` (the earlier messages with their mentions,
    oldest first) and the previous user question ``earlier_question`` (its salient words)."""
    if not history:
        return Rewrite(question)
    lowered = question.casefold()
    candidates = [(s, lab) for s, lab in recency(history) if s.casefold() not in lowered]
    resolved: dict[str, str] = {}
    pieces: list[str] = []
    at = 0
    for m in _PRONOUN.finditer(question):
        pronoun = m.group(1)
        entity = next((s for s, lab in candidates if _fits(pronoun, lab)), None)
        if entity is None and candidates:  # none fits: the most recent entity is still the likeliest
            entity = candidates[0][0]
        if entity is None:
            continue
        pieces.append(question[at:m.start()])
        pieces.append(f"{entity}'s" if _possessive(pronoun, question[m.end():]) else entity)
        at = m.end()
        resolved[pronoun.casefold()] = entity
    text = "".join(pieces) + question[at:]
    short = len(content_words(question)) <= 2
    anaphoric = _PRONOUN.search(question) is not None  # an unresolved pronoun still leans on the past
    if not (anaphoric or short or _FOLLOW_UP.match(question)):
        return Rewrite(question)
    added: list[str] = []
    if not resolved and candidates:
        added.append(candidates[0][0])
    have = {w.casefold() for w in content_words(text + " " + " ".join(added))}
    for w in content_words(earlier_question):
        if len(added) >= MAX_SALIENT:
            break
        if w.casefold() not in have:
            have.add(w.casefold())
            added.append(w)
    if added:
        text = f"{text.rstrip()} {' '.join(added)}"
    return Rewrite(text, LOCAL, resolved, tuple(added))
