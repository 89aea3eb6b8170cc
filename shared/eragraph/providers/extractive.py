"""The default summarizer: extractive, no LLM. It picks the segment's most central sentences
(TF-IDF cosine to the segment centroid, with a redundancy penalty) until the summary token
budget is filled, and keeps them in their original order. Per call it records the tokens an
LLM prompt would have carried in (instruction + all children) and out (the summary), so cost
comparisons between incremental growth and rebuilds are priced as an LLM would be.
``revise`` updates an earlier summary from the children that joined and left its segment,
priced the same way (see services.resummarize for when it is used)."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

from ..domain.text import sentence_key, split_sentences
from ..ports import SummaryResult, Tokenizer

PROMPT = ("Summarize the following passages into one concise paragraph that keeps the key "
          "entities, facts and relations.\n\n")
REVISE_PROMPT = ("Update the summary below: passages marked NEW joined its group and passages marked "
                 "GONE left it. Keep what still holds, drop what only the gone passages said, add "
                 "the key entities, facts and relations of the new ones.\n\n")
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset("""a an the and or of to in on at for by with from as is are was were be been
being it its this that these those he she they his her their them we you i not no but if then
than so such into over after before about also which who whom whose what when where while""".split())


def _terms(sentence: str) -> list[str]:
    return [w for w in _WORD.findall(sentence.lower()) if w not in _STOP and len(w) > 1]


class ExtractiveSummarizer:
    identity = "extractive-tfidf-v1"

    def __init__(self, tokenizer: Tokenizer, redundancy: float = 0.5) -> None:
        self.tokenizer = tokenizer
        self.redundancy = redundancy

    def summarize(self, texts: Sequence[str], max_tokens: int) -> SummaryResult:
        tokens_in = self.tokenizer.count(PROMPT) + sum(self.tokenizer.count(t) for t in texts)
        sentences = [s for t in texts for s in split_sentences(t)]
        text = self._select(sentences, [1.0] * len(sentences), max_tokens)
        return SummaryResult(text=text, tokens_in=tokens_in, tokens_out=self.tokenizer.count(text) if text else 0)

    def revise(self, previous: str, added: Sequence[str], removed: Sequence[str], max_tokens: int,
               previous_share: float = 0.5) -> SummaryResult:
        """Update ``previous`` for children that joined (``added``) and left (``removed``).
        Priced as an LLM would see it: the revision instruction, the previous summary and the
        joined and departed children. A previous sentence that occurs in a departed child and
        in no joined one is dropped; the rest compete with the joined children's sentences,
        the previous ones carrying ``previous_share`` of the centroid's weight (the share of
        the segment they stand for), so the segment's old majority is not drowned out."""
        tokens_in = (self.tokenizer.count(REVISE_PROMPT) + self.tokenizer.count(previous)
                     + sum(self.tokenizer.count(t) for t in added)
                     + sum(self.tokenizer.count(t) for t in removed))
        gone = {sentence_key(s) for t in removed for s in split_sentences(t)}
        fresh = [s for t in added for s in split_sentences(t)]
        still = {sentence_key(s) for s in fresh}
        kept = [s for s in split_sentences(previous) if sentence_key(s) not in gone or sentence_key(s) in still]
        seen = {sentence_key(s) for s in kept}
        fresh = [s for s in fresh if sentence_key(s) not in seen]
        share = min(1.0, max(0.0, previous_share)) if kept and fresh else (1.0 if kept else 0.0)
        weights = ([share / len(kept)] * len(kept) if kept else []) + \
                  ([(1.0 - share) / len(fresh)] * len(fresh) if fresh else [])
        text = self._select(kept + fresh, weights, max_tokens)
        return SummaryResult(text=text, tokens_in=tokens_in, tokens_out=self.tokenizer.count(text) if text else 0)

    def _select(self, sentences: list[str], weights: list[float], max_tokens: int) -> str:
        """The most central sentences (weighted TF-IDF centroid, redundancy penalty) that fit
        ``max_tokens``, in their original order."""
        if not sentences:
            return ""
        bags = [Counter(_terms(s)) for s in sentences]
        df = Counter(term for bag in bags for term in bag)
        n = len(sentences)
        idf = {t: math.log((1 + n) / (1 + c)) + 1.0 for t, c in df.items()}
        vecs = []
        for bag in bags:
            v = {t: (1 + math.log(c)) * idf[t] for t, c in bag.items()}
            norm = math.sqrt(sum(x * x for x in v.values())) or 1.0
            vecs.append({t: x / norm for t, x in v.items()})
        centroid: Counter = Counter()
        for v, w in zip(vecs, weights):
            centroid.update({t: x * w for t, x in v.items()})
        cnorm = math.sqrt(sum(x * x for x in centroid.values())) or 1.0

        def cos(a: dict, b: dict) -> float:
            if len(a) > len(b):
                a, b = b, a
            return sum(x * b.get(t, 0.0) for t, x in a.items())

        central = [cos(v, centroid) / cnorm for v in vecs]
        lengths = [self.tokenizer.count(s) for s in sentences]
        chosen: list[int] = []
        used = 0
        candidates = set(range(n))
        while candidates:
            best, best_score = -1, -math.inf
            for i in sorted(candidates):
                if used + lengths[i] > max_tokens:
                    continue
                penalty = max((cos(vecs[i], vecs[j]) for j in chosen), default=0.0)
                score = central[i] - self.redundancy * penalty
                if score > best_score:
                    best, best_score = i, score
            if best < 0:
                break
            chosen.append(best)
            used += lengths[best]
            candidates.discard(best)
        if not chosen:  # every sentence is longer than the budget: cut the most central one
            i = max(range(n), key=lambda j: central[j])
            spans = self.tokenizer.offsets(sentences[i])[:max_tokens]
            return sentences[i][: spans[-1][1]] if spans else sentences[i]
        return " ".join(sentences[i] for i in sorted(chosen))
