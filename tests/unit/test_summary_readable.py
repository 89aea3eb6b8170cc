"""Extractive summaries a person can read, checked on real MuSiQue passages run through the
real pipeline (chunking with titles, LSH segments, resummarize): whole sentences of the
members' documents only, no bare titles, one line per source document in member order, each
line in its document's order and labelled with its document's title, no near-duplicate pair,
within the token budget; upper layers keep the labels of the sentences they take."""

from __future__ import annotations


import pytest

from eragraph.bench.common import load_corpus
from eragraph.domain.text import split_sentences
from eragraph.providers.extractive import (cosine, is_whole_sentence, labelled_sentences, member_sentences, summary_lines,
                                          tfidf_vectors)
from eragraph.services.ingest import ingest
from eragraph.services.resummarize import drain, member_source
from shared_data import SHARED_DATA, need
from support import make_engine

MUSIQUE = SHARED_DATA / "musique" / "corpus.jsonl"


@pytest.fixture(scope="module", autouse=True)
def _musique():  # module scope: before the module-scoped fixtures that read it
    need(MUSIQUE)  # skips without the corpus, fails under CI


# short chunks so that many passages span several chunks (cut mid-sentence at both ends)
SETTINGS = dict(chunk_tokens=80, chunk_overlap=16, summary_tokens=60)


def build(docs, **overrides):
    engine = make_engine(**{**SETTINGS, **overrides})
    ingest(engine, docs)
    drain(engine)
    return engine


def summaries(engine, layer):
    refs = engine.graph.layer_refs(layer)
    return list(engine.graph.get_nodes(r.node_id for r in refs).values())


@pytest.fixture(scope="module")
def corpus():
    docs = load_corpus(MUSIQUE, limit=240)
    return docs, {d.doc_id: d for d in docs}


@pytest.fixture(scope="module")
def engine(corpus):
    return build(corpus[0])


def holds_a_whole_sentence(members) -> bool:
    """Whether any member chunk has a sentence its token window did not cut (the summarizer
    falls back to the members' pieces when none has)."""
    return any(labelled_sentences(m.text, src.at_start, at_end=src.at_end)
               for m in members for src in [member_source(m, SETTINGS["chunk_tokens"])])


def test_layer_one_summaries_are_whole_grouped_ordered_sentences(corpus, engine):
    _, by_id = corpus
    titles = {d.title for d in by_id.values()}
    nodes = summaries(engine, 1)
    assert len(nodes) >= 20
    multi_chunk = fallbacks = 0
    for node in nodes:
        assert 0 < node.tokens <= SETTINGS["summary_tokens"]
        members = [engine.graph.get_nodes([c])[c] for c in node.children]
        if not holds_a_whole_sentence(members):  # only cut pieces: the summary is made of them
            fallbacks += 1  # (cut to the budget, as any picked piece may be)
            assert all(any(s in m.text for m in members) for _, ss in summary_lines(node.text) for s in ss), node.text
            continue
        doc_order = list(dict.fromkeys(m.doc_id for m in members))
        multi_chunk += len(doc_order) < len(members)
        lines = summary_lines(node.text)
        line_docs = []
        for label, sentences in lines:
            assert sentences, node.text
            # every sentence is a whole sentence of one document of this segment, not its title
            owners = [d for d in doc_order if all(s in split_sentences(by_id[d].text) for s in sentences)]
            assert owners, f"a line mixes documents or holds a piece that is no sentence: {sentences!r}"
            doc = owners[0]
            # the label is the document's title (every MuSiQue passage has one), read from its
            # first chunk: a line of a document whose first chunk is in another segment has none
            firsts = {m.doc_id for m in members if member_source(m).at_start}
            assert label == (by_id[doc].title if doc in firsts else ""), (label, doc)
            line_docs.append(doc)
            whole = split_sentences(by_id[doc].text)
            for s in sentences:
                assert s not in titles and is_whole_sentence(s), s
            positions = [whole.index(s) for s in sentences]
            assert positions == sorted(positions), f"not in the document's order: {line!r}"
        # one line per document, documents in member order
        assert len(set(line_docs)) == len(line_docs)
        assert line_docs == sorted(line_docs, key=doc_order.index)
        # no pair of output sentences at or above the duplicate threshold (the summarizer's own
        # TF-IDF over the segment's candidate sentences)
        candidates = [s for m in members for s in member_sentences(m.text, member_source(m).at_start)]
        vecs = dict(zip(candidates, tfidf_vectors(candidates)))
        out = [s for _, sentences in lines for s in sentences]
        assert len({s.lower() for s in out}) == len(out)
        for i, a in enumerate(out):
            for b in out[i + 1:]:
                assert cosine(vecs[a], vecs[b]) < engine.summarizer.duplicate, (a, b)
    assert multi_chunk >= 1  # documents cut into several chunks were summarized together
    assert fallbacks <= len(nodes) // 10  # the fallback stays the exception


def test_upper_layers_keep_whole_sentences_of_their_members(engine):
    for layer in range(2, max(engine.graph.layer_sizes()) + 1):
        for node in summaries(engine, layer):
            children = engine.graph.get_nodes(node.children)
            member_said = {(label, s) for c in children.values() for label, ss in summary_lines(c.text) for s in ss}
            labels = [label for label, _ in summary_lines(node.text) if label]
            assert len(set(labels)) == len(labels), node.text  # one line per titled document
            for label, sentences in summary_lines(node.text):
                for s in sentences:  # a member's sentence, under the label it had there
                    assert (label, s) in member_said and is_whole_sentence(s), (label, s)


def test_revised_summaries_stay_whole_sentences(corpus):
    """Growth with delta summaries (revise instead of resummarize): the revision path must not
    glue a chunk's title line to the next sentence either."""
    docs, by_id = corpus
    engine = build(docs[:120], delta_summaries=True)
    report = ingest(engine, docs[120:])
    report.merge(drain(engine))
    assert sum(report.summaries_revised.values()) >= 1
    said = {s for d in docs for s in split_sentences(d.text)}
    titles = {d.title for d in docs}
    for layer in range(1, max(engine.graph.layer_sizes()) + 1):
        for node in summaries(engine, layer):
            children = engine.graph.get_nodes(node.children).values()
            for label, sentences in summary_lines(node.text):
                assert not label or label in titles, label
                for s in sentences:  # a document's sentence; or a piece of a member, where a
                    # segment held no whole sentence (the summarizer's fallback)
                    if s in said:
                        assert s not in titles and is_whole_sentence(s), s
                    else:
                        assert any(s in c.text for c in children) and s not in titles, s
