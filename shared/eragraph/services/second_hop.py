"""The second hop of the leaf modes (issue 61, item 2), no model at query time; on when the
``hop_entities`` graph setting is above 0 (ERAGRAPH_GRAPH_HOP_ENTITIES) and the store has an
entity graph.

The first hop runs as the mode does; its top passage's entities the question did not name
(domain.second_hop.bridge_entities: the ones sharing a sentence with the question's first, the
rarer first, at most ``hop_entities``) carry the question one step further:

- ``tri_graph``: they re-seed the walk (seeds beside the question's matches, at similarity 1);
- ``dense``, ``hybrid``: their names are appended to the question, which is embedded again and
  searched again (dense; dense and BM25 for hybrid); ``auto``'s dense side (services.routing)
  takes the same hopped list.

The two rankings are fused by reciprocal rank fusion (domain.sentence_paths.rrf_fuse), the second
hop's weighted ``hop_weight``; the usual document-at-a-time finish. Reads beyond the first hop:
the top passage's sentences (``sentence_ids_of_chunks``, ``get_sentences``) and the bridge
candidates' frequencies (``frequencies``): three batched calls on any entity store, DynamoDB's
included, whatever the corpus size; then one more walk, or one embedding and one more search.
The question's own entities are the walk's matches (tri_graph) or, for the dense side (which
runs no NER), the passage's entities whose name the question contains."""

from __future__ import annotations

import dataclasses
import re

from ..domain.ranking import Candidate
from ..domain.second_hop import bridge_entities, expanded_query
from ..domain.sentence_paths import rrf_fuse
from . import graph_query as gq
from .engine import Engine
from .leaf_ranking import fill_by_document
from .lexical_search import dense_list, fetch_size, hybrid_ranked
from .query_context import QueryContext, has_entity_graph


def active(engine: Engine) -> bool:
    return gq.graph_settings(engine).hop_entities > 0 and has_entity_graph(engine)


def bridges(engine: Engine, chunk_id: str, text: str, known: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """The bridge entities of ``chunk_id`` for the question ``text`` (``known``: graph entities
    the question matched), in three batched reads."""
    store = engine.entities.store
    sids = store.sentence_ids_of_chunks([chunk_id])
    sents = store.get_sentences(sids) if sids else {}
    ordered = [sents[s].entities for s in sids if s in sents]
    words = _words(text)
    named = {e for ents in ordered for e in ents if e in known or _words(e) in words}
    candidates = sorted({e for ents in ordered for e in ents} - named)
    if not candidates:
        return []
    return bridge_entities(ordered, named, store.frequencies(candidates), gq.graph_settings(engine).hop_entities)


def _words(text: str) -> str:
    """Case-folded words, space-separated with a space at each end (a name is in a question
    when its words are, whole)."""
    return " " + " ".join(re.findall(r"\w+", text.casefold())) + " "


def tri_graph(ctx: QueryContext) -> list[Candidate]:
    """tri_graph, then the walk re-seeded with the top passage's bridges."""
    engine, k = ctx.engine, ctx.k
    n = k * gq.DEFAULT_OVERFETCH
    walk = gq.tri_graph_walk(engine, ctx.text, ctx.vector, n, ctx.where)
    if walk is None:
        return gq.dense(engine, ctx.vector, k, ctx.budget, ctx.where)
    if walk.view is not None and walk.view.empty:
        return []
    ranked = walk.ranked
    found = bridges(engine, ranked[0][0], ctx.text, set(walk.seeds)) if ranked else []
    if found:
        again = gq.reseeded_walk(engine, walk, ctx.vector, n, ctx.where, dict.fromkeys(found, 1.0))
        second = [c for c, _ in again.ranked] if again is not None else []
        ranked = rrf_fuse([c for c, _ in ranked], second, gq.graph_settings(engine).hop_weight)
        ctx.notes.append(f"second hop through {', '.join(found)}")
    return gq._finish(engine, ranked, ctx.vector, k, ctx.budget, ctx.where)


def dense_ranked(ctx: QueryContext, n: int) -> list[tuple[str, float]]:
    """The dense leaf list with its second hop (RRF scores; the first hop's when no bridge)."""
    return _hopped(ctx, dense_list(ctx, n), lambda c: dense_list(c, n))


def hybrid_ranked_hop(ctx: QueryContext, n: int) -> list[tuple[str, float]]:
    """The hybrid leaf list with its second hop (``auto``'s dense side reads it too)."""
    return _hopped(ctx, [c for c, _ in hybrid_ranked(ctx, n)[:n]], lambda c: [x for x, _ in hybrid_ranked(c, n)[:n]])


def dense(ctx: QueryContext) -> list[Candidate]:
    n = fetch_size(ctx.k)
    return fill_by_document(ctx.engine, dense_ranked(ctx, n)[:n], ctx.k, ctx.budget)


def hybrid(ctx: QueryContext) -> list[Candidate]:
    n = fetch_size(ctx.k)
    return fill_by_document(ctx.engine, hybrid_ranked_hop(ctx, n)[:n], ctx.k, ctx.budget)


def _hopped(ctx: QueryContext, first: list[str], search) -> list[tuple[str, float]]:
    """The dense side's second hop: the question with the bridges' names, searched again, the
    two lists fused."""
    found = bridges(ctx.engine, first[0], ctx.text) if first else []
    if not found:
        return [(c, 1.0 / (60 + r)) for r, c in enumerate(first, 1)]
    text = expanded_query(ctx.text, found)
    hop = dataclasses.replace(ctx, text=text, given_vector=ctx.engine.embedder.embed([text])[0], notes=ctx.notes)
    fused = rrf_fuse(first, search(hop), gq.graph_settings(ctx.engine).hop_weight)
    ctx.notes.append(f"second hop through {', '.join(found)}")
    return fused

HOPS = {"tri_graph": tri_graph, "dense": dense, "hybrid": hybrid}  # the modes with a second hop (services.modes)
