"""`eragraph bench levers`: a graph-retrieval lever against ``tri_graph`` as shipped, question by
question, tuned on one half of the dev questions and read on the other.

    eragraph bench levers --store stores/musique \\
        --questions ../shared/data/musique/questions.jsonl \\
        --variants base,synonymy=0.5,synonymy=1,bridges=0.5 --out bench-results/levers-musique.json

Every variant runs ``tri_graph`` through ``services.query.query`` on the same store, questions
and question embeddings (made once); Recall@2/@5 as `eragraph bench retrieval` counts them
(leaf documents only), every question's recall kept (``per_question``). The questions' halves are
``domain.halves``: half 0 tunes (a lever's setting is chosen on it, pooled over the datasets),
half 1 is held out (the setting is read there, once).

Variants:
- ``base``: the store's settings with the synonymy edges' weight at 0 (the walk of earlier
  versions) and the exact entity match;
- ``ann``: ``base`` with the query's entity names matched through the entity vector index
  (``entity_match = ann``) instead of against every entity vector: the exactness it loses, and
  its time;
- ``synonymy=W``: HippoRAG 2's synonymy edges (the store's, ``services.synonyms``) join the walk
  with weight W x cosine (the ``synonym_weight`` setting);
- ``bridges=W``: the summary hierarchy inside the walk. The passages of one layer-1 segment are
  joined through their summary: each pair by an edge of weight W / (n - 1) for a segment of n
  passages, so every passage spreads W through its summary; no restart mass is put on it (a
  bridge, not an answer). Edges through a summary node of its own (passage -> summary ->
  passage, a step more of damping) measured no better in the exploration, nor did layers above
  1; this is the walk with the summary node folded out;
- ``lam=V``, ``damping=V``, ``threshold=V``, ``passage_weight=V``: one of tri_graph's own
  settings (config.GraphSettings) at V;
- ``paths`` and ``paths:SETTING=V:...``: the ``paths`` mode (services.path_query: beam search
  over sentence paths inside tri_graph's PageRank subgraph, fused with its ranking) instead of
  ``tri_graph``, with the shipped path settings or some of them (``path_beam``, ``path_depth``,
  ``path_mass``, ``path_weight``, ``path_passages``) set; paired against ``base`` like every lever;
- ``auto`` and ``auto:route=paths[:SETTING=V...]``: the router (``auto``) as shipped, or with
  ``paths`` behind its graph route and fusion's graph list (the ``route`` setting), or with its
  dense side's second hop (``auto:hop_entities=N[:hop_weight=W]``), paired against ``base``
  (``tri_graph``) too;
- ``hop[:hop_entities=N][:hop_weight=W]``: ``tri_graph`` with its second hop (services.second_hop:
  the top passage's bridge entities re-seed the walk; ``hop_entities`` 2 unless set);
- ``dense``, ``hybrid`` and ``dense:hop_entities=N[:hop_weight=W]`` (or ``hybrid:...``): the
  leaf mode, alone or with its second hop (the bridges' names appended to the question), paired
  against ``base`` like every lever (kind ``dense+hop``, ``hybrid+hop`` with a hop).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..domain.halves import halves
from .common import add_common_options, bench_settings, finish, load_questions, mean, percentile
from .retrieval import embed_questions, recall

# tri_graph's own settings a variant may set (GraphSettings fields): lam=1 is the shipped walk
# with lambda 1
TUNABLE = ("lam", "damping", "threshold", "passage_weight")
PATH_SETTINGS = ("path_beam", "path_depth", "path_mass", "path_weight", "path_passages")
HOP_SETTINGS = ("hop_entities", "hop_weight")
MODE_VARIANTS = ("paths", "auto", "hop", "dense", "hybrid")  # a variant naming a mode (and its settings)
DEFAULT_VARIANTS = "base,ann,synonymy=0.5,synonymy=1,synonymy=2,bridges=0.5,bridges=2"


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("levers", help="tri_graph variants question by question, on tuning and held-out halves",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--store", required=True, help="a store built by `eragraph bench retrieval`")
    p.add_argument("--questions", required=True, help="questions JSONL ({id, question, supporting_ids})")
    p.add_argument("--variants", default=DEFAULT_VARIANTS, help=f"comma-separated (default {DEFAULT_VARIANTS})")
    p.add_argument("--limit", type=int, default=300, help="use at most N questions (default 300)")
    p.add_argument("--store-note", default="", help="how the store was built (kept in the result as load_note)")
    p.add_argument("--study", default="", help="a name for this set of variants (one current run per dataset and study)")
    add_common_options(p)
    return p


def _with_synonymy_edges(engine: Any) -> None:
    """The store's synonymy edges, made now by reindex's backfill if the store did not keep them
    (inserts keep them only while the walk weighs them: config.GraphSettings.synonyms_on)."""
    from ..services import synonyms

    shipped = engine.settings
    gs = shipped.graph_retrieval
    engine.settings = dataclasses.replace(shipped, graph_retrieval=dataclasses.replace(
        gs, synonym_weight=gs.synonym_weight or 1.0))
    try:
        synonyms.backfill(engine, {})
    finally:
        engine.settings = shipped


def parse_variants(text: str) -> list[tuple[str, str, float]]:
    """``base``, ``ann``, ``synonymy=W``, ``bridges=W``, ``<setting>=V``, ``paths[:<path setting>=V...]``
    -> (name, kind, value)."""
    out = []
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        head = item.split(":")[0]
        if head in MODE_VARIANTS:
            set_ = path_settings(item)  # refused here, in words, when malformed
            hop = head in ("dense", "hybrid") and set_.get("hop_entities", 0) > 0
            out.append((item, f"{head}+hop" if hop else head, 0.0))
            continue
        kind, _, raw = item.partition("=")
        if kind in ("base", "ann") and not raw:
            out.append((item, kind, 0.0))
            continue
        if kind not in ("synonymy", "bridges", *TUNABLE) or not raw:
            raise ValueError(f"unknown variant {item!r}: base, ann, synonymy=W, bridges=W or one of "
                             f"{', '.join(TUNABLE)}=V")
        weight = float(raw)
        if weight < 0:
            raise ValueError(f"{item}: the weight is not negative")
        out.append((item, kind, weight))
    if not out:
        raise ValueError("no variant given")
    return out


def path_settings(name: str) -> dict[str, float | int | str]:
    """The graph settings a ``paths:SETTING=V:...`` (``auto:``, ``hop:``, ``dense:``, ``hybrid:``)
    variant sets: path settings for ``paths`` and ``auto``, hop settings for the others."""
    head = name.split(":")[0]
    allowed = HOP_SETTINGS if head in ("hop", "dense", "hybrid") else PATH_SETTINGS + HOP_SETTINGS * (head == "auto")
    out: dict[str, float | int | str] = {"hop_entities": 2} if head == "hop" else {}
    for part in name.split(":")[1:]:
        key, _, raw = part.partition("=")
        if key == "route" and name.startswith("auto:") and raw in ("tri_graph", "paths"):
            out[key] = raw
            continue
        if key not in allowed or not raw:
            raise ValueError(f"{name}: {part!r} is not one of {', '.join(s + '=V' for s in allowed)}")
        real = key in ("path_mass", "path_weight", "hop_weight")
        value = float(raw)
        if value < 0 or (not real and value != int(value)):
            raise ValueError(f"{name}: {key} is a non-negative {'number' if real else 'integer'}")
        out[key] = value if real else int(value)
    return out


def variant_mode(name: str, graph: Any) -> tuple[str, Any]:
    """The mode a ``MODE:SETTING=V...`` variant (``paths``, ``auto``, ``hop``, ``dense``, ``hybrid``,
    with their settings) runs and the graph settings it runs with (``graph``, a GraphSettings, with
    the variant's settings set); any other name is a mode as given, with ``graph`` unchanged."""
    head = name.split(":")[0]
    if head not in MODE_VARIANTS:
        return name, graph
    return (head if head != "hop" else "tri_graph"), dataclasses.replace(graph, **path_settings(name))


def sibling_edges(engine: Any, chunks: list[str], weight: float):
    """The bridges variant's passage x passage edges: passages of one layer-1 segment joined, each
    pair by weight / (n - 1)."""
    import scipy.sparse as sp

    pos = {c: i for i, c in enumerate(chunks)}
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    refs = [r.node_id for r in engine.graph.layer_refs(1)]
    for start in range(0, len(refs), 1000):
        for node in engine.graph.get_nodes(refs[start:start + 1000]).values():
            members = [pos[c] for c in node.children if c in pos]
            if len(members) < 2:
                continue
            w = weight / (len(members) - 1)
            for a in members:
                for b in members:
                    if a != b:
                        rows.append(a)
                        cols.append(b)
                        vals.append(w)
    return sp.csr_matrix((vals, (rows, cols)), shape=(len(chunks), len(chunks)))


def _bridged(engine: Any, weight: float) -> None:
    """Put the bridges into the snapshot's cached tri_graph walk at synonymy weight 0 (the walk a
    query without a filter uses; ``Snapshot.walk`` keeps it by (graph, synonym weight))."""
    import scipy.sparse as sp

    from ..domain import graph_math as gm
    from ..services import graph_query as gq

    snap = gq.snapshot(engine)
    base = snap.tri_adjacency
    pad = base.shape[0] - len(snap.chunks)
    extra = sp.block_diag([sibling_edges(engine, snap.chunks, weight), sp.csr_matrix((pad, pad))], format="csr")
    snap._walks[("tri_adjacency", 0.0)] = gm.walk((base + extra).tocsr())


def run(args: Any) -> dict:
    from ..bootstrap import build_engine
    from ..services.query import query

    variants = parse_variants(args.variants)
    engine = build_engine(getattr(args, "profile", "local"), args.store, bench_settings(args))
    if engine.entities is None:
        raise ValueError(f"{args.store}: the store has no entity graph")
    questions = load_questions(args.questions, args.limit)
    ids = [str(q.get("id", i)) for i, q in enumerate(questions)]
    _, vectors = embed_questions(engine, questions)
    shipped = engine.settings
    if any(kind == "synonymy" for _, kind, _ in variants):
        _with_synonymy_edges(engine)
    out: dict[str, dict] = {}
    for name, kind, weight in variants:
        gs = dataclasses.replace(shipped.graph_retrieval, synonym_weight=weight if kind == "synonymy" else 0.0,
                                 entity_match="ann" if kind == "ann" else "exact",
                                 **({kind: weight} if kind in TUNABLE else {}),
                                 **(path_settings(name) if name.split(":")[0] in MODE_VARIANTS else {}))
        head = name.split(":")[0]
        mode = head if head in ("paths", "auto", "dense", "hybrid") else "tri_graph"
        engine.settings = dataclasses.replace(shipped, graph_retrieval=gs)
        engine.graph_snapshot = None  # every variant starts from the store's own walk
        if kind == "bridges":
            _bridged(engine, weight)
        per: dict[str, list[float]] = {"recall@2": [], "recall@5": []}
        latencies = []
        for q, v in zip(questions, vectors):
            t0 = time.perf_counter()
            res = query(engine, q["question"], mode=mode, k=5, vector=v).results
            latencies.append((time.perf_counter() - t0) * 1000.0)
            docs = [r.doc_id for r in res if r.layer == 0]
            support = set(q["supporting_ids"])
            per["recall@2"].append(round(recall(docs[:2], support), 4))
            per["recall@5"].append(round(recall(docs[:5], support), 4))
        out[name] = {"kind": kind, "weight": weight, "mode": mode, **{k: round(mean(v), 4) for k, v in per.items()},
                     "latency_ms_p95": round(percentile(latencies, 95), 2), "per_question": per}
        if not getattr(args, "no_progress", False):
            print(f"{name:>16}: R@5 {out[name]['recall@5']:.4f}", file=sys.stderr)
    engine.settings = shipped
    store = engine.entities.store
    result = {"store": str(args.store), "questions": len(questions), "question_ids": ids,
              "halves": halves(ids), "variants": out,
              "dataset": Path(str(args.questions)).parent.name, "study": getattr(args, "study", "") or "",
              **({"load_note": args.store_note} if getattr(args, "store_note", "") else {}),
              "synonym_edges": _edge_count(store),
              "entities": store.entity_count(), "embedder": engine.embedder.identity,
              "graph_settings": dataclasses.asdict(shipped.graph_retrieval)}
    return finish(result, args, "levers")


def _edge_count(store: Any) -> int | None:
    """The store's synonymy edges (a store that cannot export its matrices, DynamoDB: not counted)."""
    return int(store.export().synonymy.nnz // 2) if store.can_export else None

