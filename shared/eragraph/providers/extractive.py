"""The default summarizer: extractive, no LLM. From a segment's members it keeps whole
sentences only (a chunk's leading title line, and the pieces a chunk's token window cut off at
either end, are not sentences), picks them by maximal marginal relevance -- TF-IDF cosine to the
segment centroid, minus a penalty for the most similar sentence already picked, and never one
above ``duplicate`` similarity to a picked one -- until the summary token budget is filled, and
writes them grouped by source document (one line per document, documents in member order,
sentences in their original order). A line starts with its document's title as a label
(``Title — sentence sentence``) when the document has one (a chunk's leading title line); a
summary of summaries reads the labels back, so a document's sentences from several child
summaries share one labelled line and the titles, which name what the sentences are about,
survive every layer. Similarity is lexical (TF-IDF over the sentences of the
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

from ..domain.text import sentence_key, split_sentences, whole_pieces
from ..ports.providers import Tokenizer
from ..ports.records import MemberSource, Summary

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
LABEL_SEP = " \u2014 "  # "Title — sentence sentence"
LABEL_MAX_WORDS = 12


def _terms(sentence: str) -> list[str]:
    return [w for w in _WORD.findall(sentence.lower()) if w not in _STOP and len(w) > 1]


def is_whole_sentence(piece: str) -> bool:
    """A piece of text that reads as a sentence on its own (not a title, not a cut-off end)."""
    piece = piece.strip()
    return bool(_STARTS.match(piece) and _ENDS.search(piece)) and len(piece.split()) >= MIN_WORDS


def is_label(piece: str) -> bool:
    """A title that can label a line: a few words on one line holding no whole sentence before
    its end ("John N. Scales" and "Everton F.C." are titles, "He said so. Then" is not)."""
    piece = piece.strip()
    return bool(piece) and "\n" not in piece and len(piece.split()) <= LABEL_MAX_WORDS \
        and LABEL_SEP.strip() not in piece \
        and not any(is_whole_sentence(p) for p in split_sentences(piece)[:-1])


def split_label(line: str) -> tuple[str, str]:
    """(label, rest) of one summary line written ``Label — sentence ...``; ("", line) when the
    line carries no label."""
    head, sep, rest = line.strip().partition(LABEL_SEP)
    if sep and is_label(head) and _STARTS.match(rest):
        return head.strip(), rest.strip()
    return "", line.strip()


def title_line(text: str, at_start: bool = True, after: str = "\n\n") -> str:
    """The title of a text that starts where its document starts with a short paragraph of one
    line, a blank line and more text (domain.text.titled_text writes it so; a revision's
    sentences, one a line, have it on a line of its own: ``after="\\n"``); "" otherwise."""
    first, sep, rest = text.strip().partition(after)
    first = first.strip()
    if after != "\n\n" and not (_STARTS.match(first) and not _ENDS.search(first)):
        return ""  # without the blank line, a piece a chunk window cut ("east - southeast.") is no title
    if at_start and sep and rest.strip() and is_label(first):
        return first
    return ""


def labelled_sentences(text: str, at_start: bool = True, labelled: bool = False,
                       inherit: bool = False, at_end: bool = True) -> list[tuple[str, str]]:
    """(label, sentence) for the whole sentences of one member text, in order. A text that
    does not start where its document starts loses its first piece (the token window began
    mid-sentence), and one that may not end where its document ends (``at_end`` False: a full
    token window) its last piece; a piece cut off at the end fails ``is_whole_sentence``
    too, unless it happens to end like a sentence. A text that starts
    at its document's start with a short line of its own (a title) labels every sentence with
    it. ``labelled``: the text is a summary (or a revision's sentences), whose lines may open
    with ``Label — ``; such a label holds for its own line, or until the next label with
    ``inherit`` (a revision's sentences come one a line)."""
    lines = [line.strip() for line in text.split("\n") if line.strip()]
    out: list[tuple[str, str]] = []
    label = ""
    title = title_line(text, at_start, "\n" if inherit else "\n\n")
    for i, line in enumerate(lines):
        if i == 0 and title:
            label = title
            continue
        found = ""
        if labelled:
            found, line = split_label(line)
        if found or (labelled and not inherit):
            label = found
        pieces = split_sentences(line)
        if i == len(lines) - 1 and not at_end:
            pieces = pieces[:-1]
        if i == 0 and not at_start:
            pieces = pieces[1:]
        out += [(label, p) for p in pieces if is_whole_sentence(p)]
    return out


def _fallback_pieces(text: str, src: MemberSource) -> list[str]:
    """A member's pieces when no member has a whole sentence: a chunk's but its title line and
    the piece its window cut at its start."""
    if src.summary:
        return split_sentences(text)
    title = title_line(text, src.at_start)
    return [p for p in whole_pieces(text, src.at_start, src.at_end) if p != title]


def member_sentences(text: str, at_start: bool = True) -> list[str]:
    """The whole sentences of one member text, in order (see ``labelled_sentences``)."""
    return [s for _, s in labelled_sentences(text, at_start, labelled=True)]


def summary_lines(text: str) -> list[tuple[str, list[str]]]:
    """A summary's lines as (label, sentences)."""
    return [(label, split_sentences(rest)) for label, rest in
            (split_label(line) for line in text.split("\n") if line.strip())]


@dataclass(frozen=True)
class _Sentence:
    text: str
    group: int  # groups are numbered in the order they first appear
    weight: float


class _Groups:
    """Group numbers in first-seen order, and each group's label (its first non-empty one)."""

    def __init__(self) -> None:
        self.numbers: dict[object, int] = {}
        self.labels: dict[int, str] = {}

    def number(self, key: object, label: str = "") -> int:
        g = self.numbers.setdefault(key, len(self.numbers))
        if label and not self.labels.get(g):
            self.labels[g] = label
        return g


class ExtractiveSummarizer:
    identity = "extractive-tfidf-v3"

    def __init__(self, tokenizer: Tokenizer, redundancy: float = 0.5, duplicate: float = 0.7) -> None:
        self.tokenizer = tokenizer
        self.redundancy = redundancy
        self.duplicate = duplicate  # cosine at or above which a sentence repeats a picked one

    def summarize(self, texts: Sequence[str], max_tokens: int,
                  sources: Sequence[MemberSource] | None = None) -> Summary:
        tokens_in = self.tokenizer.count(PROMPT) + sum(self.tokenizer.count(t) for t in texts)
        if sources is None:
            sources = [MemberSource(f"#{i}") for i in range(len(texts))]
        if len(sources) != len(texts):
            raise ValueError(f"{len(sources)} sources for {len(texts)} texts")
        order: dict[str, int] = {}
        for src in sources:
            order.setdefault(src.group, len(order))
        members = sorted(zip(sources, texts), key=lambda m: (order[m[0].group], not m[0].at_start))
        groups = _Groups()
        units = []
        for src, text in members:  # a document's first chunk first, documents in member order
            pairs = labelled_sentences(text, src.at_start, labelled=src.summary, at_end=src.at_end)
            if not src.summary:  # the title labels the document's sentences in later chunks too
                groups.number(("doc", src.group), title_line(text, src.at_start))
            for label, s in pairs:
                # a chunk's sentences group under its document; a summary's under their label
                # (one document's sentences from several child summaries meet on one line), its
                # unlabelled ones under the summary
                key = ("doc", src.group) if not src.summary else (
                    ("label", label) if label else ("summary", src.group))
                units.append(_Sentence(s, groups.number(key, label), 1.0))
        if not units:  # nothing reads as a sentence (a list, a table): fall back to its pieces,
            # without a chunk's title line or the piece its token window cut at its start,
            # where other pieces are left
            units = [_Sentence(s, groups.number(("text", i)), 1.0)
                     for i, (src, t) in enumerate(members) for s in _fallback_pieces(t, src)]
        for cut in (False, True):  # then the cut pieces too, then the titles too
            if not units:
                units = [_Sentence(s, groups.number(("text", i)), 1.0) for i, (src, t) in enumerate(members)
                         for s in split_sentences(t)
                         if cut or src.summary or s != title_line(t, src.at_start)]
        text = self._select(units, max_tokens, groups.labels)
        return Summary(text=text, tokens_in=tokens_in, tokens_out=self.tokenizer.count(text) if text else 0)

    def revise(self, previous: str, added: Sequence[str], removed: Sequence[str], max_tokens: int,
               previous_share: float = 0.5) -> Summary:
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
        gone = {sentence_key(s) for t in removed for _, s in labelled_sentences(t, labelled=True, inherit=True)}
        still = {sentence_key(s) for t in added for _, s in labelled_sentences(t, labelled=True, inherit=True)}
        groups = _Groups()
        kept: list[tuple[int, str]] = []
        for g, (label, sentences) in enumerate(summary_lines(previous)):
            key = ("label", label) if label else ("previous", g)
            kept += [(groups.number(key, label), s) for s in sentences
                     if sentence_key(s) not in gone or sentence_key(s) in still]
        seen = {sentence_key(s) for _, s in kept}
        fresh = [(groups.number(("label", label) if label else ("added", i), label), s)
                 for i, t in enumerate(added) for label, s in labelled_sentences(t, labelled=True, inherit=True)
                 if sentence_key(s) not in seen]
        share = min(1.0, max(0.0, previous_share)) if kept and fresh else (1.0 if kept else 0.0)
        units = ([_Sentence(s, g, share / len(kept)) for g, s in kept]
                 + [_Sentence(s, g, (1.0 - share) / len(fresh)) for g, s in fresh])
        text = self._select(units, max_tokens, groups.labels)
        return Summary(text=text, tokens_in=tokens_in, tokens_out=self.tokenizer.count(text) if text else 0)

    def _select(self, units: list[_Sentence], max_tokens: int, labels: dict[int, str] | None = None) -> str:
        """Maximal marginal relevance under the token budget: the most central sentence
        (weighted TF-IDF centroid) less ``redundancy`` times its cosine to the closest one
        already picked, never one at or above ``duplicate`` cosine to a picked one (nor a
        repeat of one). Written one line per group, groups and sentences in input order, a
        group's label (paid from the budget with its first sentence) opening its line."""
        if not units:
            return ""
        labels = labels or {}
        label_cost = {g: self.tokenizer.count(label + LABEL_SEP) for g, label in labels.items() if label}
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
        opened: set[int] = set()  # groups whose label is paid for
        candidates = set(range(n))

        def cost(i: int) -> int:
            g = units[i].group
            return lengths[i] + (label_cost.get(g, 0) if g not in opened else 0)

        while candidates:
            best, best_score = -1, -math.inf
            for i in sorted(candidates):
                if used + cost(i) > max_tokens:
                    continue
                score = central[i] - self.redundancy * closest[i]
                if score > best_score:
                    best, best_score = i, score
            if best < 0:
                break
            chosen.append(best)
            used += cost(best)
            opened.add(units[best].group)
            candidates.discard(best)
            for i in list(candidates):
                closest[i] = max(closest[i], cosine(vecs[i], vecs[best]))
                if closest[i] >= self.duplicate or keys[i] == keys[best]:
                    candidates.discard(i)
        if not chosen:  # every sentence is longer than the budget: the most central one, cut
            i = max(range(n), key=lambda j: central[j])
            spans = self.tokenizer.offsets(units[i].text)[:max_tokens]
            return units[i].text[: spans[-1][1]] if spans else units[i].text
        text = self._render(units, chosen, labels)
        while self.tokenizer.count(text) > max_tokens and len(chosen) > 1:
            chosen.pop()  # the joined text counts more than its sentences (a tokenizer's merges)
            text = self._render(units, chosen, labels)
        return text

    @staticmethod
    def _render(units: list[_Sentence], chosen: list[int], labels: dict[int, str]) -> str:
        lines: dict[int, list[str]] = {}
        for i in sorted(chosen):  # units are in input order, their groups in first-seen order
            lines.setdefault(units[i].group, []).append(units[i].text)
        return "\n".join((labels[g] + LABEL_SEP if labels.get(g) else "") + " ".join(lines[g])
                         for g in sorted(lines))


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
