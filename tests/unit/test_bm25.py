"""BM25 in pure Python (domain.bm25): the order of equal scores and the size of a top-k."""

from __future__ import annotations

from eragraph.domain.bm25 import Bm25Corpus, top_k


def test_equal_scores_are_ordered_by_id_whatever_the_insertion_order():
    corpus = Bm25Corpus()
    for doc_id in ("c", "a", "b"):
        corpus.add(doc_id, "radium glows in the dark")
    corpus.add("z", "polonium was named for Poland")
    hits = corpus.search("radium", 5)
    assert [d for d, _ in hits] == ["a", "b", "c"]
    assert hits[0][1] == hits[1][1] == hits[2][1] > 0
    assert [d for d, _ in top_k([("y", 1.0), ("x", 1.0), ("w", 2.0)], 3)] == ["w", "x", "y"]


def test_a_top_k_of_zero_or_less_is_empty():
    corpus = Bm25Corpus()
    corpus.add("a", "radium")
    corpus.add("b", "polonium")
    assert corpus.search("radium", 1) == corpus.search("radium", 5)[:1] != []
    assert corpus.search("radium", 0) == [] and corpus.search("radium", -3) == []


def test_a_removed_documents_words_are_forgotten_and_scores_are_as_if_never_added():
    """Removal leaves the corpus as if the document never came: its words leave the document
    frequencies (a long-lived process would otherwise keep every word it ever saw), and the
    scores equal those of a corpus built without it."""
    corpus, fresh = Bm25Corpus(), Bm25Corpus()
    for doc_id, text in (("a", "radium glows in the dark"), ("b", "polonium was named for Poland")):
        corpus.add(doc_id, text)
        fresh.add(doc_id, text)
    corpus.add("gone", "curium and radium were found later")
    corpus.delete("gone")
    assert set(corpus.df) == set(fresh.df) and "curium" not in corpus.df
    assert corpus.df["radium"] == 1 and corpus.total_len == fresh.total_len
    assert corpus.search("radium polonium", 5) == fresh.search("radium polonium", 5)
    corpus.delete("gone")  # twice: nothing changes
    assert dict(corpus.df) == dict(fresh.df)


def test_informative_terms_are_those_whose_idf_fts5_does_not_clamp():
    from eragraph.domain.bm25 import idf, informative_terms

    df = {"the": 5, "half": 5, "under": 4, "rare": 1}
    # n = 10: "the" and "half" are in half the rows (log(5.5 / 5.5) = 0, clamped); "under" is not
    assert informative_terms(["the", "rare", "half", "under", "absent"], df, 10) == ["rare", "under"]
    assert idf(10, 5) == 1e-6 and idf(10, 4) > 1e-6
    # nothing informative left: every term is kept (the ranking is FTS5's, noise and all)
    assert informative_terms(["the", "absent"], df, 10) == ["the", "absent"]
    assert informative_terms([], df, 10) == []
