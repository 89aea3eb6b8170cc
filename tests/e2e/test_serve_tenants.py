"""`eragraph serve --store ROOT` on a root holding several tenants: started without --tenant, the
x-eragraph-tenant header picks one (unknown: 404; none, on a root without a default: 400 naming
the choices) and a tenant never sees another's documents; started with --tenant, the header
naming another is a 403."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from serve_support import eragraph, serving

pytest.importorskip("aws_lambda_powertools")
pytest.importorskip("uvicorn")

DOCS = {"acme": ("acme.txt", "Acme builds rockets called Skylark in the desert workshop."),
        "globex": ("globex.txt", "Globex grows tomatoes called Redstar in the valley greenhouse.")}


def request(url: str, path: str, tenant: str | None = None, body: dict | None = None) -> tuple[int, dict]:
    headers = {"content-type": "application/json"}
    if tenant is not None:
        headers["x-eragraph-tenant"] = tenant
    req = urllib.request.Request(url + path, data=None if body is None else json.dumps(body).encode(),
                                 method="GET" if body is None else "POST", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    base = tmp_path_factory.mktemp("tenants")
    store = base / "store"
    for tenant, (name, text) in DOCS.items():
        folder = base / tenant
        folder.mkdir()
        (folder / name).write_text(text)
        done = eragraph("ingest", str(folder), "--store", str(store), "--tenant", tenant, "--quiet")
        assert done.returncode == 0, done.stderr
    return store


def test_the_header_picks_a_tenant_and_never_sees_anothers(root):
    with serving(root) as url:
        status, body = request(url, "/tenants", "acme")
        assert status == 200 and body == {"tenants": ["acme", "globex"], "current": "acme", "switchable": True, "ask_as": True}
        for tenant, other in (("acme", "globex"), ("globex", "acme")):
            status, body = request(url, "/query", tenant, {"query": "Which rockets and tomatoes are named?", "k": 5})
            assert status == 200 and body["results"]
            assert {r["source"].rsplit("/", 1)[-1] for r in body["results"]} == {DOCS[tenant][0]}
            assert all(DOCS[other][1].split()[0] not in r["text"] for r in body["results"])
            status, stats = request(url, "/stats", tenant)
            assert status == 200 and stats["documents"] == 1
        status, body = request(url, "/stats", "initech")
        assert status == 404 and "initech" in body["message"] and "acme" in body["message"]
        status, body = request(url, "/stats")  # the root has no default tenant: the choices in words
        assert status == 400 and "x-eragraph-tenant" in body["message"] and "acme, globex" in body["message"]
        status, body = request(url, "/stats", "Not A Tenant!")
        assert status == 400 and "tenant id" in body["message"]


def test_a_server_pinned_to_a_tenant_refuses_the_header_naming_another(root):
    with serving(root, "--tenant", "globex") as url:
        assert request(url, "/tenants") == (200, {"tenants": ["globex"], "current": "globex", "switchable": False, "ask_as": True})
        assert request(url, "/stats", "globex")[0] == 200
        status, body = request(url, "/query", "acme", {"query": "rockets"})
        assert status == 403 and "another tenant" in body["message"]


def test_without_the_header_a_root_with_its_own_store_serves_its_default_tenant(root, tmp_path):
    import shutil

    both = tmp_path / "both"
    shutil.copytree(root, both)
    (tmp_path / "own").mkdir()
    (tmp_path / "own" / "own.txt").write_text("The default tenant keeps notes about lighthouses called Beacon.")
    done = eragraph("ingest", str(tmp_path / "own"), "--store", str(both), "--quiet")
    assert done.returncode == 0, done.stderr
    with serving(both) as url:
        assert request(url, "/tenants") == (200, {"tenants": ["", "acme", "globex"], "current": "",
                                                   "switchable": True, "ask_as": True})
        status, body = request(url, "/query", None, {"query": "lighthouses rockets tomatoes", "k": 5})
        assert status == 200 and {r["source"].rsplit("/", 1)[-1] for r in body["results"]} == {"own.txt"}
        assert request(url, "/stats", "acme")[1]["documents"] == 1
