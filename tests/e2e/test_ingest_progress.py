"""The CLI ingest bar on one big JSONL document (the case that sat at "0doc" for its whole run):
it counts bytes of input against their total, shows documents done/total and chunks beside
them with an ETA, and moves while the one document's chunks are embedded."""

from __future__ import annotations

import argparse
import json

from support import make_engine

from eragraph.cli import ingest, progress
from eragraph.services.sources import iter_sources


def test_csv_rows_count_as_documents_when_mapped(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_text("id,text\n1,alpha\n\n2,beta\n3,gamma\n", encoding="utf-8")
    assert progress.count_inputs([path]) == 1 and progress.count_inputs([path], csv_rows=True) == 3


def test_one_big_document_moves_the_byte_bar_with_docs_chunks_and_eta(tmp_path, monkeypatch, capsys):
    words = " ".join(f"river{i % 97} flows past town{i % 89}." for i in range(3000))
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps({"id": "big", "title": "Big", "text": words}) + "\n", encoding="utf-8")
    size = path.stat().st_size
    monkeypatch.setattr(progress, "EMBED_SLICE", 64)
    seen = []
    original = progress.IngestProgress.embedding

    def spy(self, done, total):
        original(self, done, total)
        seen.append((self.docs.n, self.docs.total, self.docs_done, str(self.docs)))

    monkeypatch.setattr(progress.IngestProgress, "embedding", spy)
    errors: list = []
    args = argparse.Namespace(quiet=False, batch_docs=256)
    out = ingest.ingest_docs(make_engine(), iter_sources([path], errors), args,
                             total=progress.count_inputs([path]), errors=errors,
                             total_bytes=progress.input_bytes([path]))
    chunks = out["chunks_added"]
    assert chunks > 200 and not errors
    assert all(total == size for _, total, _, _ in seen)
    during = [n for n, _, docs_done, _ in seen if docs_done == 0]  # the document is not written yet
    assert len(during) >= chunks // 64 and during == sorted(during) and 0 < during[-1] < size
    assert len(set(during)) > 3  # it moves, slice by slice
    bar = seen[len(seen) // 2][3]
    assert "docs 0/1" in bar and "<" in bar and ("B/s" in bar or "s/B" in bar), bar  # ETA and a rate
    assert any("docs 0/1, chunks 128]" in s for *_, s in seen)  # chunks embedded so far
    err = capsys.readouterr().err
    assert f"docs 1/1, chunks {chunks}" in err  # the bar's last state


def test_every_event_draws_a_frame_whatever_the_clock(monkeypatch, capsys):
    """With a clock that never moves (a machine so fast that no 0.1 s passes between events),
    each event still draws its frame, and the first frame already has the counts: what the bars
    show depends on the events only."""
    import re
    from types import SimpleNamespace

    import tqdm.std

    monkeypatch.setattr(tqdm.std, "time", lambda: 1000.0)

    def frames(prefix: str) -> list[str]:
        text = capsys.readouterr().err.replace("\r", "\n")
        return [line[line.index(prefix):] for line in text.splitlines() if prefix in line]

    bar = progress.IngestProgress(argparse.Namespace(quiet=False), total=2, total_bytes=100)
    [first] = frames("ingest:")
    assert first.startswith("ingest:   0%") and first.endswith("docs 0/2, chunks 0]")
    bar.drawn(SimpleNamespace(input_bytes=60, text=""))
    bar.embedding(0, 4)
    bar.embedding(2, 4)  # half the chunks embedded: a quarter of the batch's bytes
    err = capsys.readouterr().err.replace("\r", "\n")
    assert re.search(r"embedding: +50%\|.*\| 2/4 ", err)
    assert re.search(r"ingest: +15%\|.*docs 0/2, chunks 2\]", err)
    bar.stage("writing")
    assert frames("writing:")
    bar.documents(1)
    assert re.search(r"^ingest: +60%\|.*docs 1/2, chunks 2\]$", frames("ingest:")[-1])
    bar.close()  # the other document was never read: the totals say what was
    assert re.search(r"^ingest: 100%\|.*docs 1/1, chunks 2\]$", frames("ingest:")[-1])
