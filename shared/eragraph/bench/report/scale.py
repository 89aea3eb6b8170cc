"""The scale benchmark's page: cost against store size, its plot and its targets
(`eragraph bench scale`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import scale_aws
from .markdown import fmt, table, verdict
from .runs import command, run_line

PAGE = PREFIX = "scale"
TITLE = "Scale: cost against store size"
INTRO = ["`eragraph bench scale`: build, single-document insert and delete, and warm query latency at "
         "growing store sizes (log axes)."]
# issue 9 (scale), comparing the largest size with the smallest (stated for 1M vs 10k chunks)
TARGETS = {"scale_insert_factor": 1.5, "scale_build_per_chunk_factor": 1.3, "scale_rss_factor": 1.2,
           "scale_collapsed_p95_ms": 30.0}  # issue 16 (was 50 ms in issue 9)


def dataset(name: str, data: dict) -> str:
    """The local profile's runs and the AWS profile's (under moto) measure different stores; a
    local run of one size shows no ratio, so it does not replace a run that spans sizes."""
    if not data.get("local"):
        return "AWS profile under moto"
    return "local profile" if len(data["local"]) > 1 else "local profile, one size"


def section(name: str, data: dict, plots: Path) -> list[str]:
    return scale_section(name, data, plot_scale(name, data, plots))


def targets(name: str, data: dict) -> list[list[str]]:
    return scale_target_rows(name, data) + scale_aws.target_rows(name, data)


def size_label(n: float) -> str:
    """10000 -> 10k, 1000000 -> 1M: tick labels that fit side by side."""
    for div, suffix in ((1_000_000, "M"), (1_000, "k")):
        if n >= div:
            return f"{n / div:g}{suffix}"
    return f"{n:g}"


def sized_ticks(ax: Any, xs: list[float]) -> None:
    """Log axes with a few sizes: x ticks at the measured sizes only (short labels), y major
    ticks labelled plainly and no minor labels, which overlapped at the default settings."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter

    ax.set_xscale("log")
    ax.xaxis.set_major_locator(FixedLocator(sorted(set(xs))))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: size_label(v)))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))  # labels even within a decade
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))


def plot_scale(name: str, d: dict, plots: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    local, aws = d.get("local") or [], d.get("aws") or []
    if not local and len(aws) < 2:
        return []  # one moto size alone: nothing to plot against size (the tables hold its figures)
    xs = [r["chunks"] for r in local]
    fig, axes = plt.subplots(2, 3, figsize=(15, 8.4))
    panels = [
        (axes[0][0], "build seconds", [("build (service seconds)", [r["build"]["service_seconds"] for r in local]),
                                       ("process start → drain", [r["build"]["ingest_phase_seconds"] for r in local])]),
        (axes[0][1], "build process peak RSS, MB", [("peak RSS", [r["build"]["peak_rss_mb"] for r in local]),
                                                    ("peak RSS before drain", [r["build"]["peak_rss_before_drain_mb"] for r in local]),
                                                    ("vector index", [r["build"]["vector_index_mb"] for r in local])]),
        (axes[0][2], "single document, seconds (median)", [("insert", [r["insert"]["median"]["seconds"] for r in local]),
                                                            ("delete", [r["delete"]["median"]["seconds"] for r in local])]),
        (axes[1][0], "single insert, port items (median)", [("items read", [r["insert"]["median"]["items_read"] for r in local]),
                                                             ("items written", [r["insert"]["median"]["items_written"] for r in local])]),
        (axes[1][1], "warm query p95, ms", [(m, [r["query"][m]["latency_ms_p95"] for r in local])
                                             for m in (local[0]["query"] if local else {})]),
    ]
    for ax, label, series in panels:
        if not local:
            ax.axis("off")
            continue
        for legend, ys in series:
            pts = [(x, y) for x, y in zip(xs, ys) if y and y > 0]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=legend)
        ax.set_xscale("log")
        ax.set_yscale("log")
        sized_ticks(ax, xs)
        ax.set_xlabel("chunks in store")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
    ax = axes[1][2]
    if aws:
        ax_x = [r["chunks"] for r in aws]
        for key, legend in (("requests", "DynamoDB requests"), ("items_read", "items read"),
                            ("items_written", "items written")):
            ys = [r["insert"]["dynamodb_median"][key] for r in aws]
            ax.plot(ax_x, [max(y, 0.5) for y in ys], marker="s", label=legend)
        ax.set_xscale("log")
        ax.set_yscale("log")
        sized_ticks(ax, ax_x)
        ax.set_xlabel("chunks in store (AWS profile under moto)")
        ax.set_ylabel("per single insert (median)")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
    else:
        ax.axis("off")
    fig.suptitle(f"{name}: cost against store size ({d.get('embedder')} embedder, NER {d.get('ner')})")
    fig.tight_layout()
    out = plots / f"{name}-scale.png"
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return [out.name]


def scale_section(name: str, d: dict, images: list[str]) -> list[str]:
    out = [f"### {name}", "", f"Command: `{command(d)}`", "", run_line(d), "",
           f"{d.get('note', '')}. NER `{d.get('ner')}`; {d.get('repeats')} single-document inserts and deletes "
           f"per size (median), {d.get('queries_per_mode')} questions per mode, ingest batches of "
           f"{d.get('batch_docs')} documents.", ""]
    for key, text in (d.get("measures") or {}).items():
        out.append(f"- *{key}*: {text}.")
    if d.get("code_note"):
        out += ["", f"*Code*: {d['code_note']}"]
    if d.get("load_note"):
        out += ["", f"*Load*: {d['load_note']}."]
    local = d.get("local") or []
    if local:
        out += ["", *table(
            ["chunks", "layers", "build s", "build ms/chunk", "peak RSS MB", "before drain MB", "vector index MB",
             "index resident MB",
             "insert s", "insert items read", "insert items written", "insert summarize calls",
             "delete s", "delete items read", "delete items written"],
            [[r["chunks"], " / ".join(f"{v}" for v in r["layers"].values()), r["build"]["service_seconds"],
              r["build"]["seconds_per_chunk_ms"], r["build"]["peak_rss_mb"], r["build"]["peak_rss_before_drain_mb"],
              r["build"]["vector_index_mb"], fmt(r["build"].get("vector_index_resident_mb")),
              r["insert"]["median"]["seconds"], r["insert"]["median"]["items_read"],
              r["insert"]["median"]["items_written"], r["insert"]["median"]["summarize_calls"],
              r["delete"]["median"]["seconds"], r["delete"]["median"]["items_read"],
              r["delete"]["median"]["items_written"]] for r in local])]
        phased = [r for r in local if r["build"].get("peak_rss_phases_mb")]
        if phased:
            out += ["", "Peak resident memory of each build phase (MB; VmHWM started afresh at each phase; "
                    "index: the built store opened again and one question answered), and the build's peak "
                    "beyond the vector index's resident memory:", "",
                    *table(["chunks", "ingest", "drain", "index", "build peak", "index resident",
                            "beyond the index", "beyond, per 1k chunks"],
                           [[r["chunks"], *[fmt(r["build"]["peak_rss_phases_mb"].get(k)) for k in
                                            ("ingest", "drain", "index")],
                             r["build"]["peak_rss_mb"], fmt(r["build"].get("vector_index_resident_mb")),
                             fmt(r["build"].get("peak_rss_beyond_index_mb")),
                             fmt(None if r["build"].get("peak_rss_beyond_index_mb") is None else
                                 round(1000 * r["build"]["peak_rss_beyond_index_mb"] / r["chunks"], 2))]
                            for r in phased])]
        on_disk = [r for r in local if r["build"].get("store_mb")]
        if on_disk:
            entries = sorted({name for r in on_disk for name in r["build"]["store_mb"]})
            out += ["", "The built store on disk (MB, the blocks its files take, by top-level entry):", "",
                    *table(["chunks", *entries], [[r["chunks"], *[mb_cell(r["build"]["store_mb"].get(name))
                                                                  for name in entries]] for r in on_disk])]
        modes = list(local[0]["query"])
        out += ["", "Warm query latency (ms, question embedding excluded):", "",
                *table(["chunks", *[f"{m} p50 / p95" for m in modes]],
                       [[r["chunks"], *[f"{r['query'][m]['latency_ms_p50']:.1f} / {r['query'][m]['latency_ms_p95']:.1f}"
                                        for m in modes]] for r in local])]
        big = local[-1]
        reads = sorted(((port, method, row["items_out"]) for port, methods in big["insert"]["ports_median"].items()
                        for method, row in methods.items()), key=lambda t: -t[2])[:4]
        out += ["", f"Largest reads of one insert at {fmt(big['chunks'])} chunks (median items returned): "
                + ", ".join(f"`{p}.{m}` {fmt(v)}" for p, m, v in reads) + "."]
    aws = d.get("aws") or []
    if aws:
        out += ["", "AWS profile under moto, DynamoDB per single-document operation (median):", "",
                *table(["chunks", "insert requests", "insert items read", "insert items scanned", "insert items written",
                        "insert requests by operation", "delete requests", "delete items read", "delete items written"],
                       [[r["chunks"], r["insert"]["dynamodb_median"]["requests"], r["insert"]["dynamodb_median"]["items_read"],
                         r["insert"]["dynamodb_median"]["items_scanned"], r["insert"]["dynamodb_median"]["items_written"],
                         ", ".join(f"{k} {v:g}" for k, v in r["insert"]["dynamodb_median"]["by_operation"].items()),
                         r["delete"]["dynamodb_median"]["requests"], r["delete"]["dynamodb_median"]["items_read"],
                         r["delete"]["dynamodb_median"]["items_written"]] for r in aws])]
        spread = [r for r in aws if "partitions_written" in r["insert"]["dynamodb_median"]]
        if spread:
            out += ["", "Where one insert's writes land (median; a partition takes at most 1,000 write units a "
                    "second, so the hottest one bounds a bulk load):", "",
                    *table(["chunks", "partitions written", "hottest partition: writes",
                            "metadata partitions written", "hottest metadata partition: writes", "writes by kind"],
                           [[r["chunks"], *[r["insert"]["dynamodb_median"][k] for k in (
                               "partitions_written", "hottest_partition_writes", "meta_partitions_written",
                               "meta_hottest_partition_writes")],
                             ", ".join(f"{k} {v:g}" for k, v in r["insert"]["dynamodb_median"]["writes_by_kind"].items())]
                            for r in spread])]
        out += scale_aws.section(aws)
    if d.get("aws_skipped"):
        out += ["", f"AWS part skipped: {d['aws_skipped']}."]
    for img in images:
        out += ["", f"![{img}](plots/{img})"]
    return out + [""]


def mb_cell(mb: float | None) -> str:
    return "–" if mb is None else f"{mb:,.1f}"


def scale_target_rows(name: str, d: dict) -> list[list[str]]:
    """The issue's scale targets compare 1M chunks with 10k; a run that does not span both
    shows its own largest/smallest ratio and is marked not measured, and so are the timed ratios
    of a run whose sizes ran under different loads (``"timings_comparable": false``), or the
    build's alone when only the builds did (``"build_timings_comparable": false``)."""
    local = d.get("local") or []
    if len(local) < 2:
        return []
    small, big = local[0], local[-1]
    spans = small["chunks"] <= 10_000 and big["chunks"] >= 1_000_000
    timed = d.get("timings_comparable", True)
    build_timed = timed and d.get("build_timings_comparable", True)
    run = f"`{name}` ({fmt(small['chunks'])} → {fmt(big['chunks'])} chunks, {d.get('embedder')})"
    rows = []

    def ratio_row(label: str, a: float, b: float, limit: float, timing: bool = False, comparable: bool = timed) -> None:
        v = b / a if a else None
        ok = (v <= limit) if (spans and v is not None and (comparable or not timing)) else None
        gap = "" if ok or v is None else (
            f"its {'sizes' if not timed else 'builds'} ran under different loads: seconds not comparable"
            if spans and timing and not comparable else
            f"{v / limit:.1f}× the allowance" if spans else
            "sizes do not span 10k → 1M; ratio shown for this run's span")
        rows.append([label, run, f"{v:.2f}×" if v is not None else "–", verdict(ok), gap])

    ratio_row("scale: single insert wall time at 1M ≤ 1.5× at 10k",
              small["insert"]["median"]["seconds"], big["insert"]["median"]["seconds"], TARGETS["scale_insert_factor"],
              timing=True)
    ratio_row("scale: single insert items read at 1M ≤ 1.5× at 10k",
              small["insert"]["median"]["items_read"], big["insert"]["median"]["items_read"], TARGETS["scale_insert_factor"])
    same = small["insert"]["median"]["summarize_calls"] == big["insert"]["median"]["summarize_calls"]
    rows.append(["scale: same summarize calls per insert", run,
                 f"{small['insert']['median']['summarize_calls']:g} vs {big['insert']['median']['summarize_calls']:g}",
                 verdict(same if spans else None), ""])
    ratio_row("scale: build time per chunk at 1M within 1.3× of 10k",
              small["build"]["seconds_per_chunk_ms"], big["build"]["seconds_per_chunk_ms"],
              TARGETS["scale_build_per_chunk_factor"], timing=True, comparable=build_timed)
    resident = all(r["build"].get("vector_index_resident_mb") is not None for r in (small, big))
    index_key = "vector_index_resident_mb" if resident else "vector_index_mb"
    ratio_row("scale: build peak RSS beyond the vector index independent of size (≤ 1.2×)"
              + ("" if resident else " (beyond the raw vectors: the index's resident bytes not measured)"),
              small["build"]["peak_rss_mb"] - small["build"][index_key],
              big["build"]["peak_rss_mb"] - big["build"][index_key], TARGETS["scale_rss_factor"])
    p95 = big["query"].get("collapsed", {}).get("latency_ms_p95")
    ok = (p95 <= TARGETS["scale_collapsed_p95_ms"]) if (p95 is not None and big["chunks"] >= 1_000_000) else None
    rows.append([f"scale: warm collapsed p95 at 1M chunks ≤ {TARGETS['scale_collapsed_p95_ms']:g} ms", run,
                 f"{fmt(p95)} ms at {fmt(big['chunks'])} chunks", verdict(ok),
                 "" if ok or ok is None else f"{p95 - TARGETS['scale_collapsed_p95_ms']:.1f} ms over"])
    return rows
