"""The extractive summarizer: central sentences, within budget, LLM-priced token counts."""

from __future__ import annotations

from eragraph.domain.text import split_sentences
from eragraph.providers.extractive import PROMPT, REVISE_PROMPT, ExtractiveSummarizer
from eragraph.providers.hashing import RegexTokenizer

TOK = RegexTokenizer()

ON_TOPIC = [
    "The telescope observed the comet near the planet Jupiter.",
    "Astronomers tracked the comet orbit with a large telescope.",
    "The comet passed the planet and its moon during the eclipse.",
    "A telescope photographed the comet tail beside the planet.",
]
OFF_TOPIC = "Grandmother baked butter croissants with flour and sugar yesterday."


def test_summary_within_budget_and_made_of_input_sentences():
    summ = ExtractiveSummarizer(TOK)
    texts = [" ".join(ON_TOPIC[:2]), " ".join(ON_TOPIC[2:]), OFF_TOPIC]
    all_sentences = set(s for t in texts for s in split_sentences(t))
    for budget in (8, 12, 25, 40, 1000):
        result = summ.summarize(texts, budget)
        assert result.tokens_out == TOK.count(result.text)
        assert result.tokens_out <= budget
        if budget >= 12:
            picked = split_sentences(result.text)
            assert picked and all(s in all_sentences for s in picked)


def test_sentences_keep_their_original_order():
    result = ExtractiveSummarizer(TOK).summarize(ON_TOPIC, 1000)
    assert result.text == "\n".join(ON_TOPIC)  # each text its own group (no sources given): a line each
    one = ExtractiveSummarizer(TOK).summarize([" ".join(ON_TOPIC)], 1000)
    assert one.text == " ".join(ON_TOPIC)


def test_tokens_in_counts_prompt_and_every_child():
    texts = [ON_TOPIC[0], ON_TOPIC[1], OFF_TOPIC]
    result = ExtractiveSummarizer(TOK).summarize(texts, 10)
    assert result.tokens_in == TOK.count(PROMPT) + sum(TOK.count(t) for t in texts)


def test_central_sentence_preferred_over_off_topic():
    # budget for exactly one sentence: it must be on topic
    result = ExtractiveSummarizer(TOK).summarize(ON_TOPIC + [OFF_TOPIC], 13)
    assert result.text in ON_TOPIC
    # with room for three, the redundancy penalty may let the outlier in for coverage, but the
    # on-topic majority still dominates
    bigger = ExtractiveSummarizer(TOK).summarize([OFF_TOPIC] + ON_TOPIC, 40)
    assert sum(s in bigger.text for s in ON_TOPIC) >= 2


def test_over_long_sentence_is_cut_to_budget():
    long = "Comet " + " ".join(f"w{i}" for i in range(60)) + "."
    result = ExtractiveSummarizer(TOK).summarize([long], 10)
    assert result.tokens_out == 10
    assert long.startswith(result.text)


def test_empty_input():
    result = ExtractiveSummarizer(TOK).summarize(["", "   "], 20)
    assert result.text == "" and result.tokens_out == 0
    assert result.tokens_in == TOK.count(PROMPT)


def test_deterministic():
    texts = [" ".join(ON_TOPIC), OFF_TOPIC, "The moon orbit is a solar puzzle. Stars shine."]
    a = ExtractiveSummarizer(TOK).summarize(texts, 30)
    b = ExtractiveSummarizer(TOK).summarize(list(texts), 30)
    assert a == b


# ---------------------------------------------------------------- revise

def test_revise_prices_prompt_previous_joined_and_departed():
    s = ExtractiveSummarizer(TOK)
    previous, added, removed = ON_TOPIC[0] + " " + ON_TOPIC[1], [ON_TOPIC[2]], [ON_TOPIC[1]]
    result = s.revise(previous, added, removed, 40)
    expected = TOK.count(REVISE_PROMPT) + TOK.count(previous) + TOK.count(added[0]) + TOK.count(removed[0])
    assert result.tokens_in == expected
    assert result.tokens_out == TOK.count(result.text) <= 40


def test_revise_drops_what_only_departed_children_said():
    s = ExtractiveSummarizer(TOK)
    previous = " ".join(ON_TOPIC[:2]) + " " + OFF_TOPIC
    result = s.revise(previous, [ON_TOPIC[2]], [OFF_TOPIC], 200)
    sentences = split_sentences(result.text)
    assert OFF_TOPIC not in sentences
    assert set(sentences) <= set(ON_TOPIC[:3])
    assert ON_TOPIC[2] in sentences  # the budget fits everything left


def test_revise_keeps_a_sentence_a_joined_child_still_says():
    s = ExtractiveSummarizer(TOK)
    result = s.revise(ON_TOPIC[0], [ON_TOPIC[0] + " " + ON_TOPIC[3]], [ON_TOPIC[0]], 200)
    assert split_sentences(result.text).count(ON_TOPIC[0]) == 1


def test_revise_previous_share_weighs_the_old_majority():
    s = ExtractiveSummarizer(TOK, redundancy=0.0)
    previous = " ".join(ON_TOPIC[:3])
    budget = TOK.count(ON_TOPIC[0]) + 1  # room for one sentence
    heavy = s.revise(previous, [OFF_TOPIC], [], budget, previous_share=0.95)
    light = s.revise(previous, [OFF_TOPIC], [], budget, previous_share=0.01)
    assert heavy.text in ON_TOPIC
    assert light.text == OFF_TOPIC


# ---------------------------------------------------------------- readable summaries

def test_title_lines_and_cut_pieces_are_not_sentences():
    from eragraph.domain.text import titled_text
    from eragraph.ports.records import MemberSource

    first = titled_text("Comet Halley", ON_TOPIC[0] + " " + ON_TOPIC[1][:30])
    later = "orbit with a large telescope. " + ON_TOPIC[2]
    result = ExtractiveSummarizer(TOK).summarize(
        [first, later], 1000, [MemberSource("doc-a", True), MemberSource("doc-a", False)])
    # one document: one line, labelled with its title; the title is no sentence, the cut-off
    # end and the cut-off start are gone
    assert result.text == "Comet Halley \u2014 " + ON_TOPIC[0] + " " + ON_TOPIC[2]


def test_labels_survive_a_summary_of_summaries_and_merge_per_document():
    from eragraph.ports.records import MemberSource
    from eragraph.providers.extractive import summary_lines

    s = ExtractiveSummarizer(TOK, redundancy=0.0, duplicate=1.01)
    halley = s.summarize(["Comet Halley\n\n" + ON_TOPIC[0]], 1000, [MemberSource("a")]).text
    jupiter = s.summarize(["Jupiter\n\n" + ON_TOPIC[3]], 1000, [MemberSource("b")]).text
    # a later child summary holds another sentence of Halley's document, under the same label
    halley2 = s.summarize(["Comet Halley\n\n" + ON_TOPIC[1]], 1000, [MemberSource("c")]).text
    up = s.summarize([halley, jupiter, halley2], 1000,
                     [MemberSource(n, True, summary=True) for n in ("s1", "s2", "s3")])
    assert summary_lines(up.text) == [("Comet Halley", [ON_TOPIC[0], ON_TOPIC[1]]), ("Jupiter", [ON_TOPIC[3]])]
    # the label is paid from the budget: room for one sentence but not its label leaves it out
    tight = s.summarize(["Comet Halley\n\n" + ON_TOPIC[0]], TOK.count(ON_TOPIC[0]), [MemberSource("a")])
    assert tight.tokens_out <= TOK.count(ON_TOPIC[0])


def test_revise_keeps_labels_and_labels_joined_children():
    from eragraph.providers.extractive import summary_lines

    s = ExtractiveSummarizer(TOK, redundancy=0.0, duplicate=1.01)
    previous = "Comet Halley \u2014 " + ON_TOPIC[0] + "\n" + ON_TOPIC[2]
    revised = s.revise(previous, ["Jupiter\n" + ON_TOPIC[3]], [ON_TOPIC[2]], 1000)
    assert summary_lines(revised.text) == [("Comet Halley", [ON_TOPIC[0]]), ("Jupiter", [ON_TOPIC[3]])]


def test_a_sentence_with_a_dash_is_not_taken_for_a_label():
    from eragraph.providers.extractive import split_label

    assert split_label("Paris \u2014 the capital \u2014 is large.") == ("", "Paris \u2014 the capital \u2014 is large.")
    assert split_label("He said so. Then \u2014 The end.") == ("", "He said so. Then \u2014 The end.")
    assert split_label("Dr. No \u2014 The film opened in 1962.") == ("Dr. No", "The film opened in 1962.")


def test_a_documents_first_chunk_leads_its_group_and_groups_follow_member_order():
    from eragraph.ports.records import MemberSource

    texts = ["cut start. " + ON_TOPIC[1], ON_TOPIC[3], ON_TOPIC[0]]
    sources = [MemberSource("doc-a", False), MemberSource("doc-b", True), MemberSource("doc-a", True)]
    result = ExtractiveSummarizer(TOK).summarize(texts, 1000, sources)
    assert result.text.split("\n") == [ON_TOPIC[0] + " " + ON_TOPIC[1], ON_TOPIC[3]]


def test_near_duplicates_are_left_out():
    near = ON_TOPIC[0].replace("near", "close to")
    result = ExtractiveSummarizer(TOK).summarize([ON_TOPIC[0], near, ON_TOPIC[0], OFF_TOPIC], 1000)
    picked = split_sentences(result.text)
    assert len(picked) == 2 and OFF_TOPIC in picked


def test_sources_must_match_texts():
    import pytest

    from eragraph.ports.records import MemberSource

    with pytest.raises(ValueError):
        ExtractiveSummarizer(TOK).summarize(["A b c d."], 10, [MemberSource("a"), MemberSource("b")])


def test_a_piece_opening_with_a_number_is_not_taken_for_a_sentence():
    from eragraph.providers.extractive import is_whole_sentence

    # a revision's joined text may begin where a chunk window cut a date in two
    assert not is_whole_sentence("1 October 1992 and, in that capacity, served twice as interim president.")
    assert is_whole_sentence("He was President of the Senate until 1 October 1992.")


def test_a_child_summary_without_labels_stays_one_line():
    from eragraph.ports.records import MemberSource
    from eragraph.providers.extractive import summary_lines

    s = ExtractiveSummarizer(TOK, redundancy=0.0, duplicate=1.01)
    child = ON_TOPIC[0] + " " + ON_TOPIC[1]  # a summary of untitled documents: one unlabelled line
    up = s.summarize([child, "Jupiter \u2014 " + ON_TOPIC[3]], 1000,
                     [MemberSource("s1", summary=True), MemberSource("s2", summary=True)])
    assert summary_lines(up.text) == [("", [ON_TOPIC[0], ON_TOPIC[1]]), ("Jupiter", [ON_TOPIC[3]])]
