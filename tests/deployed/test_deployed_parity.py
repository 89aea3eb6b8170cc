"""Local/AWS parity: the same 200 MuSiQue passages through the local profile in the development
venv (SQLite + FAISS + FTS5, ingest then drain) and through the AWS handlers in the deployed
environment (S3 -> ingest -> summarize FIFO -> DynamoDB + OpenSearch), with the same settings on
both sides (the function's environment as the template sets it, hash embeddings, spaCy NER and
parser, ERAGRAPH_GRAPH_EXACT=false so that the local store runs the push PPR the DynamoDB store
runs). Identical node ids per layer, an identical store digest (tests/chaos.py's, less the
documents' S3 versions), identical top-5 ids in every mode for the first 20 of the dataset's questions.

The two stores are built once per test session (parity_snapshot.py: the first worker to need
them builds them, the others load what it saved), and each test is a unit of work of its own
(``SPREAD_OVER_WORKERS``, read by tests/conftest.py): the modes run on every worker at once."""

from __future__ import annotations

import copy
import json
import os
import shutil

import pytest
from engine_view import dev_aws_engine, digest, environment, node_ids_by_layer
from lambda_support import event

from chaos import first_difference
from deployed import SMALL_GRAPH, drain_summarize, function_for, upload_and_ingest
from parity_snapshot import shared_folder, shared_stores
from shared_data import SHARED_DATA, need
from eragraph.services.modes import mode_names

# longer than the suite's per-test limit (pyproject.toml): the first test of the session builds
# both 200-passage stores (3.5 min on an idle 2-core machine), and a test of another worker may
# wait for that build before its own queries
pytestmark = pytest.mark.timeout(1800)
SPREAD_OVER_WORKERS = True

MUSIQUE = SHARED_DATA / "musique"
PASSAGES, K = 200, 5
# 20 questions in every mode: bugs planted in one side's adapters and ranking
# (tests/deployed/planted_parity_bugs.py, bench-results/planted-bugs-parity*.json) were first seen
# at questions 0-14 (0-based) of 30, the latest a vector search a hit short, seen by fusion alone;
# 20 sees each of them, at two thirds of 30's cost (docs/testing/index.md, "CI time").
# ERAGRAPH_PARITY_QUESTIONS sets it (lower for a quick local run)
QUESTIONS = int(os.environ.get("ERAGRAPH_PARITY_QUESTIONS") or 20)
# the template's graph settings (chunks, segments) with a 4-bit LSH code: the DynamoDB store
# spreads a layer over min(2^8, 2^bits) partitions and a reconcile reads them all several times,
# which over moto costs seconds per message at 20 bits; the code width is the same on both sides
PARITY = {k: v for k, v in SMALL_GRAPH.items() if k not in ("ERAGRAPH_S_MIN", "ERAGRAPH_S_MAX", "ERAGRAPH_CHUNK_TOKENS",
                                                          "ERAGRAPH_CHUNK_OVERLAP", "ERAGRAPH_SUMMARY_TOKENS")}
RESOURCE_SETTINGS = ("ERAGRAPH_TABLE", "ERAGRAPH_BUCKET", "ERAGRAPH_SUMMARIZE_QUEUE_URL", "ERAGRAPH_OPENSEARCH_",
                     "ERAGRAPH_AWS_ENDPOINT_URL",
                     # the ingest function's extraction time budget (a batch's extractions fit its
                     # timeout): it bounds one function's reading, and writes nothing different
                     "ERAGRAPH_EXTRACT_SECONDS",
                     # the query function's caller identity (which tenant asks): no store setting
                     "ERAGRAPH_TENANT_",
                     # the query API's cost bound on answers (AnswerMaxBudget): no store setting
                     "ERAGRAPH_ANSWER_MAX_BUDGET",
                     # the models a request may name, and the rerank stage a request must ask for
                     # (Reranker, default none): neither changes what is stored or retrieved unasked
                     "ERAGRAPH_ANSWER_MODELS", "ERAGRAPH_RERANK",
                     # the JWT issuer whose user pool the claim guard reads (which tenant asks)
                     "ERAGRAPH_JWT_ISSUER",
                     # who is asking inside the tenant (off/identity, and the IAM tag naming the
                     # caller's principals): no store setting
                     "ERAGRAPH_PRINCIPALS",
                     # the query function's entity graph kept warm in memory (adapters/aws/
                     # entity_warm): the same answers as the table's reads, in fewer round trips
                     "ERAGRAPH_ENTITY_GRAPH_WARM",
                     # where that entity graph's snapshot is kept (adapters/aws/entity_snapshot_s3):
                     # the table's records at a generation, read by a cold function instead of them
                     "ERAGRAPH_SNAPSHOT_BUCKET",
                     # the buckets a Bedrock KB data source may sync from, and the keys the bucket's
                     # notification ingests (where an API upload is put): no store setting
                     "ERAGRAPH_SOURCE_BUCKETS", "ERAGRAPH_DOCUMENT_")


@pytest.fixture(scope="module", autouse=True)
def _musique():  # module scope: before the module-scoped fixtures that read it
    need(MUSIQUE / "corpus.jsonl")  # skips without the corpus, fails under CI


def corpus():
    from eragraph.bench.common import load_corpus, load_questions

    docs = load_corpus(MUSIQUE / "corpus.jsonl", limit=PASSAGES)
    questions = [q["question"] for q in load_questions(MUSIQUE / "questions.jsonl", limit=QUESTIONS)]
    return docs, questions


def s3_key(doc) -> str:
    return f"docs/{doc.doc_id}.txt"


@pytest.fixture(scope="module")
def functions(launch):
    """The three functions as the parity run launches them (not started: their environment)."""
    return {name: launch(name, PARITY, start=False) for name in ("ingest", "summarize", "query")}


@pytest.fixture(scope="module")
def settings(sam_build, cloud) -> dict[str, str]:
    """Every ERAGRAPH_* setting the deployed functions run with (the template's, then PARITY),
    less the ones naming AWS resources: what the local side runs with."""
    env = cloud.environment(function_for(sam_build, "ingest"), PARITY)
    return {k: v for k, v in env.items() if k.startswith("ERAGRAPH_") and not k.startswith(RESOURCE_SETTINGS)}


@pytest.fixture(scope="module")
def data():
    return corpus()


def build_local(cloud, docs, settings, store):
    """The local profile on the same documents: the source, title and text the ingest handler
    gives an S3 object (so that document and chunk ids are the same), ingest then drain; closed."""
    from eragraph.bootstrap import build_engine
    from eragraph.bootstrap.local import close
    from eragraph.services import ingest, resummarize

    with environment(settings):
        engine = build_engine("local", store=store)
        ingest.ingest(engine, [ingest.SourceDoc(source=f"s3://{cloud.bucket}/{s3_key(d)}", text=d.text,
                                                title=s3_key(d).rsplit("/", 1)[-1]) for d in docs])
        resummarize.drain(engine)
        close(engine)
    return store


@pytest.fixture(scope="module")
def stores(cloud, launch, data, settings, tmp_path_factory):
    return session_stores(cloud, launch, data, settings, tmp_path_factory)


def session_stores(cloud, launch, data, settings, tmp_path_factory):
    """Both stores of the session: the AWS side in this module's ``cloud`` (built through the
    deployed functions, or loaded), and the saved local store's folder."""
    docs, _ = data

    def build():
        ingest_fn, summarize_fn = launch("ingest", PARITY), launch("summarize", PARITY)
        upload_and_ingest(cloud, ingest_fn, {s3_key(d): d.text for d in docs})
        drain_summarize(cloud, summarize_fn, limit=2000)
        ingest_fn.close()
        summarize_fn.close()
        return build_local(cloud, docs, settings, tmp_path_factory.mktemp("parity-build") / "store")

    local_saved, _ = shared_stores(shared_folder(tmp_path_factory, "deployed-parity"), cloud, build)
    return local_saved


@pytest.fixture(scope="module")
def aws(cloud, stores, settings):
    return dev_aws_engine(cloud, settings)


@pytest.fixture(scope="module")
def local(stores, settings, tmp_path_factory):
    """The local store, a copy of the saved one (a query may write: the ledger)."""
    from eragraph.bootstrap import build_engine

    store = tmp_path_factory.mktemp("parity-local") / "store"
    shutil.copytree(stores, store)
    with environment(settings):
        return build_engine("local", store=store)


@pytest.fixture(scope="module")
def query_fn(launch, stores):
    return launch("query", PARITY)


def test_both_sides_run_the_same_settings(functions, settings):
    for proc in functions.values():
        assert {k: v for k, v in proc.env.items() if k in settings} == settings
        assert not {k for k in proc.env if k.startswith("ERAGRAPH_") and k not in settings
                    and not k.startswith(RESOURCE_SETTINGS)}


def test_node_ids_per_layer(aws, local):
    a, b = node_ids_by_layer(local), node_ids_by_layer(aws)
    assert len(a[0]) >= PASSAGES and len(a) >= 3
    assert a == b, {layer: (len(a.get(layer, [])), len(b.get(layer, []))) for layer in set(a) | set(b)}


def test_store_digest(aws, local):
    a, b = digest(local), digest(aws)
    assert a["postings"] and a["cooccurrence"]
    assert a == b, first_difference(a, b)


def local_top(engine, settings, question: str, mode: str) -> list[str]:
    from eragraph.services import query

    with environment(settings):
        return [r.id for r in query.query(engine, question, mode=mode, k=K).results]


def aws_top(query_fn, question: str, mode: str) -> list[str]:
    ev = copy.deepcopy(event("api_query_valid.json"))
    ev["body"] = json.dumps({"query": question, "mode": mode, "k": K})
    out = query_fn.result(ev)
    assert out["statusCode"] == 200, out
    return [r["id"] for r in json.loads(out["body"])["results"]]


@pytest.mark.parametrize("mode", mode_names())
def test_top5_every_mode(local, query_fn, data, settings, mode):
    _, questions = data
    differ = []
    for q in questions:
        want, got = local_top(local, settings, q, mode), aws_top(query_fn, q, mode)
        if want != got:
            differ.append((q, want, got))
    assert not differ, f"{len(differ)}/{len(questions)} questions differ in {mode}; first: {differ[:3]}"
