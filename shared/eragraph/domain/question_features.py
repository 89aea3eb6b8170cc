"""phi(q): the syntactic and lexical complexity features of a question (EA-GraphRAG §3.2),
computed from a plain parse (``ParsedQuestion``) so that this module stays free of models and
I/O. providers.question_parser fills a ParsedQuestion from spaCy.

Features (``FEATURE_NAMES``): length, dependency distances (mean, max, share of long-range
dependencies), tree depth and width, clause and subordination counts, coordination, part of
speech counts, entity counts by type, question words, yes/no and comparison cues, lexical
diversity. Counts are raw; the router z-scores them with its stored means and deviations."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import numpy as np

LONG_RANGE = 3  # a dependency spanning more than 3 tokens is long-range
CLAUSE_DEPS = frozenset({"ccomp", "xcomp", "advcl", "acl", "relcl", "csubj", "csubjpass", "parataxis"})
SUBORDINATE_DEPS = frozenset({"mark", "advcl", "relcl", "acl", "ccomp", "csubj"})
WH_WORDS = ("what", "which", "who", "whom", "whose", "when", "where", "how", "why")
YES_NO_OPENERS = frozenset({"is", "was", "are", "were", "do", "does", "did", "can", "could", "has", "have",
                            "had", "will", "would", "should"})
COMPARISON_CUES = frozenset({"both", "same", "either", "neither", "than", "more", "less", "older", "younger",
                             "earlier", "later", "first", "last", "larger", "smaller", "longer", "shorter",
                             "higher", "lower", "between", "compared", "or"})
# entity types as the parser names them (providers.question_parser: runs of proper nouns are
# NAME, numbers NUMBER, four-digit numbers YEAR; an NER model's labels map the same way)
ENTITY_GROUPS = {"name": {"NAME", "PERSON", "ORG", "GPE", "LOC", "FAC", "WORK_OF_ART", "EVENT", "PRODUCT",
                          "NORP", "LAW", "LANGUAGE"},
                 "number": {"NUMBER", "CARDINAL", "ORDINAL", "QUANTITY", "PERCENT", "MONEY"},
                 "year": {"YEAR", "DATE", "TIME"}}


@dataclass(frozen=True)
class Token:
    text: str
    pos: str       # universal POS (NOUN, PROPN, VERB, PUNCT...)
    tag: str       # fine-grained tag (JJR, JJS, WDT...)
    dep: str       # dependency label
    head: int      # index of the head token in the question (itself for a root)
    is_stop: bool = False


@dataclass(frozen=True)
class ParsedQuestion:
    tokens: tuple[Token, ...]
    entities: tuple[tuple[str, str], ...] = ()  # (text, label)
    sentences: int = 1
    noun_chunks: int = 0


FEATURE_NAMES: tuple[str, ...] = (
    "tokens", "chars_per_token", "sentences",
    "dep_dist_mean", "dep_dist_max", "long_range_share", "long_range",
    "depth_max", "depth_mean", "width_max",
    "clauses", "subordinate", "conj", "preps", "possessives", "noun_chunks",
    "nouns", "propn", "verbs", "adjs", "content_share", "type_token_ratio",
    "entities", "distinct_entity_types", "entity_token_share",
    *(f"ent_{g}" for g in ENTITY_GROUPS),
    *(f"wh_{w}" for w in WH_WORDS), "yes_no", "comparison", "comparatives", "quotes",
)


def _depths(heads: list[int]) -> list[int]:
    depths = []
    for i in range(len(heads)):
        d, j, seen = 0, i, set()
        while heads[j] != j and j not in seen:
            seen.add(j)
            j = heads[j]
            d += 1
        depths.append(d)
    return depths


def features(q: ParsedQuestion) -> np.ndarray:
    toks = list(q.tokens)
    words = [t for t in toks if t.pos not in ("PUNCT", "SPACE")]
    n = len(words)
    out = dict.fromkeys(FEATURE_NAMES, 0.0)
    out["tokens"] = float(n)
    out["sentences"] = float(q.sentences)
    out["noun_chunks"] = float(q.noun_chunks)
    if not toks:
        return np.array([out[f] for f in FEATURE_NAMES], dtype=np.float64)
    lower = [t.text.lower() for t in toks]
    out["chars_per_token"] = sum(len(t.text) for t in words) / max(n, 1)
    dists = [abs(t.head - i) for i, t in enumerate(toks) if t.head != i and t.pos != "PUNCT"]
    if dists:
        out["dep_dist_mean"] = float(np.mean(dists))
        out["dep_dist_max"] = float(max(dists))
        out["long_range"] = float(sum(d > LONG_RANGE for d in dists))
        out["long_range_share"] = out["long_range"] / len(dists)
    depths = _depths([min(max(t.head, 0), len(toks) - 1) for t in toks])
    out["depth_max"] = float(max(depths))
    out["depth_mean"] = float(np.mean(depths))
    out["width_max"] = float(max(Counter(depths).values()))
    deps = Counter(t.dep for t in toks)
    out["clauses"] = float(sum(deps[d] for d in CLAUSE_DEPS))
    out["subordinate"] = float(sum(deps[d] for d in SUBORDINATE_DEPS))
    out["conj"] = float(deps["conj"] + deps["cc"])
    out["preps"] = float(deps["prep"] + deps["agent"])
    out["possessives"] = float(deps["poss"] + deps["case"])
    pos = Counter(t.pos for t in words)
    out["nouns"] = float(pos["NOUN"])
    out["propn"] = float(pos["PROPN"])
    out["verbs"] = float(pos["VERB"] + pos["AUX"])
    out["adjs"] = float(pos["ADJ"])
    out["content_share"] = sum(not t.is_stop for t in words) / max(n, 1)
    wl = [t.text.lower() for t in words]
    out["type_token_ratio"] = len(set(wl)) / max(n, 1)
    out["entities"] = float(len(q.entities))
    labels = [label for _, label in q.entities]
    out["distinct_entity_types"] = float(len(set(labels)))
    out["entity_token_share"] = sum(len(text.split()) for text, _ in q.entities) / max(n, 1)
    for g, members in ENTITY_GROUPS.items():
        out[f"ent_{g}"] = float(sum(label in members for label in labels))
    for w in WH_WORDS:
        out[f"wh_{w}"] = float(w in lower)
    first = next((t.text.lower() for t in words), "")
    out["yes_no"] = float(first in YES_NO_OPENERS)
    out["comparison"] = float(sum(w in COMPARISON_CUES for w in lower))
    out["comparatives"] = float(sum(t.tag in ("JJR", "JJS", "RBR", "RBS") for t in toks))
    out["quotes"] = float(sum(t.text in ('"', "“", "”", "'") for t in toks) // 2)
    return np.array([out[f] for f in FEATURE_NAMES], dtype=np.float64)


# ----------------------------------------------------------------------------- without a parse
# The router's default inputs (RouterModel.inputs == "text+vector"): cues read off the
# question's characters in microseconds, next to a projection of the embedding every route
# computes anyway. No tagger, parser or NER: a parse cost 4-7 ms a question, more than the
# router's whole 5 ms budget.

WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*", re.UNICODE)
NAME_RUN = re.compile(r"(?:\b[A-Z][\w'’.-]*(?:\s+(?:of|the|de|von|van|and|&)?\s*[A-Z][\w'’.-]*)*)")
YEAR = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})s?\b")
NUMBER = re.compile(r"\b\d[\d,.]*\b")
RELATIVES = frozenset({"that", "which", "who", "whom", "whose", "where", "when", "while", "because", "although",
                       "whereas", "after", "before", "since", "if"})
STOP = frozenset({"a", "an", "the", "of", "in", "on", "at", "to", "for", "by", "with", "from", "and", "or", "is",
                  "was", "are", "were", "be", "been", "did", "does", "do", "that", "this", "it", "its", "as", "what",
                  "which", "who", "whom", "whose", "when", "where", "how", "why", "has", "have", "had", "not"})

LEXICAL_FEATURE_NAMES: tuple[str, ...] = (
    "words", "chars_per_word", "commas", "names", "name_words_share", "numbers", "years",
    "relatives", "of_count", "possessive", "and_or", "type_token_ratio", "stop_share", "long_words",
    *(f"wh_{w}" for w in WH_WORDS), "wh_first", "yes_no", "comparison", "quotes", "question_mark",
)


def lexical_features(text: str) -> np.ndarray:
    """phi_lex(q): counts and shares read off the question's characters (no model)."""
    out = dict.fromkeys(LEXICAL_FEATURE_NAMES, 0.0)
    words = WORD.findall(text)
    n = len(words)
    out["words"] = float(n)
    if not n:
        return np.array([out[f] for f in LEXICAL_FEATURE_NAMES], dtype=np.float64)
    lower = [w.lower() for w in words]
    out["chars_per_word"] = sum(len(w) for w in words) / n
    out["commas"] = float(text.count(","))
    # capitalized runs after the first word (the first is capitalized as a sentence start)
    first_end = WORD.search(text).end()
    runs = [m.group(0) for m in NAME_RUN.finditer(text, first_end)]
    out["names"] = float(len(runs))
    out["name_words_share"] = sum(len(r.split()) for r in runs) / n
    years = YEAR.findall(text)
    out["years"] = float(len(years))
    out["numbers"] = float(max(len(NUMBER.findall(text)) - len(years), 0))
    out["relatives"] = float(sum(w in RELATIVES for w in lower[1:]))
    out["of_count"] = float(lower.count("of"))
    out["possessive"] = float(sum(w.endswith(("'s", "’s")) for w in lower))
    out["and_or"] = float(sum(w in ("and", "or") for w in lower))
    out["type_token_ratio"] = len(set(lower)) / n
    out["stop_share"] = sum(w in STOP for w in lower) / n
    out["long_words"] = float(sum(len(w) >= 9 for w in words))
    for w in WH_WORDS:
        out[f"wh_{w}"] = float(w in lower)
    out["wh_first"] = float(lower[0] in WH_WORDS)
    out["yes_no"] = float(lower[0] in YES_NO_OPENERS)
    out["comparison"] = float(sum(w in COMPARISON_CUES for w in lower))
    out["quotes"] = float(sum(text.count(q) for q in ('"', "“", "”")) // 2)
    out["question_mark"] = float(text.rstrip().endswith("?"))
    return np.array([out[f] for f in LEXICAL_FEATURE_NAMES], dtype=np.float64)
