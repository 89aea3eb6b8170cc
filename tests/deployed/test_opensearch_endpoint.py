"""make_client honours the endpoint's scheme and port and still signs with SigV4; the HTTP
OpenSearch fake the deployed suite runs checks those signatures and serves the whole adapter.
(Runs in the development venv; needs no sam build.)"""

from __future__ import annotations

import numpy as np
import pytest

from contract.aws_factories import REGION, fake_credentials
from eragraph.adapters.aws.lexical_opensearch import OpenSearchLexicalIndex
from eragraph.adapters.aws.vector_opensearch import OpenSearchVectorIndex, endpoint_address, make_client


@pytest.mark.parametrize("endpoint, expected", [
    ("search-eragraph-dev-abc.us-east-1.es.amazonaws.com", ("search-eragraph-dev-abc.us-east-1.es.amazonaws.com", 443, True)),
    ("https://search-x.eu-west-1.es.amazonaws.com/", ("search-x.eu-west-1.es.amazonaws.com", 443, True)),
    ("https://search-x.eu-west-1.es.amazonaws.com:8443", ("search-x.eu-west-1.es.amazonaws.com", 8443, True)),
    ("http://127.0.0.1:9200", ("127.0.0.1", 9200, False)),
    ("http://localhost", ("localhost", 80, False)),
])
def test_endpoint_address(endpoint, expected):
    assert endpoint_address(endpoint) == expected


@pytest.mark.parametrize("bad", ["ftp://host", "https://", "http://host:9200/prefix"])
def test_endpoint_address_refuses(bad):
    with pytest.raises(ValueError):
        endpoint_address(bad)


def test_make_client_keeps_scheme_port_and_sigv4(monkeypatch):
    fake_credentials()
    from opensearchpy import AWSV4SignerAuth

    client = make_client("http://127.0.0.1:9200", REGION)
    conn = client.transport.get_connection()
    assert conn.host == "http://127.0.0.1:9200" and not conn.use_ssl
    assert isinstance(conn.session.auth, AWSV4SignerAuth)
    tls = make_client("search-x.us-east-1.es.amazonaws.com", REGION).transport.get_connection()
    assert tls.host == "https://search-x.us-east-1.es.amazonaws.com:443" and tls.use_ssl


@pytest.fixture
def http_fake():
    from opensearch_http import OpenSearchHttpFake

    server = OpenSearchHttpFake(region=REGION).start()
    yield server
    server.stop()


def test_adapter_round_trip_over_http_signed(http_fake, monkeypatch):
    """The real client, signed, over HTTP: create, bulk, k-NN (one and several), BM25, mget, count, delete."""
    for k, v in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                 ("AWS_SESSION_TOKEN", "testing")):
        monkeypatch.setenv(k, v)
    client = make_client(http_fake.endpoint, REGION)
    index = OpenSearchVectorIndex(client, "nodes", 4, refresh=True, replicas=0)
    vecs = np.eye(4, dtype=np.float32)
    index.upsert(["a", "b", "c"], vecs[:3], [{"layer": 0, "doc_id": "d1", "text": "red apples and pears"},
                                             {"layer": 0, "doc_id": "d2", "text": "green pears"},
                                             {"layer": 1, "doc_id": ""}])
    index.flush()
    assert index.count() == 3 and index.ids() == {"a", "b", "c"}
    assert [h.node_id for h in index.search(vecs[1], 2)][0] == "b"
    assert [h.node_id for h in index.search(vecs[2], 3, layers=[0])] == ["a", "b"]
    assert set(index.get_vectors(["a", "zz"])) == {"a"}
    # one _msearch for several rows, each answered as its own search
    assert [[h.node_id for h in row] for row in index.search_many(vecs[1:3], 2, layers=[0])] == \
        [[h.node_id for h in index.search(v, 2, layers=[0])] for v in vecs[1:3]]
    lexical = OpenSearchLexicalIndex(index)
    assert lexical.ready()
    assert [h.node_id for h in lexical.search("apples", 5)] == ["a"]
    index.delete(["a", "missing"])
    assert index.count() == 2
    # a second creator of the same index sees resource_already_exists_exception and carries on
    OpenSearchVectorIndex(client, "nodes", 4).ensure_index()
    assert http_fake.errors == [] and http_fake.unsigned == []


def test_unsigned_and_wrongly_signed_requests_are_refused(http_fake, monkeypatch):
    from opensearchpy import OpenSearch, RequestsHttpConnection
    from opensearchpy.exceptions import AuthorizationException

    host, port = http_fake.endpoint.removeprefix("http://").split(":")
    plain = OpenSearch(hosts=[{"host": host, "port": int(port)}], connection_class=RequestsHttpConnection)
    with pytest.raises(AuthorizationException):
        plain.indices.get_mapping(index="nodes")
    for k, v in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "not-the-secret"),
                 ("AWS_SESSION_TOKEN", "testing")):
        monkeypatch.setenv(k, v)
    with pytest.raises(AuthorizationException):
        make_client(http_fake.endpoint, REGION).count(index="nodes")
    assert len(http_fake.unsigned) == 2
    assert "no SigV4" in http_fake.unsigned[0] and "does not match" in http_fake.unsigned[1]


def test_missing_index_and_malformed_requests(http_fake, monkeypatch):
    from opensearchpy.exceptions import NotFoundError, RequestError

    for k, v in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                 ("AWS_SESSION_TOKEN", "testing")):
        monkeypatch.setenv(k, v)
    client = make_client(http_fake.endpoint, REGION)
    assert client.indices.exists(index="nope") is False
    with pytest.raises(NotFoundError) as missing:
        client.search(index="nope", body={"query": {"match_all": {}}})
    assert missing.value.error == "index_not_found_exception"
    OpenSearchVectorIndex(client, "nodes", 4).ensure_index()
    with pytest.raises(RequestError):
        client.search(index="nodes", body={"query": {"knn": {"vector": {"vector": [1.0, 0.0], "k": 1}}}})
    assert http_fake.errors and "dimension" in http_fake.errors[0]


def test_ties_at_the_cut_are_ordered_by_id_whatever_the_engine_returns_first():
    """k-NN and BM25: a tie longer than the first page is fetched whole, then cut by id (as the
    FAISS and SQLite indexes do); a fixed window left the order of a long tie to the engine."""
    from contract.aws_factories import fake_opensearch_module

    fake = fake_opensearch_module().FakeOpenSearch()
    index = OpenSearchVectorIndex(fake, "nodes", 4, refresh=True)
    ids = [f"n{i:02d}" for i in range(40, 0, -1)]  # inserted in descending id order
    v = np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32)
    index.upsert(ids, np.tile(v, (len(ids), 1)), [{"layer": 0, "doc_id": "d", "text": "same words"} for _ in ids])
    assert [h.node_id for h in index.search(v, 1)] == ["n01"]
    assert [h.node_id for h in index.search(v, 3)] == ["n01", "n02", "n03"]
    assert [h.node_id for h in OpenSearchLexicalIndex(index).search("same", 2)] == ["n01", "n02"]
    sizes = [body["size"] for method, path, body in fake.requests if path == "/nodes/_search"]
    assert max(sizes) >= 40 and min(sizes) == 2
