"""Real ``eragraph ingest`` processes on one local store at the same time -- two with disjoint
corpora, three whose corpora share documents (so they race on the same documents and the
same segments): nothing is lost
(every live node keeps its vector, every entity its name vector) and the graph invariants hold."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def corpus(path: Path, prefix: str, n: int, shared: int = 0) -> None:
    """n documents of their own, then ``shared`` that every corpus made with it also holds."""
    words = "river delta harbour bridge canal tide ferry quay lock estuary".split()
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(shared):
            text = " ".join(words[(i * 3 + j) % len(words)] for j in range(40))
            fh.write(json.dumps({"id": f"shared{i}", "title": f"shared {i}",
                                 "text": f"{text}. Pilot Common{i} moored at Dock Common{i}."}) + "\n")
        for i in range(n):
            text = " ".join(words[(i + j) % len(words)] for j in range(40))
            fh.write(json.dumps({"id": f"{prefix}{i}", "title": f"{prefix} {i}",
                                 "text": f"{text}. Captain {prefix.title()}{i} sailed to Port {prefix.title()}{i}."}) + "\n")


@pytest.mark.parametrize("prefixes,shared", [(("north", "south"), 0), (("east", "west", "middle"), 40)],
                         ids=["two-disjoint", "three-overlapping"])
def test_ingest_processes_lose_no_vector(tmp_path, monkeypatch, prefixes, shared):
    store = tmp_path / "store"
    env = {**os.environ, "ERAGRAPH_EMBEDDER": "hash", "ERAGRAPH_S_MIN": "3", "ERAGRAPH_S_MAX": "5",
           "ERAGRAPH_N_PLANES": "10", "PYTHONPATH": os.pathsep.join([str(ROOT / "shared"), os.environ.get("PYTHONPATH", "")])}
    env.pop("ERAGRAPH_STORE", None)
    files = []
    own = 120 if not shared else 60
    for prefix in prefixes:
        files.append(tmp_path / f"{prefix}.jsonl")
        corpus(files[-1], prefix, own, shared)
    procs = [subprocess.Popen([sys.executable, "-m", "eragraph", "ingest", str(f), "--store", str(store),
                               "--json", "--quiet"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for f in files]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err.decode()
        counts = json.loads(out)
        # a shared document is added by one process; the others find it stored or lose the race
        assert counts["documents_added"] >= own
        assert counts["documents_added"] + counts["documents_unchanged"] + counts["documents_stale"] == own + shared

    from eragraph.bootstrap import build_engine
    from eragraph.config import settings_from_env
    from eragraph.services import invariants

    for k in ("ERAGRAPH_EMBEDDER", "ERAGRAPH_S_MIN", "ERAGRAPH_S_MAX", "ERAGRAPH_N_PLANES"):
        monkeypatch.setenv(k, env[k])
    engine = build_engine("local", store, settings_from_env())
    assert len(engine.graph.list_documents()) == own * len(prefixes) + shared
    live = {r.node_id for layer in engine.graph.layer_sizes() for r in engine.graph.layer_refs(layer)}
    assert engine.vectors.ids() == live
    chunks = {r.node_id for r in engine.graph.layer_refs(0)}
    assert chunks == {c for d in engine.graph.list_documents() for c in d.chunk_ids}
    entities = engine.entities.store
    names = entities.export().entities
    assert entities.chunk_ids() == chunks
    assert {i for i in engine.entities.vectors.ids()} == {f"ent:{e}" for e in names}
    report = invariants.check(engine)
    from reliability_cases import record

    record(f"{len(prefixes)} ingest processes on one store", "local", report.ok, processes=len(prefixes),
           documents=own * len(prefixes) + shared, shared_documents=shared)
    assert report.ok, report.violations[:5]
