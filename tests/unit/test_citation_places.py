"""Citations people can check: every chunk keeps its place in its document (character offsets,
and the pages of a PDF or of a DOCX that marks its page breaks), read by the same extractors,
and the places reach every door (POST /query's results, Bedrock's Retrieve metadata keys, the
RetrieveAndGenerate citations' spans, the OpenAI ``citations`` field).

The page check is against the PDF itself: a generated corpus whose every word names its page
(``p3w17``), each page read back alone with pypdf, and every chunk's pages must be the first
and last page of the words it holds."""

from __future__ import annotations

import random
import re
import sqlite3

import pytest
from file_builders import docx_bytes, pdf_bytes
from support import make_engine

from eragraph.domain.citations import cited_parts
from eragraph.domain.places import check_page_starts, describe, page_at, place_of
from eragraph.domain.text import chunk_text, regex_offsets
from eragraph.providers.extractors import ReadLimits, extract
from eragraph.services import ingest
from eragraph.services.query import query
from eragraph.services.sources import read_document

WORD = re.compile(r"p(\d+)w\d+")


def paged_corpus(seed: int, documents: int) -> list[tuple[str, list[str]]]:
    """(name, pages' texts) of ``documents`` PDFs of 1..9 pages, some pages blank (no text:
    a scanned page), some short, some long enough for several chunks."""
    rng = random.Random(seed)
    out = []
    for d in range(documents):
        pages = []
        for p in range(1, rng.randint(1, 9) + 1):
            words = 0 if (p > 1 and rng.random() < 0.15) else rng.choice([3, 20, 120, 260])
            pages.append(" ".join(f"p{p}w{i}" for i in range(words)))
        out.append((f"doc{d}.pdf", pages))
    return out


def test_every_chunk_of_a_generated_pdf_corpus_has_its_pages_right():
    import io

    import pypdf

    checked = paged = 0
    for name, pages in paged_corpus(seed=58, documents=12):
        data = pdf_bytes(pages)
        # the truth, from the PDF: the page each word is printed on, each page read alone
        truth = {}
        for number, page in enumerate(pypdf.PdfReader(io.BytesIO(data)).pages, start=1):
            for word in WORD.finditer(page.extract_text() or ""):
                truth[word.group(0)] = number
        [doc] = read_document(data, name, name, name, ReadLimits(), [])
        assert doc.pages and all(int(p) == n for p, (_, n) in zip([m[1] for m in doc.pages], doc.pages))
        for chunk in chunk_text(doc.text, regex_offsets, size=40, overlap=8):
            assert doc.text[chunk.start:chunk.end] == chunk.text
            start, end, first, last = place_of(chunk.start, chunk.end, doc.pages)
            printed = [truth[w.group(0)] for w in WORD.finditer(chunk.text)]
            assert (first, last) == (min(printed), max(printed)), (name, chunk.text[:60])
            checked += 1
            paged += first != last
    assert checked > 100 and paged > 5  # chunks across a page break were among them


def test_chunk_offsets_are_exact_substrings_of_the_text():
    rng = random.Random(3)
    for _ in range(30):
        text = "".join(rng.choice(["  ", "\n\n", " word", " x.", "\t", "Ünïcode", " ✓ "]) for _ in range(300))
        for chunk in chunk_text(text, regex_offsets, size=rng.randint(2, 30), overlap=1):
            assert text[chunk.start:chunk.end] == chunk.text and chunk.text == chunk.text.strip()


def test_page_lookup_and_description():
    starts = ((0, 1), (100, 3), (250, 4))  # page 2 had no text
    assert [page_at(o, starts) for o in (0, 99, 100, 249, 250, 10_000)] == [1, 1, 3, 3, 4, 4]
    assert place_of(90, 120, starts) == (90, 120, 1, 3)
    assert place_of(5, 9) == (5, 9)
    assert describe((90, 120, 1, 3)) == {"start": 90, "end": 120, "page": 1, "pages": [1, 3]}
    assert describe((5, 9)) == {"start": 5, "end": 9} and describe(()) is None
    assert check_page_starts([(0, 1), (10, 2)], 20) == ((0, 1), (10, 2))
    for bad in ([(0, 1), (0, 2)], [(0, 2), (5, 1)], [(30, 1)], [(0, 0)]):
        with pytest.raises(ValueError):
            check_page_starts(bad, 20)


def _docx_with_breaks(pages: list[list[str]]) -> bytes:
    import io

    import docx
    from docx.enum.text import WD_BREAK

    document = docx.Document()
    for n, paragraphs in enumerate(pages):
        for i, text in enumerate(paragraphs):
            paragraph = document.add_paragraph(text)
            if n < len(pages) - 1 and i == len(paragraphs) - 1:
                paragraph.add_run().add_break(WD_BREAK.PAGE)  # a hard page break after its text
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def test_docx_pages_come_from_its_page_breaks_and_none_without():
    pages = [["p1w0 p1w1", "p1w2"], ["p2w0 p2w1"], ["p3w0", "p3w1 p3w2"]]
    got = extract(_docx_with_breaks(pages), "paged.docx")
    for word in WORD.finditer(got.text):
        assert page_at(word.start(), got.pages) == int(word.group(1))
    assert [n for _, n in got.pages] == [1, 2, 3]
    assert extract(docx_bytes(["one paragraph", "another"]), "plain.docx").pages == ()  # no breaks: no pages


def test_ingested_chunks_carry_their_places_to_the_query_results():
    engine = make_engine()
    pages = [" ".join(f"p{p}w{i} lighthouse" for i in range(60)) for p in (1, 2, 3)]
    [doc] = read_document(pdf_bytes(pages), "log.pdf", "s3://bucket/log.pdf", "log", ReadLimits(), [])
    ingest.ingest(engine, [doc, ingest.SourceDoc(source="notes.txt", text="The lighthouse notes. " * 30)])
    out = query(engine, "lighthouse p2w7", mode="dense", k=20).to_dict()
    leaves = [r for r in out["results"] if r["layer"] == 0]
    assert leaves and all(r["place"] is not None for r in leaves)
    for r in leaves:
        place = r["place"]
        if r["source"] == "notes.txt":
            assert "page" not in place
        else:
            printed = [int(m.group(1)) for m in WORD.finditer(r["text"])]
            assert place["pages"] == [min(printed), max(printed)] and place["page"] == min(printed)
        assert place["end"] - place["start"] == len(r["text"])
    assert "places were recorded" not in out["note"]


def test_a_store_from_before_places_opens_and_its_chunks_say_they_have_none(tmp_path):
    from eragraph.adapters.local.graph_sqlite import SqliteGraphStore

    path = tmp_path / "graph.sqlite"
    SqliteGraphStore(path).close()
    conn = sqlite3.connect(path)  # the nodes table as it was: no place column
    conn.execute("ALTER TABLE nodes DROP COLUMN place")
    conn.execute("INSERT INTO nodes (node_id, layer, text, tokens, code, doc_id, source, children) "
                 "VALUES ('old', 0, 'old text', 2, 1, 'd', 's', '[]')")
    conn.commit()
    conn.close()
    store = SqliteGraphStore(path)
    assert store.get_nodes(["old"])["old"].place == ()
    engine = make_engine()
    ingest.ingest(engine, [ingest.SourceDoc(source="a.txt", text="The keeper writes the log. " * 5)])
    [leaf] = [n for n in engine.graph.get_nodes(engine.graph.get_document(
        ingest.document_id_for_source("a.txt")).chunk_ids).values()]
    from dataclasses import replace

    engine.graph.put_nodes([replace(leaf, place=())])  # as a chunk stored before places
    out = query(engine, "keeper log", mode="dense", k=3)
    assert out.to_dict()["results"][0]["place"] is None and "places were recorded" in out.note


def test_cited_parts_span_each_cited_sentence():
    text = "Paris is the capital [chk-a]. It is large. It has two airports [chk-b, chk-a]. That is all."
    parts = cited_parts(text, ["chk-a", "chk-b"])
    assert [(text[s:e + 1], ids) for s, e, ids in parts] == [
        ("Paris is the capital [chk-a].", ("chk-a",)),
        ("It is large. It has two airports [chk-b, chk-a]. That is all.", ("chk-b", "chk-a"))]
    assert cited_parts("Nothing cited.", ["chk-a"]) == [(0, 13, ())]
    assert cited_parts("", ["chk-a"]) == []
    long = "A sentence [1]. " * 20_000  # linear: a long answer is cut quickly
    assert len(cited_parts(long.strip(), ["chk-a"])) == 20_000


class SentenceCitingGenerator:
    """Answers two sentences, each citing one piece of evidence in brackets, as a model does."""

    identity = "stand-in"

    def answer(self, question, evidence, **_):
        from eragraph.ports.records import Answer

        (a, _), (b, _) = evidence[0], evidence[1]
        text = f"The first part is from one page [{a}]. The second from another [{b}]."
        return Answer(text=text, cited_ids=(a, b), tokens_in=10, tokens_out=5, model="stand-in")


def test_bedrock_clients_see_page_numbers_chunk_ids_and_cited_spans():
    pytest.importorskip("aws_lambda_powertools")
    from test_bedrock_kb_generate import client_of

    from eragraph.domain.knowledge_base import knowledge_base_id

    engine = make_engine()
    pages = [" ".join(f"p{p}w{i} harbour" for i in range(50)) for p in (1, 2, 3, 4)]
    [doc] = read_document(pdf_bytes(pages), "harbour.pdf", "s3://bucket/harbour.pdf", "h", ReadLimits(), [])
    ingest.ingest(engine, [doc])
    client = client_of(engine)
    kb = knowledge_base_id("")
    got = client.retrieve(knowledgeBaseId=kb, retrievalQuery={"text": "harbour p3w5"}, retrievalConfiguration={
        "vectorSearchConfiguration": {"numberOfResults": 5, "overrideSearchType": "SEMANTIC"}})["retrievalResults"]
    leaves = [r for r in got if r["metadata"]["x-eragraph-layer"] == 0]
    assert leaves
    for r in leaves:
        meta = r["metadata"]
        assert meta["x-amz-bedrock-kb-source-uri"] == "s3://bucket/harbour.pdf"
        assert meta["x-amz-bedrock-kb-chunk-id"] == meta["x-eragraph-node-id"]
        printed = [int(m.group(1)) for m in WORD.finditer(r["content"]["text"])]
        assert meta["x-amz-bedrock-kb-document-page-number"] == min(printed)
        assert meta["x-eragraph-pages"] == [min(printed), max(printed)]
        assert doc.text[meta["x-eragraph-start"]:meta["x-eragraph-end"]] == r["content"]["text"]

    engine.generator = SentenceCitingGenerator()
    out = client.retrieve_and_generate(input={"text": "harbour p3w5"}, retrieveAndGenerateConfiguration={
        "type": "KNOWLEDGE_BASE", "knowledgeBaseConfiguration": {
            "knowledgeBaseId": kb, "modelArn": "arn:aws:bedrock:us-east-1::foundation-model/stand-in",
            "retrievalConfiguration": {"vectorSearchConfiguration": {"numberOfResults": 3,
                                                                     "overrideSearchType": "SEMANTIC"}}}})
    text = out["output"]["text"]
    first, second = out["citations"]
    for citation, opening in ((first, "The first part"), (second, "The second")):
        part = citation["generatedResponsePart"]["textResponsePart"]
        span = part["span"]
        assert text[span["start"]:span["end"] + 1] == part["text"] and part["text"].startswith(opening)
        [ref] = citation["retrievedReferences"]  # each sentence cites one piece of evidence
        assert ref["metadata"]["x-amz-bedrock-kb-chunk-id"] in part["text"]
    assert first["retrievedReferences"] != second["retrievedReferences"]


def test_the_openai_citations_field_carries_pages_and_offsets():
    from eragraph.entrypoints import openai_chat

    engine = make_engine()
    pages = [" ".join(f"p{p}w{i} tide" for i in range(50)) for p in (1, 2)]
    [doc] = read_document(pdf_bytes(pages), "tide.pdf", "s3://bucket/tide.pdf", "t", ReadLimits(), [])
    ingest.ingest(engine, [doc])
    engine.generator = SentenceCitingGenerator()
    request = openai_chat.parse_request(engine, {"model": "eragraph-dense", "messages": [
        {"role": "user", "content": "tide p2w3"}]})
    body = openai_chat.completion(engine, request)
    assert body["citations"]
    for c in body["citations"]:
        assert set(c["place"]) >= {"start", "end", "page", "pages"}
    assert ", page" in body["choices"][0]["message"]["content"]  # the Sources list names the page
