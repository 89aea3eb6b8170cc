"""The local document pipeline (ports.uploads.DocumentPipeline): a worker thread of the serving
process (``eragraph serve``) that ingests and removes the documents submitted through the API.

A submitted document's bytes are already in the store's blob store under the key an upload to
the documents bucket would have (services.uploads), and its status is ``received``. The worker
takes the keys in order, in batches, and for each batch holds the store's writer lock (the lock
``eragraph ingest`` holds: a CLI ingest and the server take turns): it reads each key exactly as
the ingest function reads an object of the bucket (services.object_events: size first, then the
bytes by their content, PDF, DOCX, HTML, CSV or text, and the sidecar's attributes; binary,
empty, not UTF-8 or too large: state ``failed`` with the reason), keeps the text read under the
key ``eragraph rebuild`` reads (services.sources.text_key), then drains the summary bus
(services.resummarize.drain). So a document goes received -> indexed -> done while a client polls
its status. A removal is the same: under the lock, the document leaves (services.remove), then
its bytes, sidecar and kept text, then the drain. Sources are the keys themselves.

Nothing is lost when the process dies mid-way (what was chosen): a removal is recorded in the
store's meta (``upload-remove:<doc id>``) before it is accepted, and a document's status is
``received`` until it is read. The worker's first job, per tenant (at start for the served one,
and before the first job of any other), is ``recover``: it redoes the recorded removals,
re-queues every ``received`` document whose bytes are stored (one whose bytes are not is
``failed``, "submit it again"), and announces again the layers a dead drain left dirty
(resummarize.requeue_dirty), which its drain then reconciles. A restarted server therefore
finishes what the killed one accepted; ``eragraph ingest`` meanwhile reconciles the dirty layers
(as it always does) but leaves the ``received`` uploads to the server."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import Any

from ..domain.doc_status import RECEIVED
from ..domain.refusals import reason, reason_of
from . import doc_status, remove, resummarize
from .engine import Engine
from .object_events import ObjectEvents, new_counts
from .sources import SIDECAR_SUFFIX, text_key
from .uploads import upload_key

REMOVING = "upload-remove:"  # meta key prefix: a removal accepted and not yet done
BATCH = 25  # keys read under one hold of the lock, before one drain

LOG = logging.getLogger("eragraph.uploads")


def is_key(source: str) -> bool:
    """Whether a source names an object key of the blob store (not a file path or a URL)."""
    return bool(source) and not source.startswith("/") and "\\" not in source and "://" not in source \
        and all(part not in ("", ".", "..") for part in source.split("/"))


def needs_recovery(engine: Engine) -> bool:
    """Whether a tenant's store holds what a stopped worker left: a removal, a ``received``
    document, or a dirty layer."""
    return bool(engine.graph.meta_keys(REMOVING) or engine.graph.meta_keys("dirty:")
                or any(s.state == RECEIVED for s in engine.graph.doc_statuses("")))


class UploadWorker:
    """``engines(tenant)``: the engine the worker writes with (the local profile builds one of
    its own per tenant, as another process would; the memory profile hands the served one);
    ``lock``: the store's writer lock (a context manager; None: no other writer exists)."""

    def __init__(self, engines: Callable[[str], Engine], lock: Any = None, log: Any = None) -> None:
        self.engines = engines
        self.lock = lock if lock is not None else nullcontext()
        self.log = log or LOG
        self.events = ObjectEvents(None, self.log)
        self.jobs: queue.Queue = queue.Queue()
        self._pending = 0
        self._idle = threading.Condition()
        self._recovered: set[str] = set()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    # ----- the pipeline (ports.uploads.DocumentPipeline) -----
    def key_for(self, tenant: str, name: str) -> str:
        return upload_key(tenant, name)

    def source_of(self, engine: Engine, key: str) -> str:
        return key

    def key_of(self, engine: Engine, source: str) -> str | None:
        return source if is_key(source) else None

    def ingest(self, engine: Engine, keys: Sequence[str]) -> None:
        for key in keys:
            self._put(engine.tenant, ("ingest", key))

    def remove(self, engine: Engine, doc_id: str, key: str | None) -> None:
        engine.graph.put_meta(REMOVING + doc_id, {"key": key})  # before the 202: a restart redoes it
        self._put(engine.tenant, ("remove", doc_id, key))

    # ----- the thread -----
    def start(self, served: Sequence[Engine] = ()) -> UploadWorker:
        """Start the thread (once), recovering first the tenants of the ``served`` engines that
        left something to finish (read with the served engine: a store with nothing left over
        costs the worker no engine of its own until its first job)."""
        for engine in served:
            if needs_recovery(engine):
                self._recover_first(engine.tenant)
            else:
                with self._start_lock:
                    self._recovered.add(engine.tenant)
        self._ensure_thread()
        return self

    def _ensure_thread(self) -> None:
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="eragraph-uploads", daemon=True)
                self._thread.start()

    def _recover_first(self, tenant: str) -> None:
        with self._start_lock:
            if tenant in self._recovered:
                return
            self._recovered.add(tenant)
        self._enqueue((tenant, ("recover",)))

    def _put(self, tenant: str, job: tuple) -> None:
        self._recover_first(tenant)
        self._enqueue((tenant, job))
        self._ensure_thread()

    def _enqueue(self, item: tuple) -> None:
        with self._idle:
            self._pending += 1
        self.jobs.put(item)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until every job queued so far is done; False on timeout."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    def close(self, timeout: float = 30.0) -> None:
        """Stop the thread after the jobs queued so far."""
        if self._thread is not None:
            self.jobs.put(None)
            self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            first = self.jobs.get()
            if first is None:
                return
            batch = [first]
            while len(batch) < BATCH:
                try:
                    more = self.jobs.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self.jobs.put(None)  # stop after this batch
                    break
                batch.append(more)
            try:
                self._process(batch)
            except Exception:  # noqa: BLE001 (the thread lives on; each job recorded its own failure)
                self.log.exception("upload batch failed")
            finally:
                with self._idle:
                    self._pending -= len(batch)
                    self._idle.notify_all()

    def _process(self, batch: list[tuple]) -> None:
        with self.lock:
            touched: dict[str, Engine] = {}
            for tenant, job in batch:
                engine = touched.get(tenant) or self.engines(tenant)
                touched[tenant] = engine
                try:
                    getattr(self, f"_{job[0]}")(engine, *job[1:])
                except Exception as exc:  # noqa: BLE001 (one job's fault is its own)
                    self.log.exception("upload job failed", extra={"job": job[0]})
                    if job[0] == "ingest":
                        doc_status.record_failed(engine, job[1], reason_of(exc))  # the detail: the line above
            for engine in touched.values():
                resummarize.drain(engine)

    # ----- the jobs -----
    def _ingest(self, engine: Engine, key: str) -> None:
        doc = self.events.ingest_object(engine, key, self.source_of(engine, key), "", new_counts(), "api")
        if doc is not None and engine.graph.get_document(doc.resolved_id) is not None:
            engine.blobs.put(text_key(doc.resolved_id), doc.text.encode("utf-8"))  # for eragraph rebuild

    def _remove(self, engine: Engine, doc_id: str, key: str | None) -> None:
        if engine.graph.get_document(doc_id) is not None:
            remove.remove(engine, [doc_id])
        doc_status.delete(engine, doc_id)
        if key is not None:
            engine.blobs.delete(key)
            engine.blobs.delete(key + SIDECAR_SUFFIX)
        engine.blobs.delete(text_key(doc_id))
        engine.graph.delete_meta(REMOVING + doc_id)

    def _recover(self, engine: Engine) -> None:
        for meta in engine.graph.meta_keys(REMOVING):
            entry = engine.graph.get_meta(meta) or {}
            self._remove(engine, meta[len(REMOVING):], entry.get("key"))
        for status in engine.graph.doc_statuses(""):
            if status.state != RECEIVED or not is_key(status.source):
                continue
            try:
                engine.blobs.size(status.source)
            except (KeyError, ValueError):
                doc_status.record_failed(engine, status.source, reason("bytes_lost"), status.doc_id)
                continue
            self._ingest(engine, status.source)
        resummarize.requeue_dirty(engine)
