"""Conversations on the chat doors: a follow-up made standalone before retrieval
(domain.conversation), and RetrieveAndGenerate's sessions kept per tenant.

A session is a metadata record of the tenant's own store (``session:<id>``): its messages,
capped (domain.conversation.capped), and when it lapses, a day after its last turn. On AWS that
is an item of the tenant's namespace in the graph table whose ``expires_at`` DynamoDB's TTL
deletes (adapters/aws/meta_dynamodb.py: EXPIRING_META); every store checks the lapse on read,
since a TTL deletion comes late. A session id is a UUID this service made: one of another
tenant is not in the caller's store, so it is refused as an unknown one is."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Sequence

from ..domain.conversation import (ASSISTANT, LOCAL, MODEL, SESSION_SECONDS, USER, Mention, Message, Rewrite,
                                   capped, local_rewrite)
from . import cost
from .engine import Engine

PREFIX = "session:"


class SessionError(Exception):
    """A session id that names no live session of this tenant (unknown, lapsed, another's)."""


def new_session_id() -> str:
    return str(uuid.uuid4())


def load(engine: Engine, session_id: str, now: Callable[[], float] = time.time,
         asker: Sequence[str] | None = None) -> list[Message]:
    """The session's messages, oldest first; SessionError when it is not this tenant's live one,
    or (``asker``: the principals of who is asking, domain.access; None: the operator, who may
    continue any) when it was opened by other principals: its answers came from their view."""
    record = engine.graph.get_meta(PREFIX + session_id)
    if not isinstance(record, dict) or float(record.get("expires", 0)) <= now():
        raise SessionError(session_id)
    if asker is not None and record.get("asker") != list(asker):
        raise SessionError(session_id)
    return [Message(role, text) for role, text in record.get("messages") or []]


def save(engine: Engine, session_id: str, messages: Sequence[Message], now: Callable[[], float] = time.time,
         asker: Sequence[str] | None = None) -> None:
    """Keep the session's messages (capped), lapsing a day from now, with the principals of who
    asked (``asker``; None: the operator): only they may continue it."""
    kept = capped(messages)
    engine.graph.put_meta(PREFIX + session_id, {"messages": [[m.role, m.text] for m in kept],
                                                "expires": now() + SESSION_SECONDS,
                                                "asker": None if asker is None else list(asker)})


_CAPITALIZED = re.compile(r"\b[A-Z][\w'’.-]*(?:\s+(?:of|de|the|von|van)\s+[A-Z][\w'’.-]*|\s+[A-Z][\w'’.-]*)*")
_OPENERS = frozenset("the a an in on at of for to by from with this that it he she they what who which when "
                     "where why how is are was were did does do and but or tell".split())


def capitalized(text: str) -> list[Mention]:
    """Model-free mentions: runs of capitalized words, a sentence's function word dropped."""
    out: list[Mention] = []
    for m in _CAPITALIZED.finditer(text):
        words = m.group(0).split()
        start = m.start()
        while words and words[0].casefold().strip(".") in _OPENERS:
            start = text.index(words[1], start + len(words[0])) if len(words) > 1 else m.end()
            words = words[1:]
        if words:
            out.append((" ".join(words).rstrip(".?!,"), "", start))
    return out


def mentions(engine: Engine, text: str) -> list[Mention]:
    """The entity mentions of ``text``: the entity graph's NER (spaCy, labelled) when the store
    has one, with the capitalized phrases it does not cover; the phrases alone otherwise."""
    found: list[Mention] = []
    extractor = getattr(engine.entities, "extractor", None)
    finder = getattr(extractor, "mentions", None)
    if finder is not None:
        found = list(finder(text))
    covered = [(o, o + len(s)) for s, _, o in found]
    for s, label, o in capitalized(text):
        if not any(a <= o < b for a, b in covered):
            found.append((s, label, o))
    return found


def standalone(engine: Engine, question: str, conversation: Sequence[Message]) -> Rewrite:
    """``question`` made standalone from the earlier messages ``conversation`` (oldest first):
    by the generator when it can rewrite (priced like any call), else by the local rules."""
    earlier = [m for m in capped(conversation) if m.text.strip()]
    if not earlier:
        return Rewrite(question)
    rewriter = getattr(engine.generator, "rewrite", None)
    if rewriter is not None:
        started = time.perf_counter()
        out = rewriter(question, [(m.role, m.text) for m in earlier])
        cost.record(engine.graph, "rewrite", out.model or engine.generator.identity, out.tokens_in, out.tokens_out,
                    time.perf_counter() - started)
        text = " ".join(out.text.split())[:4000] or question
        return Rewrite(text, MODEL)
    history = [(m.text, mentions(engine, m.text)) for m in earlier]
    previous = next((m.text for m in reversed(earlier) if m.role == USER), "")
    return local_rewrite(question, history, previous)


def messages_of(turns: Sequence[dict] | None) -> list[Message]:
    """``[{"role", "content"}]`` (user and assistant; others skipped) as Messages."""
    out = []
    for turn in turns or ():
        role = turn.get("role")
        if role in (USER, ASSISTANT) and isinstance(turn.get("content"), str):
            out.append(Message(role, turn["content"]))
    return out


__all__ = ["LOCAL", "MODEL", "SessionError", "load", "mentions", "messages_of", "new_session_id", "save",
           "standalone"]
