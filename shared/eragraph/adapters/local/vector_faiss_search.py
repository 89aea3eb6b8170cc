"""Top-k search of the FAISS index, filtered or not.

A filtered search passes FAISS a selector of the allowed int ids, so it returns the true top-k
of the filtered set (not a post-filtered top-k): a bitmap over the layer column for layers, an
``IDSelectorBatch`` for documents, a bitmap of the ids whose attributes match for ``where`` (the
filter compiled to SQL over the id map's attrs column by ``filter_sql``). ``Selectors`` caches
them per filter; the index clears it whenever it changes.

On an IVF index a filtered search scans proportionally more buckets (nprobe divided by the share
of vectors the filter allows, so it sees as many allowed vectors as an unfiltered one), and a
filter allowing at most ``EXACT_MAX`` vectors is answered exactly from their stored vectors.
Neighbours past the k-th are fetched while their score ties with it, so ties are ordered by id,
as in memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import faiss
import numpy as np

from ...domain.filters import Filter, cache_key
from ...domain.ranking import below_floor, rank_score
from .id_map import IdMap
from .vector_faiss_ivf import is_ivf, nprobe, one_thread

EXACT_MAX = 4096  # a filter allowing at most this many vectors is answered from their vectors, exactly
_TIE_PAD = 8  # extra neighbours fetched so ties at the k-th score are ordered by id, as in memory
NO_LAYER = np.iinfo(np.int32).min  # the layer column's value for an int id without a vector

Allowed = tuple[int, Any, Any]  # (number of allowed vectors, SearchParameters, what they point to)


def filter_key(layers: Sequence[int] | None, doc_ids: Sequence[str] | None, where: Filter | None = None) -> tuple:
    return (None if layers is None else tuple(sorted(set(int(x) for x in layers))),
            None if doc_ids is None else tuple(sorted(set(doc_ids))),
            None if where is None else cache_key(where))


def layer_mask(layer_of: np.ndarray, layers: tuple[int, ...]) -> np.ndarray:
    """One bool per int id: its vector is present and in one of ``layers`` (vectorized over
    the layer column, about a millisecond per million ids)."""
    return np.isin(layer_of, np.asarray(layers, dtype=np.int32))


def in_layers(layer_of: np.ndarray, ints: np.ndarray, layers: tuple[int, ...] | None) -> np.ndarray:
    """Those of ``ints`` whose vector is in ``layers`` (all of them for None)."""
    if layers is None or not len(ints):
        return ints
    return ints[np.isin(layer_of[ints], np.asarray(layers, dtype=np.int32))]


def _in_docs(ids: IdMap, layer_of: np.ndarray, doc_ids: tuple[str, ...],
             layers: tuple[int, ...] | None) -> np.ndarray:
    """The int ids of the documents' vectors (in ``layers`` when given): from the map's
    document index, at the cost of those documents, not of the index."""
    return in_layers(layer_of, ids.in_docs(doc_ids), layers)


def _where(ids: IdMap, layer_of: np.ndarray, where: Filter, doc_ids: tuple[str, ...] | None,
           layers: tuple[int, ...] | None) -> np.ndarray:
    """The int ids whose attributes match ``where`` (one SQL scan of the map's attrs column),
    in ``doc_ids`` and ``layers`` when given, ascending."""
    ints = ids.matching(where)
    if doc_ids is not None:
        ints = np.intersect1d(ints, ids.in_docs(doc_ids), assume_unique=True)
    return in_layers(layer_of, ints, layers)


class Selectors:
    """The selectors of the filters searched since the index last changed."""

    def __init__(self) -> None:
        self._cache: dict[tuple, Allowed] = {}

    def clear(self) -> None:
        self._cache.clear()

    def get(self, layers: Sequence[int] | None, doc_ids: Sequence[str] | None, where: Filter | None,
            ids: IdMap, layer_of: np.ndarray, ntotal: int) -> Allowed:
        """(number of allowed vectors, faiss SearchParameters, (the selector they point to, its
        bits, the allowed int ids)) for a filter; cached until the index changes (the selector
        and its bits are held so the C++ object outlives the parameters). A layer filter is a
        bitmap over the int ids (one bit test per scanned vector); a document filter, a batch of
        ids; a ``where`` filter (with any layers and documents), a bitmap of the ids it allows."""
        key = filter_key(layers, doc_ids, where)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        if where is not None:
            allowed = _where(ids, layer_of, where, key[1], key[0])
            mask = np.zeros(len(layer_of), dtype=bool)
            mask[allowed] = True
        elif key[1] is None:
            mask = layer_mask(layer_of, key[0])
            allowed = np.flatnonzero(mask).astype(np.int64)
        else:
            mask, allowed = None, _in_docs(ids, layer_of, key[1], key[0])
        if len(allowed) == 0:
            result: Allowed = (0, None, None)
        elif len(allowed) == ntotal:  # the filter lets everything through
            result = (len(allowed), None, None)
        elif mask is not None:
            bits = np.packbits(mask, bitorder="little")
            selector = faiss.IDSelectorBitmap(len(bits), faiss.swig_ptr(bits))
            result = (len(allowed), faiss.SearchParameters(sel=selector), (selector, bits, allowed))
        else:
            selector = faiss.IDSelectorBatch(allowed)
            result = (len(allowed), faiss.SearchParameters(sel=selector), (selector, None, allowed))
        if len(self._cache) > 256:
            self._cache.clear()
        self._cache[key] = result
        return result


def top_pairs(index: Any, q: np.ndarray, k: int, allowed: Allowed, nprobe_fraction: float,
              min_score: float | None = None) -> list[tuple[float, int]]:
    """(score, int id) of the top k of the ``allowed`` vectors (``q`` one row), and those tied
    with the k-th (unless they rank below ``min_score``); ``allowed`` is ``Selectors.get``'s
    answer, or (ntotal, None, None) for no filter, and allows at least one vector."""
    n_allowed, params, held = allowed
    if is_ivf(index):
        if params is not None and n_allowed <= EXACT_MAX:
            return _top_and_ties(_exact_among(index, q[0], held[2]), k)
        # as many allowed vectors as an unfiltered query sees: more buckets for a filter
        share = n_allowed / max(1, index.ntotal)
        probes = min(index.nlist, int(np.ceil(nprobe(index, nprobe_fraction) / share)))
        sel = None if params is None else params.sel
        params = faiss.SearchParametersIVF(nprobe=probes, sel=sel)
    fetch = min(n_allowed, k + _TIE_PAD)
    # One query gains little from OpenMP threads, and on a busy machine their spin-waits
    # cost tens of ms (vector_faiss_ivf.one_thread: this calling thread's setting only).
    with one_thread():
        while True:
            scores, labels = index.search(q, fetch, params=params)
            pairs = [(float(s), int(i)) for s, i in zip(scores[0], labels[0]) if i >= 0]
            if len(pairs) < min(k, n_allowed) and is_ivf(index) and params.nprobe < index.nlist:
                # the scanned buckets held fewer than k allowed vectors: scan them all
                params = faiss.SearchParametersIVF(nprobe=index.nlist, sel=params.sel)
                continue
            if _complete(pairs, k, fetch, n_allowed, min_score):
                break
            fetch = min(n_allowed, fetch * 2)
    return pairs


def _complete(pairs: list[tuple[float, int]], k: int, fetch: int, n_allowed: int, min_score: float | None) -> bool:
    """Whether ``fetch`` neighbours settle the top k: keep fetching while the k-th score ties
    with the last fetched one, unless that tie ranks below ``min_score``."""
    return (fetch >= n_allowed or len(pairs) < fetch or len(pairs) <= k
            or rank_score(pairs[-1][0]) < rank_score(pairs[k - 1][0]) or below_floor(pairs[-1][0], min_score))


def top_pairs_many(index: Any, qs: np.ndarray, k: int, allowed: Allowed, nprobe_fraction: float,
                   min_score: float | None = None) -> list[list[tuple[float, int]]]:
    """``top_pairs`` of each row of ``qs``, from one FAISS search of all of them (or one
    product with the allowed vectors, for a narrow filter on IVF); a row whose answer that
    search leaves unsettled (a tie at the cut, an IVF probe short of k) is searched again alone."""
    n_allowed, params, held = allowed
    if is_ivf(index):
        if params is not None and n_allowed <= EXACT_MAX:
            scores = index.reconstruct_batch(held[2]) @ qs.T
            return [_top_and_ties([(float(s), int(i)) for s, i in zip(col, held[2])], k) for col in scores.T]
        share = n_allowed / max(1, index.ntotal)
        probes = min(index.nlist, int(np.ceil(nprobe(index, nprobe_fraction) / share)))
        params = faiss.SearchParametersIVF(nprobe=probes, sel=None if params is None else params.sel)
    fetch = min(n_allowed, k + _TIE_PAD)
    with one_thread():
        scores, labels = index.search(qs, fetch, params=params)
    out = []
    for r, (srow, lrow) in enumerate(zip(scores, labels)):
        pairs = [(float(s), int(i)) for s, i in zip(srow, lrow) if i >= 0]
        short = len(pairs) < min(k, n_allowed) and is_ivf(index)
        if short or not _complete(pairs, k, fetch, n_allowed, min_score):
            pairs = top_pairs(index, qs[r:r + 1], k, allowed, nprobe_fraction, min_score)
        out.append(pairs)
    return out


def _top_and_ties(pairs: list[tuple[float, int]], k: int) -> list[tuple[float, int]]:
    """The top k of an exact answer and those tied with the k-th: names are looked up for
    these only."""
    if len(pairs) > k:
        pairs.sort(key=lambda p: rank_score(p[0]), reverse=True)
        pairs = [p for p in pairs if rank_score(p[0]) >= rank_score(pairs[k - 1][0])]
    return pairs


def _exact_among(index: Any, q: np.ndarray, allowed: np.ndarray) -> list[tuple[float, int]]:
    """(score, int id) of every allowed vector, from their stored rows: a narrow filter's
    exact answer, at a cost of the allowed set, not the index."""
    scores = index.reconstruct_batch(allowed) @ q
    return [(float(s), int(i)) for s, i in zip(scores, allowed)]
