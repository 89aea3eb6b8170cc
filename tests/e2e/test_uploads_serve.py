"""Documents submitted to `eragraph serve` (a real process on a local store): POST /documents with
two files and a binary one answers 202, the server's worker reads, ingests and drains them while
the client polls GET /documents/{id} (received -> done, the binary one failed with its reason),
POST /query finds their text, GET /changes lists the summaries their upload re-summarized (ids of
the store's graph), DELETE /documents/{id} removes one, a bad request is a 4xx in words, and
`eragraph rebuild` rebuilds the submitted documents from what the server kept."""

from __future__ import annotations

import base64
import json
import time

from serve_support import eragraph, get, send, serving

KEEPER = " ".join(f"The lighthouse keeper logged storm number {n} over the northern reef and lit lamp {n}."
                  for n in range(30))
BREAD = " ".join(f"Sourdough loaf {n} needs a lively starter, flour, water and salt, folded and baked hot."
                 for n in range(30))
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
SEED = "Ferries cross the bay each morning; the harbour master logs every crossing. " * 5


def poll(url: str, doc_id: str, until: tuple[str, ...] = ("done", "failed"), seconds: float = 120) -> dict:
    deadline = time.monotonic() + seconds
    states = []
    while time.monotonic() < deadline:
        status, body = get(url, f"/documents/{doc_id}")
        assert status == 200, body
        if not states or states[-1] != body["status"]:
            states.append(body["status"])
        if body["status"] in until:
            return {**body, "seen": states}
        time.sleep(0.1)
    raise AssertionError(f"{doc_id} still {states} after {seconds} s")


def test_submitted_documents_are_ingested_by_the_server(tmp_path):
    seed, store = tmp_path / "seed.txt", tmp_path / "store"
    seed.write_text(SEED)
    assert eragraph("ingest", "--store", str(store), "--quiet", str(seed)).returncode == 0
    with serving(store) as url:
        status, body = send(url, "POST", "/documents", {"documents": [
            {"source": "notes/keeper.md", "text": KEEPER, "metadata": {"kind": "log"}},
            {"source": "food/bread.txt", "bytes": base64.b64encode(BREAD.encode()).decode()},
            {"source": "img/photo.png", "bytes": base64.b64encode(PNG).decode()}]})
        assert status == 202, body
        accepted = body["documents"]
        assert [d["state"] for d in accepted] == ["received"] * 3
        assert [d["source"] for d in accepted] == ["notes/keeper.md", "food/bread.txt", "img/photo.png"]
        final = {d["source"]: poll(url, d["doc_id"]) for d in accepted}
        assert final["notes/keeper.md"]["status"] == final["food/bread.txt"]["status"] == "done"
        assert final["img/photo.png"]["status"] == "failed" and "binary" in final["img/photo.png"]["reason"]

        status, found = send(url, "POST", "/query", {"query": "storm over the northern reef", "mode": "dense", "k": 3})
        assert status == 200 and found["results"][0]["doc_id"] == accepted[0]["doc_id"], found
        status, found = send(url, "POST", "/query", {"query": "lively starter", "mode": "dense", "k": 3,
                                                      "filter": {"equals": {"key": "kind", "value": "log"}}})
        assert status == 200 and {r["doc_id"] for r in found["results"]} == {accepted[0]["doc_id"]}

        status, listed = get(url, "/changes?limit=50")
        assert status == 200, listed
        kinds = [c["kind"] for c in listed["changes"]]
        assert "ingest" in kinds and "resummarize" in kinds
        uploaded = [c for c in listed["changes"] if c["kind"] == "ingest" and c["documents"][0] != str(seed)]
        assert {d for c in uploaded for d in c["documents"]} == {"notes/keeper.md", "food/bread.txt"}
        summaries = {s for c in listed["changes"] if c["kind"] == "resummarize"
                     and c["time"] >= min(u["time"] for u in uploaded) for s in c["summaries"]}
        assert summaries, listed
        assert listed["rebuild"]["calls"] >= 1 and listed["rebuild"]["basis"] in ("ledger", "words")

        status, page = get(url, "/documents?limit=2")
        assert status == 200 and len(page["documents"]) == 2 and page["next_cursor"]
        status, rest = get(url, f"/documents?limit=2&cursor={page['next_cursor']}")
        assert status == 200 and rest["next_cursor"] is None and len(rest["documents"]) == 2  # 4 in all

        for path, body, code, words in (
                ("/documents", {"documents": []}, 422, "documents"),
                ("/documents", {"documents": [{"source": f"d{n}.txt", "text": "x"} for n in range(26)]}, 422, "25"),
                ("/documents", {"documents": [{"source": "a.pdf", "bytes": "%%%"}]}, 400, "base64"),
                ("/documents", {"documents": [{"source": "a.txt", "text": "x", "metadata": {"a b": 1}}]}, 400, "key"),
                ("/documents", {"documents": [{"source": "a.txt", "text": "x", "colour": 1}]}, 422, "colour")):
            status, answer = send(url, "POST", path, body)
            assert status == code and words in answer["message"], (body, status, answer)
        status, answer = send(url, "DELETE", "/documents/no-such-doc")
        assert status == 404 and "no-such-doc" in answer["message"]
        status, answer = get(url, "/documents?cursor=garbage")
        assert status == 400 and "cursor" in answer["message"]

        status, answer = send(url, "DELETE", f"/documents/{accepted[1]['doc_id']}")
        assert status == 202 and answer["state"] == "deleting"
        deadline = time.monotonic() + 60
        while get(url, f"/documents/{accepted[1]['doc_id']}")[0] != 404:
            assert time.monotonic() < deadline
            time.sleep(0.1)

    # the summaries the upload re-summarized are nodes of the store's graph
    listing = json.loads(eragraph("status", "--store", str(store), "--json").stdout)
    assert {d["source"] for d in listing["documents"]} >= {"notes/keeper.md", "img/photo.png"}
    from eragraph.bootstrap import build_engine
    from eragraph.config import Settings

    engine = build_engine("local", store, Settings(embedder="hash", s_min=2, s_max=3))
    live = {r.node_id for layer in (1, 2, 3) for r in engine.graph.layer_refs(layer)}
    assert live & summaries  # the ids the console highlights exist (later re-summarizations may replace some)

    rebuilt = eragraph("rebuild", "--store", str(store), "--into", str(tmp_path / "rebuilt"), "--json")
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert json.loads(rebuilt.stdout)["documents_read"] == 2  # the seed and the keeper's log
