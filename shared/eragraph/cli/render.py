"""What the commands print: a report as JSON with --json, else its human-readable form (one
renderer per report)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def emit(args: argparse.Namespace, payload: dict[str, Any], human: str) -> None:
    """Print ``payload`` as JSON with --json, else ``human``."""
    if getattr(args, "json", False):
        json.dump(payload, sys.stdout, indent=2, sort_keys=False, default=str)
        sys.stdout.write("\n")
    else:
        print(human)


def usd(value: float | None) -> str:
    return "unpriced" if value is None else f"${value:.6f}"


def render_ingest(out: dict) -> str:
    """The human-readable form of an ingest report (``ingest.ingest_docs``, skips merged)."""
    layers = ", ".join(f"layer {k}: {v}" for k, v in out["segments_resummarized"].items()) or "none"
    return (f"{out['documents_added']} added, {out['documents_replaced']} replaced, "
            f"{out['documents_unchanged']} unchanged, "
            + (f"{out['documents_retagged']} re-tagged (metadata only), " if out["documents_retagged"] else "")
            + f"{out['chunks_added']} chunks, "
            f"segments re-summarized: {layers}; {out['summarize_calls']} summarize calls, "
            f"{out['tokens_in']} tokens in, {out['tokens_out']} out, {out['seconds']:.1f}s"
            + (f"; {len(out['errors'])} skipped" if out["errors"] else ""))


def render_delete(out: dict) -> str:
    """The human-readable form of a delete report (services.remove, drained)."""
    return (f"{out['documents_removed']} documents removed ({out['chunks_removed']} chunks); "
            f"{out['summarize_calls']} summarize calls"
            + "".join(f"\n  {e['source']}: {e['error']}" for e in out["errors"]))


def render_query(out: dict) -> str:
    """The human-readable form of a query response (QueryResponse.to_dict, or the API's JSON)."""
    lines = []
    if out.get("answer") is not None:
        lines += [f"answer: {out['answer']}", ""]
    for i, r in enumerate(out.get("results") or [], 1):
        label = f"L{r['layer']}" + (f" {r['title'] or r['doc_id']}" if r["layer"] == 0
                                     else f" summary of {len(r['children'])}")
        snippet = " ".join(r["text"].split())[:300]
        lines.append(f"{i}. [{r['score']:.3f}] {label} ({r['id']})\n   {snippet}")
    if out.get("rerank"):
        rr = out["rerank"]
        lines.append(f"(reranked by {rr['model']} from {rr['candidates']} candidates in {rr['ms']:.0f} ms)")
    route = out.get("route") or out.get("mode")
    if out.get("router_score") is not None:
        lines.append(f"(route: {route}, s(q) = {out['router_score']:.3f})")
    elif route:
        lines.append(f"(route: {route})")
    if out.get("explain"):
        lines += ["", render_explain(out["explain"])]
    if out.get("note"):
        lines.append(f"({out['note']})")
    return "\n".join(lines) or "no results"


def render_explain(ex: dict) -> str:
    """The human-readable form of a query's explain (services.explain.report)."""
    seeds = ", ".join(f"{s['entity']} ({s['score']:.2f})" for s in ex.get("seeds") or []) or "none"
    lines = [f"why ({ex.get('mode')}): seeds {seeds}"]
    reached = [a for a in ex.get("activated") or [] if a["entity"] not in {s["entity"] for s in ex.get("seeds") or []}]
    if reached:
        lines.append("  activated: " + ", ".join(f"{a['entity']} ({a['weight']:.2f})" for a in reached[:12]))
    for p in ex.get("passages") or []:
        lines.append(f"  {p['rank']}. {p['id']} restart {p['restart']:.3f} score {p['score']:.4f}: {p['why']}")
    return "\n".join(lines)


def render_stats(out: dict) -> str:
    """The human-readable form of a store's stats (services.stats.stats)."""
    rows = [f"documents: {out['documents']}   S_min/S_max: {out['s_min']}/{out['s_max']}   "
            f"hyperplanes: {out['n_planes']}   embedder: {out['embedder']}"]
    for row in out["layers"]:
        seg = (f"{row['segments']} segments of {row['smallest_segment']}..{row['largest_segment']}"
               if row["segments"] else "top layer")
        rows.append(f"  layer {row['layer']}: {row['nodes']} nodes, {seg}")
    for row in out["ledger"]["calls"]:
        rows.append(f"  {row['kind']} ({row['model'] or 'model not recorded'}): {row['calls']} calls, "
                    f"{row['tokens_in']} tokens in, {row['tokens_out']} out, {row['seconds']:.1f}s, "
                    f"{usd(row['cost_usd'])}")
    total = out["ledger"]["total"]
    rows.append(f"  total: {total['tokens_in']} tokens in, {total['tokens_out']} out, {usd(total['cost_usd'])}"
                + (f" (unpriced: {', '.join(out['ledger']['unpriced'])})" if out["ledger"]["unpriced"] else ""))
    return "\n".join(rows)


def render_status(out: dict, prefix: str, states) -> str:
    """The human-readable form of a status listing: each state's count under ``prefix``, then
    the documents (services.doc_status.listing)."""
    rows = [f"{out['total']} documents under {prefix or '(all)'}: "
            + ", ".join(f"{out[s]} {s.replace('_', ' ')}" for s in states)]
    rows += [f"  {v['state']:<18} {v['source']}" + (f"  ({v['reason']})" if v.get("reason") else "")
             for v in out["documents"]]
    return "\n".join(rows)


# what each of reindex's metrics counts, in its report's order
REINDEX_FINDINGS = (
    ("LayersMigrated", "layers moved to the current ref-index layout"),
    ("LayerCountsRepaired", "layer counters rewritten"),
    ("OrphanChunksRemoved", "chunks of no document removed"),
    ("IncompleteDocumentsRemoved", "documents missing chunks removed (ingest them again)"),
    ("EntityChunksReextracted", "chunks given their entities again"),
    ("EntityChunksOrphanedRemoved", "entity records of gone chunks removed"),
    ("EntityCountsRepaired", "entity counts rewritten"),
    ("EntityVectorsReembedded", "entity vectors re-embedded"),
    ("EntityVectorsOrphanedDeleted", "entity vectors of gone entities deleted"),
    ("OutboxesFinished", "unfinished summary writes completed"),
    ("FollowupsExpired", "stale ingest follow-ups dropped"),
    ("LayersRequeued", "stuck layers re-queued"),
    ("LayersRepaired", "layers re-partitioned and re-summarized"),
    ("VectorsReembedded", "missing vectors re-embedded"),
    ("VectorsOrphanedDeleted", "vectors of no node deleted"),
    ("LexicalIndexBuilt", "leaves added to the lexical (BM25) index"),
    ("LeafAttributesAdded", "leaves given their metadata attributes (a store built before filters)"),
)


def render_reindex(store: str, out: dict) -> str:
    """The human-readable form of a reindex report (services.reindex.run)."""
    metrics = out.get("metrics", {})
    found = [(metrics[key], label) for key, label in REINDEX_FINDINGS if metrics.get(key)]
    lines = [f"reindex of {store} ({out.get('seconds', 0.0):.1f}s): "
             + (f"repaired {sum(n for n, _ in found)} things" if found else "nothing to repair")]
    lines += [f"  {n} {label}" for n, label in found]
    if out.get("incomplete_documents_removed"):
        lines.append(f"    documents: {', '.join(map(str, out['incomplete_documents_removed']))}")
    inv = out.get("invariants", {})
    checked = f"{inv.get('checked_nodes', 0)} nodes, {inv.get('checked_segments', 0)} segments checked"
    if inv.get("ok", True):
        lines.append(f"  invariants hold ({checked})")
    else:
        lines.append(f"  invariants: {inv.get('violation_count')} violations ({checked}):")
        lines += [f"    {v}" for v in inv.get("violations", [])[:10]]
    return "\n".join(lines)
