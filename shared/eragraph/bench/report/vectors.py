"""The local vector index candidates page: every backend on the same seeded vectors, and the
local index's targets at a million vectors (`eragraph bench vectors`)."""

from __future__ import annotations

from pathlib import Path

from .markdown import fmt, table, verdict
from .runs import command, run_info, run_line

PAGE = PREFIX = "vectors"
TITLE = "Local vector index candidates"
SEARCH_P95_MS = 30.0  # the index search alone within the warm collapsed query target at 1M chunks
INTRO = ["`eragraph bench vectors`: exact FAISS flat (the local profile's only index until it took IVF "
         "on from 100k vectors), FAISS IVF, the local profile's own `FaissVectorIndex` (`eragraph-faiss`: "
         "flat below 100k, IVF from there on; flushed after each build batch, so its build time includes "
         "its change log and snapshots) and graph indexes that answer approximately, on the same "
         "seeded vectors, each backend in its own process. Query: one question at a time, one thread, top-10; recall@10 against the exact "
         "top-10. Delete and replace: one id per operation (a summary re-made), median."]


def dataset(name: str, data: dict) -> str:
    """Each file is its own configuration (vectors, size, backends and their parameters): a run
    never replaces another of this benchmark."""
    return name


def targets(name: str, data: dict) -> list[list[str]]:
    return vector_target_rows(name, data)


def section(name: str, d: dict, plots: Path) -> list[str]:
    out: list[str] = []
    out += [f"### {name}", "", f"Command: `{command(d)}`", "", run_line(d), "",
            f"Vectors: {d.get('vectors')}; {d.get('queries')} queries; libraries "
            + ", ".join(f"{k} {v}" for k, v in d.get("libraries", {}).items()) + ".", ""]
    if d.get("load_average_note"):
        out += [f"Load: {d['load_average_note']}.", ""]
    elif d.get("load_average"):
        out += [f"Load average (1 min) before and after the run: {d['load_average'][0]} and "
                f"{d['load_average'][1]}, on {run_info(d)['cores']} cores.", ""]
    rows, extra = [], []
    for r in d.get("rows", []):
        if "error" in r:
            rows.append([r["backend"], fmt(r["n"]), "error: " + r["error"]] + [""] * 9)
            continue
        rows.append([r["backend"], fmt(r["n"]), r["build_seconds"], r["query_ms_p50"], r["query_ms_p95"],
                     r["recall_at_10"], r["delete_ms_median"], r["replace_ms_median"],
                     "yes" if r["reclaims_deleted_space"] else "tombstone",
                     round(r["file_bytes"] / 2**20), r["open_seconds"], r["rss_peak_minus_vectors_mb"]])
        if "filtered_layer0_ms_p95" in r:  # runs from before the filter and after-change columns have none
            extra.append([r["backend"], fmt(r["n"]),
                          f"{r['filtered_layer0_ms_p95']} / {r['filtered_layer0_recall_at_10']}",
                          f"{r['filtered_layer3_ms_p95']} / {r['filtered_layer3_recall_at_10']}",
                          f"{r['after_changes_query_ms_p95']} / {r['after_changes_query_recall_at_10']}",
                          f"{r['after_optimize_query_ms_p95']} / {r['after_optimize_query_recall_at_10']}"
                          if "after_optimize_query_ms_p95" in r else "", r.get("filter_method", "")])
    out += table(["backend", "vectors", "build s", "query p50 ms", "query p95 ms", "recall@10",
                  "delete ms", "replace ms", "delete frees", "file MiB", "open s", "RSS beyond vectors MB"],
                 rows) + [""]
    if extra:
        out += ["Filtered (layer 0: 90% of the rows; layer 3: about 3%) and after the deletes and replaces "
                "(200 of each; and LanceDB's optimize): query p95 ms / recall@10.", ""]
        out += table(["backend", "vectors", "layer 0", "layer 3", "after changes", "after optimize",
                      "filter"], extra) + [""]
    return out


def vector_target_rows(name: str, d: dict) -> list[list[str]]:
    """The local profile's own index (`eragraph-faiss`) at a million vectors: the ANN half of the
    1M query target (p95 of the index search alone, recall@10 against exact)."""
    rows = []
    for r in d.get("rows", []):
        if r.get("backend") != "eragraph-faiss" or r.get("n", 0) < 1_000_000 or "error" in r:
            continue
        run = f"`{name}` ({fmt(r['n'])} vectors, {r['params'].get('kind')}, one thread)"
        p95, recall = r["query_ms_p95"], r["recall_at_10"]
        ok = p95 <= SEARCH_P95_MS
        rows.append(["local vector index at 1M: search p95 ≤ 30 ms", run, fmt(p95), verdict(ok),
                     f"{SEARCH_P95_MS - p95:.1f} ms to spare" if ok else
                     f"{p95 - SEARCH_P95_MS:.1f} ms over"])
        ok = recall >= 0.98
        rows.append(["local vector index at 1M: recall@10 ≥ 0.98 of exact", run, fmt(recall), verdict(ok),
                     "" if ok else f"{0.98 - recall:.3f} short"])
    return rows
