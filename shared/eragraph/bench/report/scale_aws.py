"""The AWS part of the scale page (`eragraph bench scale --aws-sizes`): how each moto store was
made, the requests of one insert, one delete, one query per mode and a warm ``/stats``
(DynamoDB, OpenSearch, SQS), what grows with size, and the AWS targets."""

from __future__ import annotations

from typing import Any

from .markdown import fmt, table, verdict

# issue 47: a single-document insert on the AWS profile, and /stats; issue 60: the entity walk in
# a few round trips (tri_graph; auto and fusion no more than it), the insert's growth within 1.5x
TARGETS = {"aws_insert_requests": 40, "aws_insert_factor": 1.5, "stats_requests": 3,
           "tri_graph_round_trips": 12, "tri_graph_requests": 60}
WALKING_MODES = ("auto", "fusion")  # they walk tri_graph's graph: no more than it
GROWS = 1.2  # a count that grows by more than this from the smallest size to the largest is named


def num(v: Any) -> str:
    """A count or a median of counts: 392.5, 7, – (not measured)."""
    return "–" if v is None else f"{v:g}" if isinstance(v, (int, float)) else str(v)


def _get(row: dict, *path: str) -> Any:
    for key in path:
        if not isinstance(row, dict) or key not in row:
            return None
        row = row[key]
    return row


def _ops(counts: dict | None) -> str:
    return ", ".join(f"{k} {v:g}" for k, v in ((counts or {}).get("by_operation") or {}).items())


def build_rows(aws: list[dict]) -> list[str]:
    rows = []
    for r in aws:
        build = r.get("build") or {"how": "services", "seconds": r.get("build_seconds_under_moto")}
        local = build.get("local_build") or {}
        rows.append([r["chunks"], build.get("how"), fmt(local.get("service_seconds")),
                     fmt(build.get("seconds")),
                     fmt(1000 * build["seconds"] / r["chunks"] if build.get("seconds") and r["chunks"] else None)])
    return ["", "How each moto store was made (*load*: built by the local profile, then dumped and loaded "
            "through the engine's ports, services/portable, calling no model; *services*: ingest + drain "
            "through moto):", "",
            *table(["chunks", "made by", "local build s", "moto build / load s", "ms per chunk"], rows)]


def op_rows(aws: list[dict]) -> list[str]:
    if not any("opensearch_median" in r["insert"] or "sqs_median" in r["insert"] for r in aws):
        return []
    rows = []
    for r in aws:
        for op in ("insert", "delete"):
            d = r[op]
            rows.append([r["chunks"], op, num(_get(d, "dynamodb_median", "requests")),
                         num(_get(d, "dynamodb_median", "round_trips")),
                         num(_get(d, "opensearch_median", "requests")), _ops(d.get("opensearch_median")),
                         num(_get(d, "opensearch_median", "bulk_actions")),
                         num(_get(d, "sqs_median", "messages_sent")), num(_get(d, "sqs_median", "messages_received")),
                         num(_get(d, "sqs_median", "requests"))])
    return ["", "Requests of one single-document operation (median; OpenSearch through the repository's "
            "request-checking fake, SQS through moto):", "",
            *table(["chunks", "operation", "DynamoDB requests", "DynamoDB round trips", "OpenSearch requests",
                    "OpenSearch by operation",
                    "bulk actions", "SQS messages sent", "SQS messages received", "SQS requests"], rows)]


def query_rows(aws: list[dict]) -> list[str]:
    if not any(r.get("query") for r in aws):
        return []
    rows = [[r["chunks"], mode, num(_get(q, "dynamodb_median", "requests")),
             num(_get(q, "dynamodb_median", "round_trips")),
             num(_get(q, "dynamodb_median", "items_read")), _ops(q.get("dynamodb_median")),
             num(_get(q, "opensearch_median", "requests")), _ops(q.get("opensearch_median")),
             num(_get(q, "first_query", "dynamodb", "requests")), num(_get(q, "first_query", "dynamodb", "round_trips"))]
            for r in aws for mode, q in (r.get("query") or {}).items()]
    return ["", "Requests of one query (median over the questions; each question is a stored document's "
            "text, so the graph modes find its entities). *Round trips*: the DynamoDB requests made one "
            "after the other (requests side by side on w threads count one per w: adapters/aws/round_trips); "
            "*first question*: the warm-up question of the mode, apart (the first entity mode's reads the "
            "entity graph into memory when the store keeps it there, adapters/aws/entity_warm):", "",
            *table(["chunks", "mode", "DynamoDB requests", "round trips", "items read", "DynamoDB by operation",
                    "OpenSearch requests", "OpenSearch by operation", "first question: requests",
                    "first question: round trips"], rows)]


def cold_rows(aws: list[dict]) -> list[str]:
    sized = [r for r in aws if _get(r, "cold_start", "with_snapshot") is not None]
    if not sized:
        return []
    rows = [[r["chunks"], label, num(_get(r, "cold_start", key, "dynamodb", "requests")),
             num(_get(r, "cold_start", key, "dynamodb", "round_trips")),
             num(_get(r, "cold_start", key, "dynamodb", "items_read")), num(_get(r, "cold_start", key, "s3_get_object")),
             num(_get(r, "cold_start", "snapshot", "bytes")) if key == "with_snapshot" else ""]
            for r in sized for key, label in (("without_snapshot", "every record"), ("with_snapshot", "the snapshot"))]
    return ["", "A cold query function's first `tri_graph` question: its entity graph read from every chunk's "
            "record, or from the snapshot the scheduled reindex writes (adapters/aws/entity_snapshot_s3; "
            "nothing changed after it was written):", "",
            *table(["chunks", "entity graph from", "DynamoDB requests", "round trips", "items read",
                    "S3 GetObject", "snapshot bytes (gzip)"], rows)]


def stats_rows(aws: list[dict]) -> list[str]:
    if not any(r.get("stats") for r in aws):
        return []
    rows = [[r["chunks"], num(_get(r, "stats", "dynamodb", "requests")), num(_get(r, "stats", "dynamodb", "round_trips")),
             _ops(_get(r, "stats", "dynamodb")),
             num(_get(r, "stats", "opensearch", "requests"))] for r in aws if r.get("stats")]
    return ["", "`/stats` (services.stats), its second call (warm):", "",
            *table(["chunks", "DynamoDB requests", "round trips", "DynamoDB by operation", "OpenSearch requests"], rows)]


def counts_of(r: dict) -> dict[str, float]:
    """The request counts of one size, named for the sentence on what grows."""
    out = {}
    for op in ("insert", "delete"):
        for service, key in (("DynamoDB", "dynamodb_median"), ("OpenSearch", "opensearch_median"),
                             ("SQS", "sqs_median")):
            v = _get(r, op, key, "requests")
            if v is not None:
                out[f"{op}: {service} requests"] = v
    for mode, q in (r.get("query") or {}).items():
        for service, key in (("DynamoDB", "dynamodb_median"), ("OpenSearch", "opensearch_median")):
            v = _get(q, key, "requests")
            if v is not None:
                out[f"{mode} query: {service} requests"] = v
    if _get(r, "stats", "dynamodb", "requests") is not None:
        out["/stats: DynamoDB requests"] = r["stats"]["dynamodb"]["requests"]
    return out


def growth_line(aws: list[dict]) -> list[str]:
    if len(aws) < 2:
        return []
    small, big = counts_of(aws[0]), counts_of(aws[-1])
    span = f"from {fmt(aws[0]['chunks'])} to {fmt(aws[-1]['chunks'])} chunks"
    both = [name for name in small if name in big]
    growing = [name for name in both if big[name] > GROWS * max(small[name], 1)]
    grows = [f"{name} {small[name]:g} → {big[name]:g}" for name in growing]
    flat = [name for name in both if name not in growing]
    if not grows:
        return ["", f"What grows with size, {span}: nothing counted here grows by more than {GROWS:g}×."]
    return ["", f"What grows with size, {span} (more than {GROWS:g}×): " + "; ".join(grows) + "."
            + (f" Within {GROWS:g}×: {len(flat)} of the {len(small)} counts." if flat else "")]


def section(aws: list[dict]) -> list[str]:
    return build_rows(aws) + op_rows(aws) + query_rows(aws) + cold_rows(aws) + stats_rows(aws) + growth_line(aws)


def target_rows(name: str, d: dict) -> list[list[str]]:
    aws = [r for r in d.get("aws") or [] if _get(r, "insert", "dynamodb_median", "requests") is not None]
    if not aws:
        return []
    run = f"`{name}` (AWS profile under moto, {', '.join(fmt(r['chunks']) for r in aws)} chunks)"
    limit = TARGETS["aws_insert_requests"]
    rows = []
    for r in aws:
        v = r["insert"]["dynamodb_median"]["requests"]
        rows.append([f"AWS single-document insert ≤ {limit} DynamoDB requests ({fmt(r['chunks'])} chunks)", run,
                     f"{v:g}", verdict(v <= limit), "" if v <= limit else f"{v / limit:.1f}× the allowance"])
    if len(aws) >= 2:
        a, b = aws[0]["insert"]["dynamodb_median"]["requests"], aws[-1]["insert"]["dynamodb_median"]["requests"]
        ratio = b / a if a else None
        ok = None if ratio is None else ratio <= TARGETS["aws_insert_factor"]
        rows.append([f"AWS insert requests at the largest size within {TARGETS['aws_insert_factor']:g}× of the "
                     f"smallest ({fmt(aws[0]['chunks'])} → {fmt(aws[-1]['chunks'])} chunks)", run,
                     "–" if ratio is None else f"{ratio:.2f}×", verdict(ok),
                     "" if ok or ratio is None else f"{ratio / TARGETS['aws_insert_factor']:.2f}× the allowance"])
    rows += walk_rows(run, aws)
    for r in aws:
        v = _get(r, "stats", "dynamodb", "requests")
        if v is not None:
            ok = v <= TARGETS["stats_requests"]
            rows.append([f"/stats ≤ {TARGETS['stats_requests']} DynamoDB requests ({fmt(r['chunks'])} chunks, "
                         "warm)", run, f"{v:g}", verdict(ok), "" if ok else f"{v - TARGETS['stats_requests']:g} over"])
    return rows


def walk_rows(run: str, aws: list[dict]) -> list[list[str]]:
    """Issue 60's query targets at the largest size that ran tri_graph: its round trips and
    requests, and auto's and fusion's against tri_graph's."""
    sized = [r for r in aws if _get(r, "query", "tri_graph", "dynamodb_median", "requests") is not None]
    if not sized:
        return []
    r = sized[-1]
    tri = r["query"]["tri_graph"]["dynamodb_median"]
    rows = []
    for key, what in (("round_trips", "round trips"), ("requests", "requests")):
        limit, v = TARGETS[f"tri_graph_{key}"], tri.get(key)
        if v is None:
            continue
        rows.append([f"AWS tri_graph ≤ {limit} DynamoDB {what} a question ({fmt(r['chunks'])} chunks, warm)", run,
                     f"{v:g}", verdict(v <= limit), "" if v <= limit else f"{v / limit:.1f}× the allowance"])
        cold = _get(r, "cold_start", "with_snapshot", "dynamodb", key)
        if cold is not None:
            rows.append([f"AWS tri_graph ≤ {limit} DynamoDB {what} on a cold function's first question, from the "
                         f"snapshot ({fmt(r['chunks'])} chunks)", run, f"{cold:g}", verdict(cold <= limit),
                         "" if cold <= limit else f"{cold / limit:.1f}× the allowance"])
    dense = _get(r, "query", "dense", "dynamodb_median") or {}
    for mode in WALKING_MODES:
        q = _get(r, "query", mode, "dynamodb_median")
        if q is None or q.get("round_trips") is None or tri.get("round_trips") is None:
            continue
        # fusion runs the dense side and tri_graph's walk: its walk costs no more than tri_graph's
        # when it costs no more than the two together
        cap_req = tri["requests"] + dense.get("requests", 0)
        cap_rt = tri["round_trips"] + dense.get("round_trips", 0)
        ok = q["requests"] <= cap_req and q["round_trips"] <= cap_rt
        rows.append([f"AWS {mode}: its entity walk no dearer than tri_graph's (requests / round trips ≤ tri_graph's "
                     f"+ dense's, {fmt(r['chunks'])} chunks)", run,
                     f"{q['requests']:g} / {q['round_trips']:g} (≤ {cap_req:g} / {cap_rt:g})", verdict(ok),
                     "" if ok else "dearer than tri_graph + dense"])
    return rows
