"""The second hop of the leaf modes (issue 61): which of the first hop's top passage's entities
carry the question one step further, free of I/O.

A 2-hop question names its first entity ("the team of Anna Benson's spouse"); the passage the
first hop finds names the bridge ("Anna Benson is the spouse of Kris Benson"), and the answer
passage names the bridge only ("Kris Benson pitched for the Mets"). The bridge is an entity of
the top passage the question did not name; among several, the likelier ones are those in a
sentence that also names one of the question's entities (the sentence that links the two), and
the rarer ones (a year or a country names half the corpus and leads anywhere).

Cost: linear in the passage's entity mentions (a passage's, capped by the chunk size)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence


def bridge_entities(sentences: Sequence[Iterable[str]], known: Iterable[str], frequency: Mapping[str, int],
                    cap: int) -> list[str]:
    """Up to ``cap`` entities of a passage (``sentences``: each sentence's entities, in passage
    order) not in ``known`` (the question's): first those sharing a sentence with a known
    entity, then the rest; within each group the rarer first (``frequency``: passages naming
    it; one missing counts as rarest), then the passage's order."""
    if cap <= 0:
        return []
    known = set(known)
    linked: dict[str, int] = {}
    other: dict[str, int] = {}
    for ents in sentences:
        ents = list(dict.fromkeys(ents))
        near = any(e in known for e in ents)
        for e in ents:
            if e in known or e in linked:
                continue
            if near:
                linked[e] = len(linked) + len(other)
                other.pop(e, None)
            elif e not in other:
                other[e] = len(linked) + len(other)

    def order(group: dict[str, int]) -> list[str]:
        return sorted(group, key=lambda e: (frequency.get(e, 0), group[e]))

    return (order(linked) + order(other))[:cap]


def expanded_query(text: str, entities: Sequence[str]) -> str:
    """The question with the bridge entities' names appended (the dense and lexical second hop)."""
    return " ".join([text.rstrip(), *entities]) if entities else text
