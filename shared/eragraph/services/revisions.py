"""Revising a summary instead of writing it afresh (services.resummarize): which of a region's
new segments are worth revising from their predecessor's summary, and what each member says
for the sentence delta. The text of deleted summaries is kept under ``retired:`` meta keys
until the layer above has taken them out of its segments, because there they are the
children that left."""

from __future__ import annotations

from dataclasses import dataclass

from ..domain.diff import predecessors, sentence_delta
from ..domain.ids import chunk_id
from ..domain.model import Node, Segment
from ..domain.text import whole_pieces
from ..ports.providers import RevisingSummarizer
from ..ports.records import MemberSource
from .engine import Engine

RETIRED = "retired:"  # meta key prefix: text of a deleted summary, kept for the layer above


@dataclass(frozen=True)
class Revision:
    """How to update a predecessor's summary instead of summarizing a segment from scratch."""

    previous: str
    added: tuple[str, ...]
    removed: tuple[str, ...]
    previous_share: float


def retired_key(layer: int, node_id: str) -> str:
    return f"{RETIRED}{layer}:{node_id}"


def can_revise(engine: Engine) -> bool:
    return engine.settings.delta_summaries and isinstance(engine.summarizer, RevisingSummarizer)


Read = tuple[set[str], dict[str, Node]]  # node ids read at once, and the ones of them stored


def _nodes(engine: Engine, ids, have: Read | None) -> dict[str, Node]:
    """``get_nodes(ids)``, answered from ``have`` for the ids it read (absent there: not stored)."""
    ids = list(dict.fromkeys(ids))  # in the order asked
    if have is None:
        return engine.graph.get_nodes(ids)
    missing = [i for i in ids if i not in have[0]]
    more = engine.graph.get_nodes(missing) if missing else {}
    return {i: n for i in ids if (n := have[1].get(i) if i in have[0] else more.get(i)) is not None}


def plan_revisions(engine: Engine, segments: list[Segment], removed: tuple[Segment, ...],
                   children: dict[str, Node], have: Read | None = None,
                   retired: tuple[set[str], dict] | None = None) -> dict[str, Revision]:
    """Segments worth revising instead of summarizing afresh: a segment whose predecessor (the
    removed segment holding most of its members) still has its summary, whose departed children
    all left text (moved children are still nodes; replaced summaries are kept under
    ``retired:`` keys; a deleted chunk leaves none, so its segment is summarized afresh and what
    it said goes with it), and whose revision -- the previous summary plus the sentences the
    joined children add and the departed ones took away (domain.diff.sentence_delta) -- reads
    fewer tokens than summarizing every member."""
    if not can_revise(engine) or not segments or not removed:
        return {}
    layer = segments[0].layer
    before = predecessors(segments, removed)
    if not before:
        return {}
    departed = {m for seg in segments if seg.segment_id in before
                for m in before[seg.segment_id].members if m not in seg.members}
    known = _nodes(engine, {old.summary_id for old in before.values()} | (departed - set(children)), have)
    texts = {m: (_said(engine, n), n.tokens) for m, n in known.items()}
    texts.update({m: (_said(engine, n), n.tokens) for m, n in children.items()})
    for m in departed - set(texts):
        key = retired_key(layer, m)  # read already (``retired``: the keys read, the texts found)
        text = retired[1].get(key) if retired is not None and key in retired[0] else engine.graph.get_meta(key)
        if text is not None:
            texts[m] = (str(text), engine.tokenizer.count(str(text)))
    plans: dict[str, Revision] = {}
    for seg in segments:
        old = before.get(seg.segment_id)
        if old is None or old.summary_id not in texts:
            continue
        joined = [m for m in seg.members if m not in old.members]
        left = [m for m in old.members if m not in seg.members]
        if any(m not in texts for m in joined + left) or any(m not in children for m in seg.members):
            continue
        previous, previous_tokens = texts[old.summary_id]
        added, gone = sentence_delta([texts[m][0] for m in joined], [texts[m][0] for m in left])
        revise_cost = previous_tokens + sum(engine.tokenizer.count(t) for t in added + gone)
        full_cost = sum(children[m].tokens for m in seg.members)
        if revise_cost < full_cost:
            plans[seg.segment_id] = Revision(previous, tuple(added), tuple(gone),
                                             (len(seg.members) - len(joined)) / len(seg.members))
    return plans


def _said(engine: Engine, node: Node) -> str:
    """What a member says, for a revision's sentence delta: a chunk's whole sentences, one a
    line (not the pieces its token window cut at either end), a summary's text."""
    if node.is_summary:
        return node.text
    src = member_source(node, engine.settings.chunk_tokens)
    return "\n".join(whole_pieces(node.text, src.at_start, src.at_end))


def member_source(node: Node, chunk_tokens: int | None = None) -> MemberSource:
    """Where a member comes from, for the summarizer: a chunk's document (its first chunk, the
    one whose id is the document's chunk 0 with this text, starts where the document does; a
    chunk shorter than a full window of ``chunk_tokens`` ends where it does); a summary is a
    source of its own."""
    if node.is_summary or not node.doc_id:
        return MemberSource(node.node_id, True, summary=node.is_summary)
    return MemberSource(node.doc_id, node.node_id == chunk_id(node.doc_id, 0, node.text),
                        at_end=chunk_tokens is None or node.tokens < chunk_tokens)
