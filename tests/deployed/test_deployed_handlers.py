"""The real handlers in the functions' deployed environment (what ``sam build`` made, under Python
3.12, with nothing else on sys.path but the Lambda runtime's packages), on real event JSON:

documents uploaded to S3 (moto) -> their S3 notifications, wrapped in SQS records, through the
ingest function -> the summarize FIFO queue drained through the summarize function -> entity
graph records in DynamoDB and OpenSearch -> every retrieval mode through the query function
(API Gateway HTTP API v2 events) -> the reindex function on the schedule event."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from engine_view import dev_aws_engine, entity_store, entity_vectors, has_entity_graph, node_ids_by_layer
from lambda_support import event

import deployed as dp
from deployed import SMALL_GRAPH, drain_summarize, top_level_names, upload_and_ingest
from eragraph.domain.text import titled_text
from eragraph.services.modes import mode_names

# longer than the suite's per-test limit (pyproject.toml): the first test starts the functions and ingests through moto's server
pytestmark = pytest.mark.timeout(900)

SAMPLES = Path(__file__).resolve().parents[2] / "shared" / "eragraph" / "samples"
QUESTION = "Which moon of Jupiter hides an ocean under its ice, and who discovered it?"


def sample_documents() -> dict[str, str]:
    rows = [json.loads(line) for line in (SAMPLES / "corpus.jsonl").read_text().splitlines() if line.strip()]
    return {f"docs/{row['id']}.txt": titled_text(row.get("title", ""), row["text"]) for row in rows}


def api_query(query_fn, text: str, mode: str, k: int = 5) -> tuple[int, dict]:
    ev = copy.deepcopy(event("api_query_valid.json"))
    ev["body"] = json.dumps({"query": text, "mode": mode, "k": k})
    out = query_fn.result(ev)
    return out["statusCode"], json.loads(out["body"])


@pytest.fixture(scope="module")
def functions(launch):
    return {name: launch(name) for name in ("ingest", "summarize", "query", "reindex")}


@pytest.fixture(scope="module")
def ingested(cloud, functions):
    """The sample corpus uploaded, ingested and summarized by the deployed functions."""
    docs = sample_documents()
    delivered = upload_and_ingest(cloud, functions["ingest"], docs)
    layers = drain_summarize(cloud, functions["summarize"])
    return {"documents": docs, "delivered": delivered, "layers": layers}


def test_functions_start_with_only_their_layers(functions, sam_build):
    for name, proc in functions.items():
        ready = proc.ready
        assert ready["ready"], f"{name} failed its cold start: {ready.get('error')}"
        assert ready["foreign_modules"] == [], f"{name} imported modules from outside its sys.path"
        assert ready["sys_path"][:len(proc.fn.layer_paths) + 1] == [str(p.resolve()) for p in
                                                                   [proc.fn.code_dir, *proc.fn.layer_paths]]
        assert ready["python"].startswith("3.12")


def test_layers_do_not_shadow_each_other(sam_build):
    """Lambda extracts every layer into the one /opt: a name in two layers is overwritten by the
    later one there, while separate folders on sys.path would pick the first. None may repeat."""
    for fn in sam_build.values():
        seen: dict[str, str] = {}
        for layer, paths in fn.layers:
            for path in paths:
                for name in top_level_names(path):
                    assert name not in seen or seen[name] == layer, (
                        f"{fn.logical_id}: '{name}' is in layers {seen[name]} and {layer}")
                    seen[name] = layer


KINDS = "docs/kinds/"  # the file-kinds test's documents


def test_ingest_from_s3_notifications(cloud, ingested):
    engine = dev_aws_engine(cloud, SMALL_GRAPH)
    # the sample corpus, whether or not the file-kinds test (below) has added its own under KINDS
    sources = {d.source for d in engine.graph.list_documents()
               if not d.source.startswith(f"s3://{cloud.bucket}/{KINDS}")}
    assert sources == {f"s3://{cloud.bucket}/{key}" for key in ingested["documents"]}
    assert ingested["delivered"] >= len(ingested["documents"])
    assert 0 in ingested["layers"] and max(ingested["layers"]) >= 1
    layers = node_ids_by_layer(engine)
    assert len(layers) >= 3 and all(layers[layer] for layer in layers)
    assert cloud.search.errors == [] and cloud.search.unsigned == []


def test_entity_graph_records_exist(cloud, ingested):
    engine = dev_aws_engine(cloud, SMALL_GRAPH)
    assert has_entity_graph(engine)
    mats = entity_store(engine).export()
    assert len(mats.entities) >= 20 and mats.contain.nnz >= 20 and mats.cooccurrence.nnz > 0
    # spaCy's NER, not the capitalized-phrase stand-in: entity types it keeps, names it normalizes
    assert {"jupiter", "europa"} <= set(mats.entities)
    assert len(entity_vectors(engine).ids()) >= len(mats.entities)
    items = cloud.ddb.scan(TableName=cloud.table, Select="COUNT", FilterExpression="begins_with(PK, :p)",
                           ExpressionAttributeValues={":p": {"S": "ENT#"}})
    assert items["Count"] > 0


@pytest.mark.parametrize("mode", mode_names())
def test_every_mode_through_the_api(functions, ingested, mode):
    status, body = api_query(functions["query"], QUESTION, mode)
    assert status == 200, body
    assert body["mode"] == mode and body["results"], body
    assert all(r["id"] and r["text"] for r in body["results"])


def test_auto_scores_the_question_with_spacy(functions, ingested):
    status, body = api_query(functions["query"], QUESTION, "auto")
    assert status == 200, body
    assert body.get("router_score") is not None, body
    assert "could not be parsed" not in body["note"], body["note"]
    assert body["route"] in ("dense", "hybrid", "fusion", "tri_graph")


def test_api_events(functions, ingested):
    q = functions["query"]
    assert q.result(event("api_health.json"))["statusCode"] == 200
    stats = q.result(event("api_stats.json"))
    assert stats["statusCode"] == 200 and json.loads(stats["body"])
    assert q.result(event("api_query_bad_mode.json"))["statusCode"] == 400
    assert q.result(event("api_query_invalid.json"))["statusCode"] == 422


def test_mcp_through_the_query_function(functions, ingested):
    """The MCP SDK's client, its requests as API Gateway events to the built query function:
    initialize, tools/list, tools/call retrieve and a tool error (the layer carries mcp)."""
    import anyio

    pytest.importorskip("mcp")
    from mcp_support import LambdaTransport, lambda_client

    transport = LambdaTransport(functions["query"].result)

    async def converse():
        async with lambda_client(transport, mode="legacy") as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"retrieve", "get_document", "stats"} <= names
            result = await client.call_tool("retrieve", {"query": QUESTION, "k": 3, "mode": "hybrid"})
            assert not result.is_error and len(result.structured_content["results"]) == 3
            assert any("Europa" in r["text"] for r in result.structured_content["results"])
            result = await client.call_tool("retrieve", {"query": QUESTION, "k": 0})
            assert result.is_error and "k must be at least 1" in result.content[0].text

    anyio.run(converse)
    assert set(transport.statuses) <= {200, 202}


def test_reindex_on_the_schedule_event(cloud, functions, ingested):
    """The schedule fans out one audit message per tenant; the reindex queue's records audit them."""
    report = functions["reindex"].result(event("schedule.json"))
    assert report["tenants_queued"] >= 1 and report["metrics"]["TenantAuditsQueued"] == report["tenants_queued"], report
    audited = 0
    for _ in range(50):
        n, failed = cloud.deliver(functions["reindex"], cloud.reindex_url, cloud.reindex_arn, batch=1)
        assert failed == [], failed
        if n == 0:
            break
        audited += n
    assert audited >= report["tenants_queued"] and cloud.queue_depth(cloud.reindex_url) == 0
    assert cloud.search.errors == [] and cloud.search.unsigned == []


def nlp_layers(fn) -> list[str]:
    return [layer for layer, paths in fn.layers if any((p / "spacy").is_dir() for p in paths)]


def test_ingest_without_its_nlp_layer_fails_at_cold_start(launch, sam_build):
    """With ERAGRAPH_NER=spacy and no spaCy, the function must not start (one line naming the
    package and the setting), not send every document to the dead-letter queue."""
    proc = launch("ingest", start=False)
    drop = nlp_layers(proc.fn)
    # in its place the layer the summarize function gets: every other package, but no spaCy (what
    # the functions had before the NLP layer existed)
    summarize = dp.function_for(sam_build, "summarize")
    base = [p for lid, paths in summarize.layers if lid not in drop and not any((q / "eragraph").is_dir() for q in paths)
            for p in paths]
    assert base and not any((p / "spacy").is_dir() for p in base)
    proc = launch("ingest", start=False, drop_layers=drop, add_layers=base)
    ready = proc.start()
    assert not ready["ready"], "the ingest function started without spaCy"
    message = ready["error"]["message"]
    assert "ERAGRAPH_NER=spacy" in message and "'spacy'" in message, message
    assert "\n" not in message.strip()


def test_ingest_reads_files_by_content_with_its_docs_layer(cloud, functions, ingested):
    """A PDF with no extension and a DOCX, read in the function's environment (DocsLayer's
    pypdf, python-docx, lxml); a ZIP that is not a DOCX is a logged rejection, not a failure.
    It adds documents to the shared store, under KINDS (which the other tests leave aside,
    whichever order they run in)."""
    from file_builders import docx_bytes, pdf_bytes, zip_bytes

    files = {f"{KINDS}harbour-scan": pdf_bytes(["The harbour master of Gdynia logged the tall ship Dar Pomorza."],
                                             title="Harbour report"),
             f"{KINDS}minutes.docx": docx_bytes(["The council of Torun met on Monday."], table=[["Item", "Vote"],
                                                                                            ["Bridge", "Yes"]]),
             f"{KINDS}bundle.docx": zip_bytes({"readme.txt": b"hello"})}
    upload_and_ingest(cloud, functions["ingest"], files)  # fails on any batch-item failure
    engine = dev_aws_engine(cloud, SMALL_GRAPH)
    docs = {d.source.rsplit("/", 1)[-1]: d for d in engine.graph.list_documents()}
    assert docs["harbour-scan"].title == "Harbour report" and docs["minutes.docx"].title == "minutes.docx"
    assert "bundle.docx" not in docs
    texts = {name: " ".join(n.text for n in engine.graph.get_nodes(docs[name].chunk_ids).values())
             for name in ("harbour-scan", "minutes.docx")}
    assert "Dar Pomorza" in texts["harbour-scan"] and "Bridge | Yes" in texts["minutes.docx"]
