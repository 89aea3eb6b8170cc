"""The OpenSearch fake refuses what a cluster refuses, with the cluster's status and error type:
requests are checked against OpenSearch's published API specification (tests/opensearch_spec)
and the k-NN plugin's limits, while every request the adapters make passes (the adapter round
trips below, and every test that runs on the fake)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from contract.aws_factories import fake_opensearch_module
from eragraph.adapters.aws.lexical_opensearch import OpenSearchLexicalIndex
from eragraph.adapters.aws.vector_opensearch import MAX_K, OpenSearchVectorIndex, index_body
from opensearch_spec import check

fake_module = fake_opensearch_module()
FakeOpenSearch, Refused = fake_module.FakeOpenSearch, fake_module.Refused
DIM = 4


@pytest.fixture
def cluster():
    fake = FakeOpenSearch()
    index = OpenSearchVectorIndex(fake, "nodes", DIM, refresh=True, tenant="t1")
    index.upsert(["a", "b"], np.eye(DIM, dtype=np.float32)[:2],
                 [{"layer": 0, "doc_id": "d", "text": "alpha beta", "attrs": {"lang": "en"}},
                  {"layer": 0, "doc_id": "d", "text": "beta gamma"}])
    return fake, index


def knn(spec: dict) -> dict:
    return {"size": 1, "query": {"knn": {"vector": spec}}}


def refused(call, error_type: str, reason: str = "") -> Refused:
    """``call`` is refused as the cluster refuses it: 400, ``error_type``, the cluster's JSON."""
    from opensearchpy.exceptions import RequestError

    with pytest.raises(Refused) as caught:
        call()
    exc = caught.value
    assert isinstance(exc, RequestError)  # what opensearch-py raises for a 400
    assert (exc.status_code, exc.error) == (400, error_type)
    assert exc.info["status"] == 400 and exc.info["error"]["type"] == error_type
    assert exc.info["error"]["root_cause"][0]["type"] == error_type
    assert reason in exc.info["error"]["reason"]
    return exc


def test_the_adapters_requests_all_pass(cluster):
    fake, index = cluster
    v = np.eye(DIM, dtype=np.float32)[0]
    assert [h.node_id for h in index.search(v, 1)] == ["a"]
    assert [h.node_id for h in index.search(v, 2, layers=[0], doc_ids=["d"])] == ["a", "b"]
    assert [[h.node_id for h in row] for row in index.search_many(np.eye(DIM, dtype=np.float32)[:2], 1)] == [["a"], ["b"]]
    assert [h.node_id for h in OpenSearchLexicalIndex(index).search("gamma", 1)] == ["b"]
    assert set(index.get_vectors(["a", "b", "zz"])) == {"a", "b"} and index.ids() == {"a", "b"}
    assert index.count() == 2
    index.delete(["a", "nope"])
    assert index.count() == 1 and index.drop_namespace() == 1
    checked = {path.rsplit("/", 1)[-1] for _, path, _ in fake.requests}
    assert {"_bulk", "_search", "_msearch", "_mget", "_count", "_mapping", "_delete_by_query"} <= checked


def test_a_malformed_knn_query_is_refused(cluster):
    fake, _ = cluster
    refused(lambda: fake.search(index="nodes", body=knn({"vector": "0.1,0.2", "k": 1})),
            "x_content_parse_exception", "[knn] failed to parse field [vector]")
    refused(lambda: fake.search(index="nodes", body=knn({"vector": [1, 0, 0, 0], "k": "one"})),
            "x_content_parse_exception", "[knn] failed to parse field [k]")
    refused(lambda: fake.search(index="nodes", body=knn({"k": 1})), "illegal_argument_exception",
            "[knn] requires query vector")
    refused(lambda: fake.search(index="nodes", body={"query": {"knn": {"vector": {"vector": [1, 0, 0, 0], "k": 1},
                                                                         "other": {"vector": [1], "k": 1}}}}),
            "parsing_exception")


def test_an_unknown_field_is_refused_where_the_cluster_refuses_it(cluster):
    fake, _ = cluster
    vector = [1.0, 0.0, 0.0, 0.0]
    refused(lambda: fake.search(index="nodes", body=knn({"vector": vector, "k": 1, "num_candidates": 10})),
            "x_content_parse_exception", "[knn] unknown field [num_candidates]")
    refused(lambda: fake.search(index="nodes", body={"size": 1, "knn": {"field": "vector"}}),
            "parsing_exception", "Unknown key for a START_OBJECT in [knn]")
    refused(lambda: fake.search(index="nodes", body={"query": {"bool": {"filters": []}}}),
            "parsing_exception", "[bool] query does not support [filters]")
    refused(lambda: fake.search(index="nodes", body={"query": {"bool": {"filter": [{"term": {"layer": 0}},
                                                                                    {"trem": {}}, {"terms_set": {}}]}}}),
            "parsing_exception", "unknown query [trem]")
    refused(lambda: fake.count(index="nodes", body={"query": {"match_all": {}}, "size": 1}), "parsing_exception")
    refused(lambda: fake.msearch(index="nodes", body="{}\n" + json.dumps({"size": 1, "from_": 2}) + "\n"),
            "parsing_exception", "[from_]")
    refused(lambda: fake.bulk(index="nodes", body=json.dumps({"index": {"_id": "x", "id": "x"}}) + "\n{}\n"),
            "illegal_argument_exception", "Action/metadata line [1] contains an unknown parameter [id]")
    refused(lambda: fake.bulk(index="nodes", body=json.dumps({"upsert": {"_id": "x"}}) + "\n{}\n"),
            "illegal_argument_exception", "found [upsert]")


def test_k_above_ten_thousand_is_refused(cluster):
    fake, _ = cluster
    vector = [1.0, 0.0, 0.0, 0.0]
    assert MAX_K == 10_000  # the adapter's cap is the plugin's
    assert fake.search(index="nodes", body=knn({"vector": vector, "k": 10_000}))["hits"]["hits"]
    for k in (10_001, 0, -1):
        refused(lambda: fake.search(index="nodes", body=knn({"vector": vector, "k": k})),
                "illegal_argument_exception", "[knn] requires k to be in the range (0, 10000]")


def test_routes_and_parameters_are_the_operations_own(cluster):
    fake, _ = cluster
    refused(lambda: fake.delete_by_query(index="nodes", body={"query": {"match_all": {}}}, conflicts="ignore"),
            "illegal_argument_exception", "invalid value for [conflicts]")
    refused(lambda: fake.bulk(index="nodes", body=json.dumps({"delete": {"_id": "x"}}) + "\n", refresh="always"),
            "illegal_argument_exception", "invalid value for [refresh]")
    with pytest.raises(check.Refused, match="unrecognized parameter: \\[k\\]"):
        check.check_route("search", "POST", "/{index}/_search", {"index": "nodes"}, {"k": 5})
    with pytest.raises(check.Refused, match="Incorrect HTTP method"):
        check.check_route("indices.create", "POST", "/{index}", {"index": "nodes"}, {})
    refused(lambda: fake.indices.create(index="Nodes", body=index_body(DIM)), "invalid_index_name_exception",
            "must be lowercase")


@pytest.mark.parametrize("method, why", [
    ({"name": "hnsw", "engine": "lucene", "space_type": "l2", "parameters": {"ef_search": 100}}, "[ef_search]"),
    ({"name": "hnsw", "engine": "lucene", "space_type": "l2", "parameters": {"m": 513}}, "[m]"),
    ({"name": "hnsw", "engine": "faiss", "space_type": "cosinesimil"}, "space type [cosinesimil]"),
    ({"name": "hnsw", "engine": "faiss", "space_type": "innerproduct", "parameters": {"m": 0}}, "[m]"),
    ({"name": "ivf", "engine": "lucene", "space_type": "l2"}, "Invalid method name: ivf"),
    ({"name": "hnsw", "engine": "annoy", "space_type": "l2"}, "Invalid engine type: annoy"),
    ({"name": "hnsw", "engine": "nmslib", "space_type": "innerproduct", "parameters": {"encoder": {}}}, "[encoder]"),
])
def test_knn_vector_methods_are_held_to_their_engine(method, why):
    body = index_body(DIM)
    body["mappings"]["properties"]["vector"]["method"] = method
    refused(lambda: FakeOpenSearch().indices.create(index="nodes", body=body), "mapper_parsing_exception", why)


@pytest.mark.parametrize("engine, space, parameters", [
    ("faiss", "innerproduct", {"m": 16, "ef_construction": 128, "ef_search": 100}),
    ("lucene", "cosinesimil", {"m": 512, "ef_construction": 3200}),
    ("nmslib", "l2", {"m": 16}),
])
def test_knn_vector_methods_each_engine_takes(engine, space, parameters):
    body = index_body(DIM)
    body["mappings"]["properties"]["vector"]["method"] = {"name": "hnsw", "engine": engine, "space_type": space,
                                                           "parameters": parameters}
    assert FakeOpenSearch().indices.create(index="nodes", body=body)["acknowledged"]


def test_the_spec_is_closed_only_where_it_lists_its_fields():
    """The strict reading closes the composing schema, not its parts: a k-NN query takes
    QueryBase's ``boost`` and ``_name`` beside its own fields; a free map (``_meta``) stays open."""
    check.check_body("search", knn({"vector": [1.0], "k": 1, "boost": 2.0, "_name": "q"}))
    check.check_body("indices.put_mapping", {"_meta": {"anything": {"goes": [1]}}})
    assert check.spec().upstream["commit"] == "fbe9edebac41d098c67e2d379667184368c4ab6c"


def test_a_refusal_answers_over_http_as_the_cluster_does(monkeypatch):
    """The HTTP fake answers a refused request with the cluster's status and JSON, which
    opensearch-py turns into the same RequestError a real domain gives."""
    import importlib.util
    import sys
    from pathlib import Path

    from opensearchpy.exceptions import RequestError

    from contract.aws_factories import REGION
    from eragraph.adapters.aws.vector_opensearch import make_client

    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(key, "testing")
    name = "eragraph_tests_opensearch_http"  # tests/deployed/opensearch_http.py, from this folder
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).parents[1] / "deployed" / "opensearch_http.py")
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    server = sys.modules[name].OpenSearchHttpFake(region=REGION).start()
    try:
        client = make_client(server.endpoint, REGION)
        OpenSearchVectorIndex(client, "nodes", DIM).ensure_index()
        with pytest.raises(RequestError) as caught:
            client.search(index="nodes", body=knn({"vector": [1.0, 0.0, 0.0, 0.0], "k": 10_001}))
        assert caught.value.status_code == 400 and caught.value.error == "illegal_argument_exception"
        assert caught.value.info["error"]["root_cause"][0]["reason"] == "[knn] requires k to be in the range (0, 10000]"
        with pytest.raises(RequestError) as caught:
            client.search(index="nodes", body=knn({"vector": [1.0, 0.0, 0.0, 0.0], "k": 1, "ef": 5}))
        assert caught.value.error == "x_content_parse_exception"
    finally:
        server.stop()


def test_the_spec_constrains_a_number_by_its_type_alone():
    """What lets check.py remember a valid document by its shape (each vector read as numbers of
    the same types): no keyword of the bundle bounds, counts or compares the values of a list of
    numbers, and no const or enum names a number. A bundle that adds one fails here."""
    kinds = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "uniqueItems",
             "contains", "minItems", "maxItems", "prefixItems")
    found = []

    def walk(node):
        if isinstance(node, dict):
            found.extend(k for k in kinds if k in node)
            for name in ("const", "enum"):
                values = node.get(name) if name == "enum" else [node[name]] if name in node else []
                found.extend(name for v in values or [] if isinstance(v, int | float) and not isinstance(v, bool))
            for key, value in node.items():
                if key not in ("properties", "$defs", "patternProperties"):
                    walk(value)
                elif isinstance(value, dict):
                    for sub in value.values():
                        walk(sub)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(json.loads(check.BUNDLE.read_text()))
    assert not found, sorted(set(found))


def test_a_vector_is_checked_by_its_shape_and_a_wrong_one_still_refused(monkeypatch):
    """Searches that differ only in their vector's numbers are one shape: checked once, all
    answered. A vector holding a string or a boolean is no vector: checked as it is, and refused
    as before; an integral value where the shape had none is another shape, checked once."""
    calls = []
    real = check.spec().bodies["search"]

    class Counting:
        def iter_errors(self, instance):
            calls.append(instance)
            return real.iter_errors(instance)

    monkeypatch.setitem(check.spec().bodies, "search", Counting())
    monkeypatch.setattr(check, "_valid", set())
    vectors = np.random.default_rng(5).normal(size=(3, 12)).tolist()
    for v in vectors:
        check.check_body("search", knn({"vector": v, "k": 1}))
    assert len(calls) == 1  # the first vector's shape; the other two were known valid
    for wrong in ("0.5", True):
        with pytest.raises(check.Refused, match="failed to parse field"):
            check.check_body("search", knn({"vector": vectors[0][:-1] + [wrong], "k": 1}))
    check.check_body("search", knn({"vector": vectors[0][:-1] + [1.0], "k": 1}))  # another shape, valid
    check.check_body("search", knn({"vector": vectors[1][:-1] + [7.0], "k": 1}))  # that shape again
    assert len(calls) == 4
    assert check._shape({"a": [1.5] * 8, "b": [1, 2.0, 2.5]}) == {"a": [0.5] * 8, "b": [1, 2.0, 2.5]}
    same = {"a": [1, 2], "b": {"c": "d"}}
    assert check._shape(same) is same
