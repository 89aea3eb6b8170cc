"""The default summarizer: extractive, no LLM. From a segment's members it keeps whole
sentences only (a chunk's leading title line, and the pieces a chunk's token window cut off at
either end, are not sentences), picks them by maximal marginal relevance -- TF-IDF cosine to the
segment centroid, minus a penalty for the most similar sentence already picked, and never one
above ``duplicate`` similarity to a picked one -- until the summary token budget is filled, and
writes them grouped by source document (one line per document, documents in member order,
sentences in their original order). Similarity is lexical (TF-IDF over the sentences of the
segment), not the embedder's vectors: it costs no model call, is deterministic, and is the same
whichever embedder the store uses. Its float sums are ``math.fsum`` (correctly rounded): the
built-in ``sum`` of floats rounds differently from Python 3.12 on (compensated summation), and a
near-tie in MMR then picked another sentence on Lambda (3.12) than on a 3.11 laptop.

Per call it records the tokens an LLM prompt would have carried in (instruction + all children)
and out (the summary), so cost comparisons between incremental growth and rebuilds are priced as
an LLM would be. ``revise`` updates an earlier summary from the children that joined and left
its segment, priced the same way (see services.resummarize for when it is used)."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from ..domain.text import sentence_key, split_sentences
from ..ports import MemberSource, SummaryResult, Tokenizer

PROMPT = ("Summarize the following passages into one concise paragraph that keeps the key "
          "entities, facts and relations.\n\n")
REVISE_PROMPT = ("Update the summary below: passages marked NEW joined its group and passages marked "
                 "GONE left it. Keep what still holds, drop what only the gone passages said, add "
                 "the key entities, facts and relations of the new ones.\n\n")
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset("""a an the and or of to in on at for by with from as is are was were be been
being it its this that these those he she they his her their them we you i not no but if then
than so such into over after before about also which who whom whose what when where while""".split())
# a whole sentence: starts with a capital (after an opening quote or bracket; not a digit, which far more
# often opens a piece cut mid-sentence at a date, as a revision's joined text may begin), ends with
# . ! or ? (before a closing quote or bracket), and has at least MIN_WORDS words
_STARTS = re.compile(r"^[\"'(\[\u201c\u2018]*[A-Z\u00c0-\u00de]")
_ENDS = re.compile(r"[.!?][\"')\]\u201d\u2019]*$")
MIN_WORDS = 3


def _terms(sentence: str) -> list[str]:
    return [w for w in _WORD.findall(sentence.lower()) if w not in _STOP and len(w) > 1]


def is_whole_sentence(piece: str) -> bool:
    """A piece of text that reads as a sentence on its own (not a title, not a cut-off end)."""
    piece = piece.strip()
    return bool(_STARTS.match(piece) and _ENDS.search(piece)) and len(piece.split()) >= MIN_WORDS


def member_sentences(text: str, at_start: bool = True) -> list[str]:
    """The whole sentences of one member text, in order. A text that does not start where its
    document starts loses its first piece (the token window began mid-sentence); a title line
    and a piece cut off at the end fail ``is_whole_sentence``."""
    pieces = split_sentences(text)
    if not at_start:
        pieces = pieces[1:]
    return [p for p in pieces if is_whole_sentence(p)]


@dataclass(frozen=True)
class _Sentence:
    text: str
    group: int  # groups are numbered in the order they first appear
    weight: float


def _groups(sources: Sequence[MemberSource] | None, n: int) -> list[tuple[int, bool]]:
    """(group number, at_start) per member: members of one document share a number."""
    if sources is None:
        return [(i, True) for i in range(n)]
    if len(sources) != n:
        raise ValueError(f"{len(sources)} sources for {n} texts")
    numbers: dict[str, int] = {}
    return [(numbers.setdefault(src.group, len(numbers)), src.at_start) for src in sources]


class ExtractiveSummarizer:
    identity = "extractive-tfidf-v2"

    def __init__(self, tokenizer: Tokenizer, redundancy: float = 0.5, duplicate: float = 0.7) -> None:
        self.tokenizer = tokenizer
        self.redundancy = redundancy
        self.duplicate = duplicate  # cosine at or above which a sentence repeats a picked one

    def summarize(self, texts: Sequence[str], max_tokens: int,
                  sources: Sequence[MemberSource] | None = None) -> SummaryResult:
        tokens_in = self.tokenizer.count(PROMPT) + sum(self.tokenizer.count(t) for t in texts)
        members = sorted(zip(_groups(sources, len(texts)), texts),
                         key=lambda m: (m[0][0], not m[0][1]))  # a document's first chunk first
        units = [_Sentence(s, group, 1.0) for (group, at_start), text in members
                 for s in member_sentences(text, at_start)]
        if not units:  # nothing reads as a sentence (a list, a table): fall back to its pieces
            units = [_Sentence(s, i, 1.0) for i, t in enumerate(texts) for s in split_sentences(t)]
        text = self._select(units, max_tokens)
        return SummaryResult(text=text, tokens_in=tokens_in, tokens_out=self.tokenizer.count(text) if text else 0)

    def revise(self, previous: str, added: Sequence[str], removed: Sequence[str], max_tokens: int,
               previous_share: float = 0.5) -> SummaryResult:
        """Update ``previous`` for children that joined (``added``) and left (``removed``).
        Priced as an LLM would see it: the revision instruction, the previous summary and the
        joined and departed children. A previous sentence that occurs in a departed child and
        in no joined one is dropped; the rest compete with the joined children's sentences,
        the previous ones carrying ``previous_share`` of the centroid's weight (the share of
        the segment they stand for), so the segment's old majority is not drowned out. The
        previous summary's lines stay its groups; each joined child is a group after them."""
        tokens_in = (self.tokenizer.count(REVISE_PROMPT) + self.tokenizer.count(previous)
                     + sum(self.tokenizer.count(t) for t in added)
                     + sum(self.tokenizer.count(t) for t in removed))
        gone = {sentence_key(s) for t in removed for s in split_sentences(t)}
        still = {sentence_key(s) for t in added for s in split_sentences(t)}
        kept: list[tuple[int, str]] = []
        lines = [line for line in previous.split("\n") if line.strip()]
        for g, line in enumerate(lines):
            kept += [(g, s) for s in split_sentences(line)
                     if sentence_key(s) not in gone or sentence_key(s) in still]
        seen = {sentence_key(s) for _, s in kept}
        fresh = [(len(lines) + i, s) for i, t in enumerate(added) for s in member_sentences(t)
                 if sentence_key(s) not in seen]
        share = min(1.0, max(0.0, previous_share)) if kept and fresh else (1.0 if kept else 0.0)
        units = ([_Sentence(s, g, share / len(kept)) for g, s in kept]
                 + [_Sentence(s, g, (1.0 - share) / len(fresh)) for g, s in fresh])
        text = self._select(units, max_tokens)
        return SummaryResult(text=text, tokens_in=tokens_in, tokens_out=self.tokenizer.count(text) if text else 0)

    def _select(self, units: list[_Sentence], max_tokens: int) -> str:
        """Maximal marginal relevance under the token budget: the most central sentence
        (weighted TF-IDF centroid) less ``redundancy`` times its cosine to the closest one
        already picked, never one at or above ``duplicate`` cosine to a picked one (nor a
        repeat of one). Written one line per group, groups and sentences in input order."""
        if not units:
            return ""
        n = len(units)
        vecs = tfidf_vectors([u.text for u in units])
        centroid: Counter = Counter()
        for v, u in zip(vecs, units):
            centroid.update({t: x * u.weight for t, x in v.items()})
        cnorm = math.sqrt(math.fsum(x * x for x in centroid.values())) or 1.0
        central = [cosine(v, centroid) / cnorm for v in vecs]
        lengths = [self.tokenizer.count(u.text) for u in units]
        closest = [0.0] * n  # cosine to the most similar picked sentence
        keys = [sentence_key(u.text) for u in units]
        chosen: list[int] = []
        used = 0
        candidates = set(range(n))
        while candidates:
            best, best_score = -1, -math.inf
            for i in sorted(candidates):
                if used + lengths[i] > max_tokens:
                    continue
                score = central[i] - self.redundancy * closest[i]
                if score > best_score:
                    best, best_score = i, score
            if best < 0:
                break
            chosen.append(best)
            used += lengths[best]
            candidates.discard(best)
            for i in list(candidates):
                closest[i] = max(closest[i], cosine(vecs[i], vecs[best]))
                if closest[i] >= self.duplicate or keys[i] == keys[best]:
                    candidates.discard(i)
        if not chosen:  # every sentence is longer than the budget: the most central one, cut
            i = max(range(n), key=lambda j: central[j])
            spans = self.tokenizer.offsets(units[i].text)[:max_tokens]
            return units[i].text[: spans[-1][1]] if spans else units[i].text
        text = self._render(units, chosen)
        while self.tokenizer.count(text) > max_tokens and len(chosen) > 1:
            chosen.pop()  # the joined text counts more than its sentences (a tokenizer's merges)
            text = self._render(units, chosen)
        return text

    @staticmethod
    def _render(units: list[_Sentence], chosen: list[int]) -> str:
        lines: dict[int, list[str]] = {}
        for i in sorted(chosen):  # units are in input order, their groups in first-seen order
            lines.setdefault(units[i].group, []).append(units[i].text)
        return "\n".join(" ".join(lines[g]) for g in sorted(lines))


def tfidf_vectors(sentences: Sequence[str]) -> list[dict[str, float]]:
    """Unit-length TF-IDF vectors of ``sentences``, IDF taken over these sentences."""
    bags = [Counter(_terms(s)) for s in sentences]
    df = Counter(term for bag in bags for term in bag)
    idf = {t: math.log((1 + len(bags)) / (1 + c)) + 1.0 for t, c in df.items()}
    vecs = []
    for bag in bags:
        v = {t: (1 + math.log(c)) * idf[t] for t, c in bag.items()}
        norm = math.sqrt(math.fsum(x * x for x in v.values())) or 1.0
        vecs.append({t: x / norm for t, x in v.items()})
    return vecs


def cosine(a: dict, b: dict) -> float:
    """Cosine of two unit-length sparse vectors."""
    if len(a) > len(b):
        a, b = b, a
    return math.fsum(x * b.get(t, 0.0) for t, x in a.items())
