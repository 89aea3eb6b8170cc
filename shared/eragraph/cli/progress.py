"""An ingest's progress on stderr: the input's totals counted up front, the bars (IngestProgress)
and the wrappers that report to them from inside the engine (the embedder in slices, the entity
hooks' stage, the summarizer's count)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path

EMBED_SLICE = 1024  # chunk texts per embedder call in a CLI ingest: the chunk bar moves per slice

# The document and chunk bars draw a frame at every event they are given (a slice embedded, a
# batch written, a stage begun): those events are few (one per EMBED_SLICE chunks or per batch),
# and what the bars show then depends on the events only, never on how fast they came (tqdm's
# default draws at most one frame per 0.1 s and skips the rest).
EVERY_EVENT = {"mininterval": 0, "miniters": 0}


def count_inputs(paths: Iterable[str | Path], csv_rows: bool = False) -> int:
    """How many documents (or skip messages) ``paths`` will give: a .jsonl file's non-blank
    lines (with ``csv_rows``, a .csv/.tsv file's non-blank lines but its header), one for any
    other file or missing path; folders walked as ingest walks them. One quick read of each
    JSONL (and CSV) file, for the progress bar's total (a CSV field spanning lines counts
    each line: the total is corrected at the end)."""
    from ..services.sources import iter_files

    n = 0
    for path in iter_files(paths):
        suffix = path.suffix.lower()
        rows = suffix == ".jsonl" or (csv_rows and suffix in (".csv", ".tsv"))
        if rows and path.is_file():
            try:
                with open(path, "rb") as fh:
                    lines = sum(1 for line in fh if line.strip()) - (suffix != ".jsonl")
            except OSError:
                lines = 1
            n += max(lines, 1)
        else:
            n += 1
    return n


def input_bytes(paths: Iterable[str | Path]) -> int:
    """The bytes of every file under ``paths`` (stat only), for the progress bar's byte total."""
    from ..services.sources import iter_files

    total = 0
    for path in iter_files(paths):
        try:
            total += path.stat().st_size
        except OSError:
            pass
    return total


class IngestProgress:
    """An ingest's progress on stderr (nothing with --quiet). With a byte total (the input
    files' sizes) the bar counts bytes of input, with documents ("docs" done/total) and chunks
    written beside it from its first frame on, and an ETA; a batch's bytes count half as its
    chunks are embedded (the embedding is most of a batch's time) and in full once it is
    written, so one huge document moves the bar too. Without one it counts documents. Under it,
    the chunks of the batch at hand as they are embedded (slices of EMBED_SLICE) and its stage
    (embedding, entities, writing); then, while the bus drains, a stage line counting the
    summaries written on each layer."""

    def __init__(self, args: argparse.Namespace, total: int | None, errors: list | None = None,
                 documents: bool = True, total_bytes: int | None = None) -> None:
        from tqdm import tqdm

        self.tqdm = tqdm
        self.off = bool(getattr(args, "quiet", False))
        self.errors = errors if errors is not None else []
        self.counted_errors = 0
        self.total_docs = total
        self.docs_done = 0
        self.chunks_done = 0  # of written batches
        self.chunks_now = 0  # embedded so far in the batch at hand
        self.bytes_done = 0  # of written batches
        self.bytes_pending = 0  # of the batch at hand
        self.by_bytes = bool(total_bytes)
        if self.by_bytes:  # the counts are the first frame's postfix already
            self.docs = tqdm(total=total_bytes, desc="ingest", unit="B", unit_scale=True, unit_divisor=1024,
                             file=sys.stderr, disable=self.off or not documents, dynamic_ncols=True,
                             postfix=self._counts(), **EVERY_EVENT)
        else:
            self.docs = tqdm(total=total, desc="ingest", unit=" docs", file=sys.stderr,
                             disable=self.off or not documents, dynamic_ncols=True, **EVERY_EVENT)
        self.chunks = None
        self.summaries = None
        self.layer_counts: dict[int, int] = {}
        self.layer = 0

    # documents and chunks
    def drawn(self, doc) -> None:
        """A document was read into the batch at hand."""
        self.bytes_pending += getattr(doc, "input_bytes", 0) or len(doc.text.encode("utf-8"))

    def documents(self, n: int) -> None:
        """A batch of ``n`` documents is written (the ingest service's progress callback); the
        inputs skipped meanwhile count as done too."""
        skipped = len(self.errors) - self.counted_errors
        self.counted_errors = len(self.errors)
        self.docs_done += n + skipped
        self.bytes_done += self.bytes_pending
        self.bytes_pending = 0
        self.chunks_done += self.chunks_now
        self.chunks_now = 0
        if self.docs is not None:
            self._advance(self.bytes_done if self.by_bytes else self.docs_done)
        self._end_chunks()

    def _advance(self, to: float) -> None:
        """Move the bar to ``to``, its frame showing the counts of now."""
        if self.docs is None:
            return
        self._show_counts()
        if self.docs.total is not None:
            to = min(to, self.docs.total)
        if to > self.docs.n:
            self.docs.update(to - self.docs.n)

    def _counts(self) -> str:
        total = f"/{self.total_docs}" if self.total_docs is not None else ""
        return f"docs {self.docs_done}{total}, chunks {self.chunks_done + self.chunks_now}"

    def _show_counts(self) -> None:
        if self.docs is not None and self.by_bytes:
            self.docs.set_postfix_str(self._counts(), refresh=False)

    def embedding(self, done: int, total: int) -> None:
        if self.off:
            return
        if self.chunks is None or self.chunks.total != total or done == 0:
            self._end_chunks()
            self.chunks = self.tqdm(total=total, desc="  embedding", unit=" chunks", file=sys.stderr, leave=False,
                                    dynamic_ncols=True, **EVERY_EVENT)
        if done > self.chunks.n:
            self.chunks.update(done - self.chunks.n)
        self.chunks_now = done
        if self.by_bytes and total:
            self._advance(self.bytes_done + self.bytes_pending * done / total / 2)

    def stage(self, name: str) -> None:
        if self.chunks is not None:
            self.chunks.set_description(f"  {name}")

    def _end_chunks(self) -> None:
        if self.chunks is not None:
            self.chunks.close()
            self.chunks = None

    # the drain
    def draining(self, message) -> None:
        """A reconcile of ``message.layer`` starts: summaries go to the layer above."""
        self.layer = message.layer + 1
        if self.summaries is None and not self.off:
            self.end_documents()
            self.summaries = self.tqdm(desc="summarize", unit=" summaries", file=sys.stderr, dynamic_ncols=True)
        self._show_layers()

    def summarized(self) -> None:
        self.layer_counts[self.layer] = self.layer_counts.get(self.layer, 0) + 1
        if self.summaries is not None:
            self.summaries.update(1)
            self._show_layers()

    def _show_layers(self) -> None:
        if self.summaries is not None:
            self.summaries.set_postfix_str(", ".join(f"layer {k}: {v}" for k, v in sorted(self.layer_counts.items()))
                                           + f" (now layer {self.layer})", refresh=False)

    def end_documents(self) -> None:
        """Every document is read and written (before the drain): the bars of that part end."""
        self._end_chunks()
        if self.docs is None:
            return
        skipped = len(self.errors) - self.counted_errors
        self.counted_errors = len(self.errors)
        self.docs_done += skipped
        if self.total_docs is not None and self.docs_done != self.total_docs:
            self.total_docs = self.docs_done  # a corpus line was counted that held no document
        if self.by_bytes:  # the bytes of skipped files and lines were never drawn: all are read now
            self._advance(self.docs.total or self.docs.n)
        else:
            self._advance(self.docs_done)
        if not self.by_bytes and self.docs.total is not None and self.docs.n != self.docs.total:
            self.docs.total = self.docs.n
        self.docs.close()
        self.docs = None

    def close(self) -> None:
        self.end_documents()
        if self.summaries is not None:
            self.summaries.set_postfix_str(", ".join(f"layer {k}: {v}" for k, v in sorted(self.layer_counts.items())),
                                           refresh=False)
            self.summaries.close()


class SlicedEmbedder:
    """The engine's embedder, called with at most EMBED_SLICE texts at a time, telling the
    progress how many chunk texts of the call are done."""

    def __init__(self, inner, progress: IngestProgress) -> None:
        self.inner = inner
        self.progress = progress
        self.identity = inner.identity
        self.dim = inner.dim

    def embed(self, texts):
        import numpy as np

        texts = list(texts)
        self.progress.embedding(0, len(texts))
        parts = []
        for start in range(0, len(texts), EMBED_SLICE):
            parts.append(self.inner.embed(texts[start:start + EMBED_SLICE]))
            self.progress.embedding(min(start + EMBED_SLICE, len(texts)), len(texts))
        self.progress.stage("writing")
        return parts[0] if len(parts) == 1 else np.concatenate(parts)


class CountingSummarizer:
    """The engine's summarizer, telling the progress of each summary it writes (every other
    attribute is the summarizer's own, so it revises only if the summarizer can)."""

    def __init__(self, inner, progress: IngestProgress) -> None:
        self.inner = inner
        self.progress = progress

    def __getattr__(self, name: str):
        value = getattr(self.inner, name)
        if name in ("summarize", "revise") and callable(value):
            def counted(*a, **kw):
                result = value(*a, **kw)
                self.progress.summarized()
                return result
            return counted
        return value


def staged(hook, progress: IngestProgress):
    """An ingest hook (the entity graph's) that shows its stage on the chunk bar."""
    def run(engine, nodes):
        progress.stage("entities")
        hook(engine, nodes)
        progress.stage("writing")
    return run
