"""Beam search over chains of sentences linked by shared entities (PropRAG, Wang & Han 2025,
arXiv 2504.18070, with LinearRAG's sentences standing in for propositions): the ``paths``
retrieval mode's search, free of I/O.

A path is a chain of distinct sentences s1 -> s2 -> ... in which each sentence shares an entity
with the one before it (a 2-hop question "the team of Anna Benson's spouse" is the chain "Anna
Benson married Kris Benson" -> "Kris Benson pitched for the Mets"). Its score is the cosine of
the question with the mean of its sentences' vectors (PropRAG's "average" combination), plus
``mass`` times the mean prior of its sentences' passages (the PageRank mass of the subgraph the
search runs in, scaled to [0, 1]). The search starts from the seed sentences, keeps the
``width`` best paths of each length and stops at ``depth`` sentences; every passage is credited
with the best score of any path (of any length) through one of its sentences.

Cost: n sentences, E entity mentions among them; the links are one sparse product (n x n at
most); each step scores at most ``width`` x n candidate paths, vectorised: O(depth x width x n
x dim) for the scores."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PathResult:
    passage_score: np.ndarray            # per passage: the best path score through it (-inf: none)
    paths: list[tuple[tuple[int, ...], float]]  # the best paths found, best first (sentence positions)


def _links(mention) -> np.ndarray:
    """Sentence x sentence: True where two distinct sentences share an entity. ``mention``: a
    scipy sparse matrix (the exact execution's) or a numpy array (the stored one's: the Lambda
    layers ship no scipy, so nothing here imports it)."""
    if hasattr(mention, "tocsr"):
        m = mention.tocsr().astype(np.float64)
        m.data[:] = 1.0
        a = (m @ m.T).toarray() > 0
    else:
        m = (np.asarray(mention) != 0).astype(np.float64)
        a = (m @ m.T) > 0
    np.fill_diagonal(a, False)
    return a


def beam_paths(vectors: np.ndarray, query: np.ndarray, mention, passage_of: Sequence[int] | np.ndarray,
               prior: np.ndarray, seeds: Sequence[int], width: int, depth: int, mass: float,
               keep: int = 10) -> PathResult:
    """Best sentence paths for ``query``.

    ``vectors``: n x dim sentence vectors (unit length, or zero for a sentence without one);
    ``mention``: n x E sentence-entity incidence (any nonzero counts); ``passage_of``: each
    sentence's passage position; ``prior``: per passage, in [0, 1]; ``seeds``: the sentences
    paths start from; ``width`` paths kept per length, up to ``depth`` sentences."""
    vectors = np.asarray(vectors, dtype=np.float64)
    q = np.asarray(query, dtype=np.float64)
    passage_of = np.asarray(passage_of, dtype=np.int64)
    prior = np.asarray(prior, dtype=np.float64)
    n = len(vectors)
    best = np.full(len(prior), -np.inf)
    found: list[tuple[tuple[int, ...], float]] = []
    seeds = [int(s) for s in dict.fromkeys(seeds) if 0 <= int(s) < n]
    if not seeds or width <= 0 or depth <= 0:
        return PathResult(best, found)
    links = _links(mention) if depth > 1 else None
    sent_prior = prior[passage_of]
    qv = vectors @ q                      # per sentence: q . v
    sq = np.einsum("ij,ij->i", vectors, vectors)  # per sentence: |v|^2

    # a beam entry: (path, sum of vectors, sum of priors)
    def score(sum_vec_q: np.ndarray, sum_norm2: np.ndarray, prior_sum: np.ndarray, length: int) -> np.ndarray:
        cos = np.where(sum_norm2 > 0, sum_vec_q / np.sqrt(np.maximum(sum_norm2, 1e-18)), 0.0)
        return cos + mass * prior_sum / length

    s0 = score(qv[seeds], sq[seeds], sent_prior[seeds], 1)
    order = np.argsort(-s0, kind="stable")[:width]
    beams = [((seeds[i],), vectors[seeds[i]].copy(), float(sent_prior[seeds[i]])) for i in order]
    for i in range(len(seeds)):  # every seed credits its passage, kept in the beam or not
        p = passage_of[seeds[i]]
        best[p] = max(best[p], s0[i])
    found += [((seeds[i],), float(s0[i])) for i in order]
    for length in range(2, depth + 1):
        cand_scores: list[np.ndarray] = []
        cand_parts: list[tuple[int, np.ndarray]] = []
        for bi, (path, vsum, psum) in enumerate(beams):
            nxt = np.flatnonzero(links[path[-1]])
            if len(nxt) == 0:
                continue
            nxt = nxt[~np.isin(nxt, path)]
            if len(nxt) == 0:
                continue
            # |vsum + v|^2 = |vsum|^2 + 2 vsum.v + |v|^2 ; q.(vsum + v) = q.vsum + q.v
            sc = score(float(vsum @ q) + qv[nxt], float(vsum @ vsum) + 2.0 * (vectors[nxt] @ vsum) + sq[nxt],
                       psum + sent_prior[nxt], length)
            cand_parts.append((bi, nxt))
            cand_scores.append(sc)
        if not cand_scores:
            break
        flat = np.concatenate(cand_scores)
        owner = np.concatenate([np.full(len(nxt), bi) for bi, nxt in cand_parts])
        sent = np.concatenate([nxt for _, nxt in cand_parts])
        # credit every passage on every candidate path, vectorised: the new sentence's passage
        # takes the candidate's score, each beam's own passages the best of its extensions
        np.maximum.at(best, passage_of[sent], flat)
        beam_best = np.full(len(beams), -np.inf)
        np.maximum.at(beam_best, owner, flat)
        for o in np.flatnonzero(np.isfinite(beam_best)):
            on_path = passage_of[list(beams[o][0])]
            best[on_path] = np.maximum(best[on_path], beam_best[o])
        # the next beam: the best distinct sentence sets (a chain and its reverse are one path)
        new_beams = []
        seen: set[frozenset[int]] = set()
        for i in np.argsort(-flat, kind="stable"):
            path = beams[owner[i]][0] + (int(sent[i]),)
            key = frozenset(path)
            if key in seen:
                continue
            seen.add(key)
            vsum, psum = beams[owner[i]][1], beams[owner[i]][2]
            new_beams.append((path, vsum + vectors[sent[i]], psum + float(sent_prior[sent[i]])))
            found.append((path, float(flat[i])))
            if len(new_beams) >= width:
                break
        beams = new_beams
    found.sort(key=lambda x: -x[1])
    return PathResult(best, found[:keep])


def seed_sentences(similarity: np.ndarray, mention, seed_entities: Sequence[int], width: int) -> list[int]:
    """The sentences paths start from: the ``width`` most similar to the question, and the
    ``width`` most similar among those naming one of the question's entities (positions of
    ``mention``'s columns; a scipy sparse matrix or a numpy array, as ``_links``)."""
    sim = np.asarray(similarity, dtype=np.float64)
    top = list(np.argsort(-sim, kind="stable")[:width])
    if len(seed_entities):
        if hasattr(mention, "tocsc"):
            m = mention.tocsc()
            named = np.unique(np.concatenate([m.indices[m.indptr[e]:m.indptr[e + 1]] for e in seed_entities]))
        else:
            named = np.flatnonzero((np.asarray(mention)[:, list(seed_entities)] != 0).any(axis=1))
        if len(named):
            top += list(named[np.argsort(-sim[named], kind="stable")[:width]])
    return [int(i) for i in dict.fromkeys(top)]


def rrf_fuse(first: Sequence[str], second: Sequence[str], weight: float, k: int = 10) -> list[tuple[str, float]]:
    """Reciprocal rank fusion of two rankings: 1 / (k + rank) from ``first`` plus ``weight`` /
    (k + rank) from ``second`` (ranks from 1); ties keep ``first``'s order. k = 10 rather than the usual
    60: the lists are a subgraph's few dozen passages, and a rank near the top should count."""
    score: dict[str, float] = {}
    for r, key in enumerate(first, 1):
        score[key] = score.get(key, 0.0) + 1.0 / (k + r)
    for r, key in enumerate(second, 1):
        score[key] = score.get(key, 0.0) + weight / (k + r)
    head = set(first)
    pos = {key: i for i, key in enumerate(list(first) + [x for x in second if x not in head])}
    return sorted(score.items(), key=lambda x: (-x[1], pos[x[0]]))
