"""Access partitions on MultiHop-RAG split into reader groups (issue 59's benchmark).

The corpus is split into ``--groups`` reader groups by a digest of each document id; a share
``--shared`` of the documents is readable by two groups (their own partition). Four stores:

- *partitioned*: every document with its access list (``group:g<i>``), one store;
- *alone*, one per group: that group's readable documents only, without lists;
- *flat*: every document without a list (the unpartitioned store).

Per group, ``collapsed`` Recall@5 (a supporting document counts when a leaf of it is among the
results; a summary counts the documents under it) over the questions whose support that group
may read: the group's caller on the partitioned store against the alone store. Also counted:
summaries among the caller's results (layers kept), the summary count of the partitioned and the
flat store, and the summarize calls of one held-out document inserted into each (the
partitioned one into its partition). Memory profile, extractive summarizer; ``--embedder hash``
is a smoke run, not a retrieval figure.

    python -m eragraph.bench.access --data DIR --embedder hash --out bench-results/access-multihop-hash.json
    python -m eragraph.bench.access --data DIR --embedder hash --only g2 --out bench-results/access-multihop-hash-g2.json

Each group lists the questions whose supporting documents found differ between its caller's
view and its alone store, with each side's results as [layer, documents under it, supporting
documents under it]: where a group gains or loses, and through which results.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

from ..bootstrap.memory import build_memory_engine
from ..config import Settings
from ..domain.access import caller
from ..services.ingest import ingest
from ..services.query import query
from ..services.resummarize import drain
from .common import load_corpus, load_questions, mark_start, run_record


def group_of(doc_id: str, groups: int, shared: float) -> list[str]:
    digest = int(hashlib.sha256(doc_id.encode()).hexdigest()[:12], 16)
    first = digest % groups
    out = [f"group:g{first}"]
    if (digest // groups) % 1000 < shared * 1000:
        out.append(f"group:g{(first + 1 + (digest // 7) % (groups - 1)) % groups}")
    return out


class SharedExtractor:
    """The entity graph's NER, each chunk text extracted once for every store of the run (the
    stores hold the same chunks; spaCy over the corpus is most of a MiniLM run's build)."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.identity = getattr(inner, "identity", "")
        self.seen: dict[str, list] = {}

    def extract(self, texts):
        texts = list(texts)
        todo = list(dict.fromkeys(t for t in texts if t not in self.seen))
        if todo:
            self.seen.update(zip(todo, self.inner.extract(todo)))
        return [self.seen[t] for t in texts]

    def __getattr__(self, name):  # query_entities, mentions: the model's own
        return getattr(self.inner, name)


def progress(started: float, what: str) -> None:
    """A line on stderr per step (a MiniLM run takes long on a loaded machine)."""
    print(f"[{time.perf_counter() - started:7.1f} s] {what}", file=sys.stderr, flush=True)


def build(settings: Settings, docs, like=None, cache_file: str | None = None):
    """A memory store of ``docs``; ``like``: a store of the same run whose embedder (its cache
    embeds each text once: the MiniLM run embeds the corpus once, not once per store) and
    entity extractor (each chunk's NER once) this one shares, its entity names included.
    ``cache_file`` (the first store's): its embedder's cache in that SQLite file, kept between
    runs, so a rerun (or a run cut short, run again) embeds nothing already embedded."""
    engine = build_memory_engine(settings)
    if cache_file is not None and like is None:
        from ..providers.embed_cache import CachedEmbedder, SqliteEmbeddingCache

        if not isinstance(engine.embedder, CachedEmbedder):
            raise SystemExit("--embed-cache needs the embedding cache (ERAGRAPH_EMBED_CACHE on)")
        engine.embedder.cache = SqliteEmbeddingCache(cache_file)
    if engine.entities is not None and not isinstance(engine.entities.extractor, SharedExtractor):
        engine.entities.extractor = SharedExtractor(engine.entities.extractor)
    if like is not None:
        engine.embedder = like.embedder
        if engine.entities is not None and like.entities is not None:
            engine.entities.embedder = like.embedder
            engine.entities.extractor = like.entities.extractor
    ingest(engine, docs)
    drain(engine)
    return engine


def summaries(engine) -> int:
    return sum(n for layer, n in engine.graph.layer_sizes().items() if layer > 0)


def docs_under(engine, node_id: str, seen: dict) -> set[str]:
    if node_id not in seen:
        node = engine.graph.get_nodes([node_id])[node_id]
        seen[node_id] = {node.doc_id} if not node.is_summary else \
            set().union(*(docs_under(engine, c, seen) for c in node.children))
    return seen[node_id]


def recall(engine, questions, who, k: int, found_of: list | None = None) -> tuple[float, int]:
    """Mean Recall@k and the summaries among the results; ``found_of`` gets each question's
    supporting documents found (the per-question comparison of the view and the alone store)."""
    scores, layered, seen = [], 0, {}
    for q in questions:
        response = query(engine, q["question"], mode="collapsed", k=k, caller=who)
        found = set().union(*(docs_under(engine, r.id, seen) for r in response.results)) if response.results else set()
        scores.append(len(found & set(q["supporting_ids"])) / len(q["supporting_ids"]))
        layered += sum(r.layer > 0 for r in response.results)
        if found_of is not None:  # the supporting documents found, and each result's [layer, documents, supporting]
            found_of.append({"found": sorted(found & set(q["supporting_ids"])), "results": [
                [r.layer, len(docs_under(engine, r.id, seen)), len(docs_under(engine, r.id, seen) & set(q["supporting_ids"]))]
                for r in response.results]})
    return (statistics.mean(scores) if scores else 0.0), layered


def insert_calls(engine, doc) -> int:
    ingest(engine, [doc])
    return drain(engine).cost.summarize_calls


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="the multihop_rag folder (corpus.jsonl, questions.jsonl)")
    ap.add_argument("--embedder", default="hash", choices=("hash", "minilm"))
    ap.add_argument("--docs", type=int, default=None, help="the first N corpus rows (default all)")
    ap.add_argument("--questions", type=int, default=None)
    ap.add_argument("--groups", type=int, default=4)
    ap.add_argument("--shared", type=float, default=0.1)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--only", default=None, metavar="GROUP",
                    help="one group (g2): its caller on a partitioned store of its documents only (its partitions "
                         "are cut as in the whole store's: each on its own) against its alone store; no flat store")
    ap.add_argument("--embed-cache", default=None, metavar="FILE",
                    help="keep the embeddings in this SQLite file between runs (a rerun embeds nothing again)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    started = time.perf_counter()
    mark_start()  # the commit of the code that runs: read before, not after, a long run
    settings = Settings(embedder=args.embedder)
    data = Path(args.data)
    corpus = load_corpus(data / "corpus.jsonl", args.docs)
    held, corpus = corpus[-1], corpus[:-1]
    lists = {d.doc_id: group_of(d.doc_id, args.groups, args.shared) for d in corpus + [held]}
    questions = load_questions(data / "questions.jsonl", args.questions, [d.doc_id for d in corpus])
    only = None if args.only is None else f"group:{args.only}"
    placed = [d for d in corpus if only is None or only in lists[d.doc_id]]
    partitioned = build(settings, [replace(d, metadata={"access": lists[d.doc_id]}) for d in placed],
                        cache_file=args.embed_cache)
    progress(started, f"partitioned store: {len(placed)} documents")
    flat = build(settings, corpus, partitioned) if only is None else None
    progress(started, "flat store" if flat is not None else "no flat store (--only)")
    out: dict = {"groups": {}, "docs": len(corpus), "questions_total": len(questions),
                 "embedder": args.embedder, "k": args.k, "shared": args.shared, "only": only}
    for g in range(args.groups):
        name = f"group:g{g}"
        if only is not None and name != only:
            continue
        mine = [d for d in corpus if name in lists[d.doc_id]]
        ids = {d.doc_id for d in mine}
        asked = [q for q in questions if set(q["supporting_ids"]) <= ids]
        alone = build(settings, mine, partitioned)
        progress(started, f"{name}: its alone store, {len(mine)} documents")
        found_view: list = []
        found_alone: list = []
        view, layered = recall(partitioned, asked, caller([name]), args.k, found_view)
        own, own_layered = recall(alone, asked, None, args.k, found_alone)
        out["groups"][name] = {"docs": len(mine), "questions": len(asked), "recall_partitioned_view": round(view, 4),
                               "recall_alone": round(own, 4), "delta_points": round(100 * (view - own), 2),
                               "summaries_in_results": layered, "summaries_in_results_alone": own_layered,
                               "summaries_alone_store": summaries(alone),
                               # the questions whose supporting documents found differ: why a group gains or loses
                               "questions_differing": [
                                   {"question": q["question"][:160], "support": len(q["supporting_ids"]),
                                    "found_view": v, "found_alone": a}
                                   for q, v, a in zip(asked, found_view, found_alone) if v["found"] != a["found"]]}
    if flat is not None:
        out["summaries_partitioned"] = summaries(partitioned)
        out["summaries_flat"] = summaries(flat)
        out["insert_summarize_calls_partitioned"] = insert_calls(
            partitioned, replace(held, metadata={"access": lists[held.doc_id]}))
        out["insert_summarize_calls_flat"] = insert_calls(flat, held)
        out["held_out_access"] = lists[held.doc_id]
    out["machine"] = f"{platform.machine()}, {platform.python_version()}"
    out["run"] = run_record()
    out["seconds"] = round(time.perf_counter() - started, 1)
    out["command"] = "python -m eragraph.bench.access " + " ".join(sys.argv[1:] if argv is None else argv)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
