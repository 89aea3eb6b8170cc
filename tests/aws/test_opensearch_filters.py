"""Metadata filters in the OpenSearch adapters: the compiled query DSL selects exactly what
``domain.filters.matches`` accepts (evaluated by the request-checking fake, over many random
attributes and filters), filtered k-NN and BM25 return the true top-k of the allowed set, the
request bodies are the documented ones, and a re-upsert replaces a chunk's attributes."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from contract.aws_factories import fake_opensearch_module
from eragraph.adapters.aws import vector_opensearch
from eragraph.adapters.aws.filter_dsl import ATTR_PROPERTIES, attr_fields, compile_filter, where_clauses
from eragraph.adapters.aws.lexical_opensearch import OpenSearchLexicalIndex
from eragraph.adapters.aws.vector_opensearch import OpenSearchVectorIndex
from eragraph.domain.bm25 import Bm25Corpus
from eragraph.domain.filters import (COMPARISONS, All, AnyOf, Cond, FilterError, chunk_attrs, matches,
                                     parse_filter)
from eragraph.domain.ranking import rank_score

fake_module = fake_opensearch_module()
FakeOpenSearch, ShapeError = fake_module.FakeOpenSearch, fake_module.ShapeError
DIM = 8
KEYS = ["lang", "year", "draft", "tags", "score"]
STRINGS = ["en", "de", "2020", "1", "true", "", "enx", "e"]
NUMBERS = [0, 1, 2020, 2021, -3, 0.0, -0.0, 1.5, 2020.0, -2.5, 2 ** 53]

DEFAULT_SCOPE = {"bool": {"must_not": [{"exists": {"field": "tenant"}}]}}  # the adapter's own clause: the default tenant's documents


def unit(rows: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((rows, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def random_value(rng: random.Random):
    kind = rng.randrange(4)
    if kind == 0:
        return rng.choice(STRINGS)
    if kind == 1:
        return rng.choice(NUMBERS)
    if kind == 2:
        return rng.choice([True, False])
    return rng.sample(STRINGS, rng.randrange(4))  # a list of strings, maybe empty


def random_attrs(rng: random.Random) -> dict | None:
    if rng.random() < 0.08:
        return None  # a summary or an entity: no attributes, never matches a filter
    metadata = {k: random_value(rng) for k in KEYS if rng.random() < 0.6}
    return chunk_attrs(metadata, source=rng.choice(["s3://b/a.md", "s3://b/b.md"]), doc_id=rng.choice(["d1", "d2"]),
                       title=rng.choice(["", "Intro", "Introduction"]))


def random_scalar(rng: random.Random):
    return rng.choice([rng.choice(STRINGS[:-1] + ["In"]), rng.choice(NUMBERS), rng.choice([True, False])])


def random_filter(rng: random.Random, depth: int = 0):
    if depth < 2 and rng.random() < 0.3:
        items = tuple(random_filter(rng, depth + 1) for _ in range(rng.randrange(1, 4)))
        return All(items) if rng.random() < 0.5 else AnyOf(items)
    op = rng.choice(COMPARISONS)
    key = rng.choice(KEYS + ["source", "doc_id", "title", "missing"])
    if op in ("in", "notIn"):
        value = tuple(random_scalar(rng) for _ in range(rng.randrange(1, 4)))
    elif op == "startsWith":
        value = rng.choice(["e", "en", "In", "Intro", "s3://b/a", "2", "d"])
    elif op in ("greaterThan", "greaterThanOrEquals", "lessThan", "lessThanOrEquals"):
        value = rng.choice(NUMBERS)
    else:
        value = random_scalar(rng)
    return Cond(op, key, value)


@pytest.fixture
def corpus():
    """A fake cluster holding 300 vectors with random attributes (some without any)."""
    rng = random.Random(15)
    client = FakeOpenSearch()
    index = OpenSearchVectorIndex(client, "nodes", DIM, refresh=True)
    ids = [f"n{i:03d}" for i in range(300)]
    attrs = {i: random_attrs(rng) for i in ids}
    vecs = unit(len(ids), 3)
    index.upsert(ids, vecs, [{"layer": 0, "doc_id": "d", **({"attrs": attrs[i]} if attrs[i] is not None else {})}
                             for i in ids])
    return client, index, ids, vecs, attrs


def allowed(attrs: dict, f) -> set[str]:
    return {i for i, a in attrs.items() if a is not None and matches(f, a)}


def test_the_compiled_filter_selects_what_matches_accepts(corpus):
    client, _, _, _, attrs = corpus
    rng = random.Random(7)
    sizes = []
    for _ in range(600):
        f = random_filter(rng)
        expected = allowed(attrs, f)
        assert client.select("nodes", {"bool": {"filter": where_clauses(f)}}) == expected, f
        sizes.append(len(expected))
    assert sum(1 for s in sizes if 0 < s < 300) > 300  # the filters mostly select something, not all


def test_type_strict_examples(corpus):
    client, _, _, _, attrs = corpus
    cases = [
        {"equals": {"key": "year", "value": "2020"}},  # a string never equals the number 2020
        {"equals": {"key": "year", "value": 2020}},
        {"equals": {"key": "draft", "value": 1}},  # true is not 1
        {"greaterThan": {"key": "draft", "value": 0}},  # nor a number at all
        {"equals": {"key": "tags", "value": "en"}},  # any element of a list
        {"notEquals": {"key": "lang", "value": "en"}},  # a chunk without the key matches
        {"notIn": {"key": "year", "value": [2020, "2020", True]}},
        {"lessThanOrEquals": {"key": "score", "value": 0}},  # -0.0 <= 0 like 0.0
        {"greaterThanOrEquals": {"key": "score", "value": 0}},
        {"startsWith": {"key": "title", "value": "Intro"}},
        {"orAll": [{"equals": {"key": "lang", "value": "de"}}, {"in": {"key": "tags", "value": ["1", "e"]}}]},
    ]
    for case in cases:
        f = parse_filter(case)
        expected = allowed(attrs, f)
        assert expected and expected != {i for i, a in attrs.items() if a is not None}, case  # a real test
        assert client.select("nodes", {"bool": {"filter": where_clauses(f)}}) == expected, case


def test_empty_groups_agree_with_matches(corpus):
    client, _, _, _, attrs = corpus
    for f in (All(()), AnyOf(()), AnyOf((All(()),)), All((AnyOf(()),)), Cond("notIn", "lang", ("en",))):
        expected = allowed(attrs, f)
        assert client.select("nodes", {"bool": {"filter": where_clauses(f)}}) == expected, f


def brute_force(ids, vecs, keep: set[str], q: np.ndarray, k: int) -> list[str]:
    scores = {i: float(v @ q) for i, v in zip(ids, vecs) if i in keep}
    return sorted(scores, key=lambda i: (-rank_score(scores[i]), i))[:k]


@pytest.mark.parametrize("ann_limit", [None, 2])
def test_filtered_knn_is_the_top_k_of_the_allowed_set(corpus, ann_limit):
    """Whatever the allowed set's size, k hits (or all of it), the best ones, even from an engine
    whose filtered graph search comes back short (``filtered_ann_limit``)."""
    client, index, ids, vecs, attrs = corpus
    client.filtered_ann_limit = ann_limit
    rng = random.Random(11)
    queries = unit(40, 9)
    for q in queries:
        f = random_filter(rng)
        keep = allowed(attrs, f)
        for k in (1, 5, 40):
            got = [h.node_id for h in index.search(q, k, layers=[0], where=f)]
            assert got == brute_force(ids, vecs, keep, q, k), (f, k)


def test_a_short_engine_answer_is_completed_exactly(corpus):
    client, index, ids, vecs, attrs = corpus
    client.filtered_ann_limit = 1
    f = parse_filter({"equals": {"key": "source", "value": "s3://b/a.md"}})
    keep = allowed(attrs, f)
    assert len(keep) > 100
    q = unit(1, 5)[0]
    client.requests.clear()
    assert [h.node_id for h in index.search(q, 10, where=f)] == brute_force(ids, vecs, keep, q, 10)
    bodies = [b for _, path, b in client.requests if path == "/nodes/_search"]
    counts = [b for b in bodies if b.get("size") == 0]
    assert counts == [{"size": 0, "track_total_hits": True,
                       "query": {"constant_score": {"filter": {"bool": {"filter": [DEFAULT_SCOPE, *where_clauses(f)]}}}}}]
    assert [b["query"]["knn"]["vector"]["k"] for b in bodies if "knn" in b["query"]] == [20, len(keep)]


def test_no_count_when_the_engine_answers_in_full(corpus):
    client, index, _, _, _ = corpus
    client.requests.clear()
    index.search(unit(1, 5)[0], 10, where=parse_filter({"equals": {"key": "doc_id", "value": "d1"}}))
    index.search(unit(1, 5)[0], 10, where=parse_filter({"equals": {"key": "doc_id", "value": "nobody"}}))
    sizes = [b["size"] for _, path, b in client.requests if path == "/nodes/_search"]
    assert sizes == [20, 20, 0]  # the empty answer was checked: nothing is allowed


def test_knn_request_body_with_a_filter():
    client = FakeOpenSearch()
    index = OpenSearchVectorIndex(client, "nodes", 4, refresh=True)
    v = np.eye(4, dtype=np.float32)
    index.upsert(["a"], v[:1], [{"layer": 0, "doc_id": "d1", "attrs": {"lang": "en", "year": 2020}}])
    f = parse_filter({"andAll": [{"in": {"key": "lang", "value": ["en", "de", 7]}},
                                 {"greaterThanOrEquals": {"key": "year", "value": 2019}},
                                 {"notEquals": {"key": "draft", "value": True}}]})
    assert [h.node_id for h in index.search(v[0], 3, layers=[0], doc_ids=["d1"], where=f)] == ["a"]
    body, count = [b for _, p, b in client.requests if p == "/nodes/_search"]  # 1 hit < k: how many are allowed?
    assert count == {"size": 0, "track_total_hits": True,
                     "query": {"constant_score": {"filter": body["query"]["knn"]["vector"]["filter"]}}}
    assert body == {"size": 6, "_source": False, "query": {"knn": {"vector": {
        "vector": [1.0, 0.0, 0.0, 0.0], "k": 6,
        "filter": {"bool": {"filter": [
            DEFAULT_SCOPE,  # the default tenant: documents without a tenant only
            {"terms": {"layer": [0]}},
            {"terms": {"doc_id": ["d1"]}},
            {"term": {"has_attrs": True}},
            {"bool": {"filter": [
                {"bool": {"should": [{"terms": {"attrs_s.lang": ["en", "de"]}}, {"term": {"attrs_n.lang": 7}}],
                          "minimum_should_match": 1}},
                {"range": {"attrs_n.year": {"gte": 2019}}},
                {"bool": {"must_not": [{"term": {"attrs_b.draft": True}}]}}]}}]}}}}}}
    bulk = [b for _, p, b in client.requests if p == "/_bulk"][0]
    assert '"has_attrs": true, "attrs_s": {"lang": "en"}, "attrs_n": {"year": 2020}' in bulk


def test_lexical_request_body_with_a_filter_and_bm25_over_the_allowed_set():
    client = FakeOpenSearch()
    index = OpenSearchVectorIndex(client, "nodes", 4, refresh=True)
    lexical = OpenSearchLexicalIndex(index)
    texts = ["radium glows", "radium and polonium salts", "radium radium radium", "radium in Paris",
             "the theory of relativity", "a tower in Paris", "polonium salts", "glows in the dark",
             "Bern and Zurich", "a prize in physics"]
    langs = ["en", "de", "de", "de", "en", "de", "en", "de", "en", "de"]
    ids = [f"c{i}" for i in range(len(texts))]
    index.upsert(ids, np.tile(np.eye(4, dtype=np.float32)[:1], (len(ids), 1)),
                 [{"layer": 0, "doc_id": "d", "text": t, "attrs": {"lang": lang}} for t, lang in zip(texts, langs)])
    corpus = Bm25Corpus()
    for i, t in zip(ids, texts):
        corpus.add(i, t)  # BM25 statistics of the whole index; the filter only selects
    scores = dict(corpus.search("radium", len(ids)))

    def best(keep, k):
        return sorted((i for i in scores if i in keep), key=lambda i: (-rank_score(scores[i]), i))[:k]

    f = parse_filter({"equals": {"key": "lang", "value": "de"}})
    expected = best({i for i, lang in zip(ids, langs) if lang == "de"}, 2)
    assert expected != best(set(ids), 2)  # the filter changes the answer
    assert [h.node_id for h in lexical.search("radium", 2, where=f)] == expected
    method, path, body = client.requests[-1]
    assert body == {"size": 52, "_source": False,
                    "query": {"bool": {"must": [{"match": {"text": "radium"}}],
                                       "filter": [DEFAULT_SCOPE, {"term": {"layer": 0}}, {"term": {"has_attrs": True}},
                                                  {"term": {"attrs_s.lang": "de"}}]}}}


def test_a_re_upsert_replaces_the_attributes(corpus):
    client = FakeOpenSearch()
    index = OpenSearchVectorIndex(client, "nodes", 4, refresh=True)
    v = np.eye(4, dtype=np.float32)[:1]
    year = parse_filter({"equals": {"key": "year", "value": 2020}})
    not_de = parse_filter({"notEquals": {"key": "lang", "value": "de"}})
    index.upsert(["a"], v, [{"layer": 0, "doc_id": "d", "attrs": {"lang": "en", "year": 2020, "tags": ["x"]}}])
    assert [h.node_id for h in index.search(v[0], 1, where=year)] == ["a"]
    index.upsert(["a"], v, [{"layer": 0, "doc_id": "d", "attrs": {"lang": "de"}}])
    assert client.indexes["nodes"]["docs"]["a"]["attrs_s"] == {"lang": "de"}
    assert "attrs_n" not in client.indexes["nodes"]["docs"]["a"]
    assert index.search(v[0], 1, where=year) == [] and index.search(v[0], 1, where=not_de) == []
    index.upsert(["a"], v, [{"layer": 0, "doc_id": "d"}])  # no attributes any more: no filter matches
    assert "has_attrs" not in client.indexes["nodes"]["docs"]["a"]
    assert index.search(v[0], 1, where=parse_filter({"notEquals": {"key": "lang", "value": "zz"}})) == []
    assert [h.node_id for h in index.search(v[0], 1)] == ["a"]


def test_an_index_from_before_attributes_gains_their_fields_with_the_first_attributes():
    client = FakeOpenSearch()
    old = vector_opensearch.index_body(4)
    del old["mappings"]["dynamic_templates"]
    for name in ATTR_PROPERTIES:
        del old["mappings"]["properties"][name]
    client.indices.create(index="nodes", body=old)
    v = np.eye(4, dtype=np.float32)
    with pytest.raises(ShapeError, match="strict"):  # what the old mapping does to an attribute
        client.bulk('{"index": {"_id": "x"}}\n{"has_attrs": true}\n', index="nodes")
    below_two = parse_filter({"lessThan": {"key": "n", "value": 2}})
    reader = OpenSearchVectorIndex(client, "nodes", 4)  # the query function: it may only read
    reader.upsert(["z"], v[3:4], [{"layer": 1, "doc_id": ""}])  # a summary: no attributes, no mapping change
    assert reader.search(v[0], 2, where=below_two) == []  # unmapped fields match nothing
    assert [r[:2] for r in client.requests[2:]] == [("HEAD", "/nodes"), ("POST", "/_bulk"),
                                                    ("POST", "/nodes/_search"), ("POST", "/nodes/_search")]
    index = OpenSearchVectorIndex(client, "nodes", 4, refresh=True)
    index.upsert(["a", "b"], v[:2], [{"layer": 0, "doc_id": "d", "attrs": {"n": 1}}, {"layer": 0, "doc_id": "d"}])
    new = vector_opensearch.index_body(4)["mappings"]
    added = {n: new["properties"][n] for n in ATTR_PROPERTIES}
    assert ("PUT", "/nodes/_mapping", {"dynamic_templates": new["dynamic_templates"], "properties": added}) \
        in client.requests
    assert [h.node_id for h in index.search(v[1], 2, where=below_two)] == ["a"]
    client.requests.clear()
    later = OpenSearchVectorIndex(client, "nodes", 4)
    later.upsert(["c"], v[2:3], [{"layer": 0, "doc_id": "d", "attrs": {"n": 3}}])  # now current: nothing to add
    later.upsert(["c"], v[2:3], [{"layer": 0, "doc_id": "d", "attrs": {"n": 4}}])  # and checked once
    assert [r[:2] for r in client.requests] == [("HEAD", "/nodes"), ("GET", "/nodes/_mapping"), ("POST", "/_bulk"),
                                                ("POST", "/_bulk")]


def test_the_mapping_types_attributes_by_dynamic_templates():
    client = FakeOpenSearch()
    index = OpenSearchVectorIndex(client, "nodes", 4, refresh=True)
    index.upsert(["a"], np.eye(4, dtype=np.float32)[:1],
                 [{"layer": 0, "doc_id": "d", "attrs": {"lang": "en", "tags": ["x", "y"], "year": 2020,
                                                        "draft": False, "score": -0.0, "none": []}}])
    props = client.indices.get_mapping(index="nodes")["nodes"]["mappings"]["properties"]
    assert props["attrs_s"]["properties"] == {"lang": {"type": "keyword"}, "tags": {"type": "keyword"}}
    assert props["attrs_n"]["properties"] == {"year": {"type": "double"}, "score": {"type": "double"}}
    assert props["attrs_b"]["properties"] == {"draft": {"type": "boolean"}}
    assert repr(client.indexes["nodes"]["docs"]["a"]["attrs_n"]["score"]) == "0.0"  # Lucene sorts -0.0 below 0.0


def test_bad_attributes_and_filters_are_refused():
    with pytest.raises(ValueError):
        attr_fields({"bad.key": "x"})
    with pytest.raises(ValueError):
        attr_fields({"tags": ["a", 1]})
    with pytest.raises(ValueError):
        attr_fields({"x": float("nan")})
    with pytest.raises(FilterError):
        compile_filter(Cond("equals", "a.b", "x"))
    with pytest.raises(FilterError):
        compile_filter(Cond("greaterThan", "year", "2020"))
    with pytest.raises(FilterError):
        compile_filter(Cond("in", "year", ()))


def test_the_fake_refuses_what_it_does_not_evaluate():
    client = FakeOpenSearch()
    index = OpenSearchVectorIndex(client, "nodes", 4, refresh=True)
    index.upsert(["a"], np.eye(4, dtype=np.float32)[:1], [{"layer": 0, "doc_id": "d", "attrs": {"lang": "en"}}])
    bad = [{"wildcard": {"attrs_s.lang": "e*"}},
           {"term": {"attrs_s.lang": 1}},  # a number against a keyword
           {"range": {"attrs_s.lang": {"gt": "a"}}},  # ranges are numeric
           {"bool": {"should": [{"match_all": {}}], "minimum_should_match": "50%"}},
           {"bool": {"filter": [], "boost": 2}},
           {"term": {"attrs_s.lang": "en"}, "prefix": {"attrs_s.lang": "e"}}]
    for clause in bad:
        with pytest.raises(ShapeError):
            client.select("nodes", clause)
    with pytest.raises(ShapeError):  # a double takes numbers only
        client.bulk('{"index": {"_id": "b"}}\n{"attrs_n": {"lang": "en"}}\n', index="nodes")
    assert client.select("nodes", {"bool": {"filter": where_clauses(parse_filter(
        {"startsWith": {"key": "lang", "value": "e"}}))}}) == {"a"}


def test_the_adapter_never_names_an_index_in_a_multi_request_body():
    """The domain refuses explicit indexes in _bulk/_mget bodies (template.yaml:
    rest.action.multi.allow_explicit_index false), and so does the fake: every write, delete,
    lexical rebuild and vector read of the adapter still works, with the index in the path."""
    from eragraph.adapters.aws.lexical_opensearch import OpenSearchLexicalIndex
    from eragraph.domain.model import Node

    client = FakeOpenSearch()
    client.indices.create(index="other", body=vector_opensearch.index_body(4))
    with pytest.raises(ShapeError, match="explicit index"):
        client.bulk('{"index": {"_index": "other", "_id": "x"}}\n{"layer": 0}\n')
    index = OpenSearchVectorIndex(client, "nodes", 4, refresh=True, tenant="acme")
    v = np.eye(4, dtype=np.float32)
    index.upsert(["a", "b"], v[:2], [{"layer": 0, "doc_id": "d", "text": "alpha", "attrs": {"lang": "en"}},
                                     {"layer": 0, "doc_id": "d", "text": "beta"}])
    assert set(index.get_vectors(["a", "b"])) == {"a", "b"}
    OpenSearchLexicalIndex(index).rebuild([Node(node_id="a", layer=0, text="alpha", tokens=1, code=0)])
    index.delete(["b"])
    assert index.count() == 1
    bulks = [body for method, path, body in client.requests if path == "/_bulk"][1:]  # after the refused one
    assert len(bulks) == 3 and not any("_index" in body for body in bulks)


def test_search_many_is_one_msearch_request_with_the_documented_body():
    """search_many sends one _msearch (NDJSON: an empty header, the index in the path, then the
    k-NN body search sends) for all rows, scoped to the tenant; an explicit index in a header
    is refused like the domain refuses it; a row with a tie at the cut reaching min_score is
    settled by a search of its own, one whose tie is below min_score is not."""
    client = FakeOpenSearch()
    index = OpenSearchVectorIndex(client, "nodes", DIM, refresh=True, tenant="acme")
    vecs = unit(40, 3)
    index.upsert([f"n{i:02d}" for i in range(40)], vecs, [{"layer": i % 2, "doc_id": "d"} for i in range(40)])
    qs = unit(6, 4)
    client.requests.clear()
    many = index.search_many(qs, 3, layers=[1])
    assert [(m, p) for m, p, _ in client.requests] == [("POST", "/nodes/_msearch")]
    lines = [json.loads(x) for x in client.requests[0][2].splitlines()]
    assert lines[0::2] == [{}] * 6
    assert all(b["query"]["knn"]["vector"]["filter"]["bool"]["filter"][:2] ==
               [{"term": {"tenant": "acme"}}, {"terms": {"layer": [1]}}] for b in lines[1::2])
    assert [[h.node_id for h in row] for row in many] == [[h.node_id for h in index.search(q, 3, layers=[1])]
                                                          for q in qs]
    with pytest.raises(ShapeError, match="explicit index"):
        client.msearch('{"index": "other"}\n{"size": 1}\n', index="nodes")
    # 20 copies of one vector: a tie at the cut
    index.upsert([f"t{i:02d}" for i in range(20)], np.stack([vecs[0]] * 20), [{"layer": 7, "doc_id": "d"}] * 20)
    client.requests.clear()
    row, = index.search_many(vecs[:1], 2, layers=[7])
    assert [h.node_id for h in row] == ["t00", "t01"]
    assert [p for _, p, _ in client.requests].count("/nodes/_search") >= 1
    orthogonal = np.zeros(DIM, np.float32)
    client.requests.clear()
    assert index.search_many(np.stack([orthogonal]), 2, layers=[7], min_score=0.5) == [[]]
    assert [p for _, p, _ in client.requests] == ["/nodes/_msearch"]
